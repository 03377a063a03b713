"""cdk-nag (AwsSolutions) runs on every synthesis; each finding we accept is acknowledged here,
next to the reason it is acceptable. Everything else is fixed in the constructs."""
from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Token, Validations
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigw2
from aws_cdk import aws_lambda as lambda_


PACK = "AwsSolutions"


def _acknowledge(scope, rule: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{PACK}::{rule}", reason=reason))


def apply_checks(app) -> None:
    from cdk_nag import AwsSolutionsChecks

    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge_findings(stack: Stack, functions: dict[str, lambda_.Function], api: apigw.RestApi | apigw2.HttpApi,
                         targets_role=None, container_grants: tuple[str, ...] = (), key_grants: tuple[str, ...] = (),
                         table_names: dict[str, str] | None = None) -> None:
    # As cdk-nag renders a resolved ARN: literals where the stack has them (a concrete region gives
    # a literal partition with @aws-cdk/core:enablePartitionLiterals), else the pseudo parameter.
    partition = "<AWS::Partition>" if Token.is_unresolved(stack.partition) else stack.partition
    account = "<AWS::AccountId>" if Token.is_unresolved(stack.account) else stack.account
    for name, fn in functions.items():
        role = fn.role
        for table, table_name in (table_names or {}).items():
            # Regions: a stack that references the global tables by name (regions.py) names their
            # indexes by the same pattern, with the name in place of the resource's attribute.
            _acknowledge(role, f"AwsSolutions-IAM5[Resource::arn:{partition}:dynamodb:{stack.region}:"
                               f"{account}:table/{table_name}/index/*]",
                f"The {table} table's indexes ({'JobsByStateShard, and JobsByState where kept' if table == 'Jobs' else 'DeadLetters'}) "
                         "in this region's replica; CDK's table grants name indexes with this pattern.")
        _acknowledge(role, "AwsSolutions-IAM5[Resource::*]",
            "X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions "
                   "(with `-c tracing=on`, active tracing on every function); every other statement names its resources.")
        _acknowledge(role, "AwsSolutions-IAM5[Resource::<StorageExecutions50E2CF2D.Arn>/index/*]",
            "The Executions table's only index is DeadLetters (sparse, dead executions only); CDK's "
                   "table grants name indexes with this pattern.")
        _acknowledge(role, "AwsSolutions-IAM5[Resource::<StorageJobs4C7573CB.Arn>/index/*]",
            "The Jobs table's indexes are JobsByStateShard and, where a deployment keeps it, JobsByState (keys "
                   "only: tenant, state, job id), which the API queries for GET /v1/jobs?state=; only the "
                   "API holds dynamodb:Query on the Jobs table, so the other functions' grants name them "
                   "without being able to read them.")
    if targets_role is not None:
        for pattern in (f"arn:{partition}:sqs:*:{account}:*", f"arn:{partition}:sns:*:{account}:*",
                        f"arn:{partition}:events:*:{account}:event-bus/*",
                        f"arn:{partition}:lambda:*:{account}:function:*"):
            _acknowledge(targets_role, f"AwsSolutions-IAM5[Resource::{pattern}]",
                "Job targets are queues, topics, buses and functions that tenants name at run time; the "
                       "targets role gets one send/publish/put/invoke action each, within this account, and "
                       "only on resources tagged jobsched:tenant with the session's own tenant "
                       "(aws:ResourceTag = aws:PrincipalTag), so a tenant reaches only what was granted to it.")
    if targets_role is not None:
        for pattern in (f"arn:{partition}:kms:*:{account}:key/*", *key_grants):
            _acknowledge(targets_role, f"AwsSolutions-IAM5[Resource::{pattern}]",
                "Encrypted targets (SSE-KMS): SQS and SNS ask KMS for data keys with the sender's credentials. "
                       "kms:GenerateDataKey and kms:Decrypt only, only through SQS or SNS (kms:ViaService), on keys "
                       "tagged jobsched:tenant with the session's own tenant or listed by the operator "
                       "(targetKeyArnPatterns).")
    if targets_role is not None and container_grants:
        # Container tasks (ECS_TASK), only when an operator granted task definitions and clusters.
        for pattern in container_grants:
            _acknowledge(targets_role, f"AwsSolutions-IAM5[Resource::{pattern}]",
                "Container jobs run the task definitions and pass the roles the operator lists "
                       "(ecsTaskDefinitions, ecsTaskRoles; RunTask also needs the task definition tagged "
                       "jobsched:tenant with the session's tenant, and PassRole is to ecs-tasks.amazonaws.com "
                       "only); families and revisions are named by the operator's patterns.")
        for pattern in (f"arn:{partition}:ecs:*:{account}:task/*",
                        f"arn:{partition}:ecs:*:{account}:container-instance/*"):
            _acknowledge(targets_role, f"AwsSolutions-IAM5[Resource::{pattern}]",
                "Task ids are made by ECS at RunTask: DescribeTasks, StopTask, ListTasks and the tags "
                       "RunTask puts on a task (ecs:CreateAction = RunTask) are allowed on this account's "
                       "tasks only under the condition ecs:cluster in the granted clusters.")
    if isinstance(api, apigw.RestApi):
        # CDK names AWS managed policies with the partition pseudo parameter in every stack.
        _acknowledge(api, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
               "AmazonAPIGatewayPushToCloudWatchLogs]",
            "API Gateway's account-level logging role (needed for the stage's access and error logs) takes "
                   "this AWS managed policy, which only writes logs.")
    for rule, reason in (
        ("AwsSolutions-APIG4", "Tenants' Bearer API keys (stored hashed) are checked by the HTTP API's Lambda "
                               "authorizer on every route that takes one; the routes without it take no key: "
                               "/v1/health, /v1/openapi.json, the console's files, and the callbacks of long-running "
                               "targets, which carry per-attempt callback tokens checked by the API function. The "
                               "REST API (-c api=rest) has the same authorizer (REQUEST type) on every other method."),
        ("AwsSolutions-COG4", "Tenants authenticate with API keys, not Cognito users (see AwsSolutions-APIG4)."),
        ("AwsSolutions-APIG2", "Bodies and parameters are validated by the function against the API's models, with "
                               "errors that name the field. The HTTP API (default) has no request validator; on the "
                               "REST API (-c api=rest) one proxy method serves every route, so a body model there "
                               "would check nothing (or the wrong shape)."),
        ("AwsSolutions-APIG3", "A WAF web ACL is an account-level choice with its own cost; stage throttling and the "
                               "per-tenant quotas bound the load. An HTTP API cannot take one: deploy -c api=rest "
                               "and attach it with the stage ARN."),
    ):
        _acknowledge(api, rule, reason=reason)
