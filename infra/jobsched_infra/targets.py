"""What the worker may call on behalf of jobs: a tenant reaches only what was granted to it.

The worker's own role holds no target permission. For each tenant it assumes the targets role
with one session tag, `jobsched:tenant = <tenant id>` (store/targets.py, TenantSessions), and the
targets role allows the four target actions only on resources that carry the same tag:
`aws:ResourceTag/jobsched:tenant == ${aws:PrincipalTag/jobsched:tenant}`. IAM, not our code,
keeps tenant A from sending to tenant B's queue. `targetArnPatterns` (CDK context) is an opt-in
broader grant: resources matching it are reachable by every tenant, tagged or not.

A queue or topic encrypted with a customer-managed KMS key (SSE-KMS) also needs the sender's
kms:GenerateDataKey and kms:Decrypt on that key: SQS and SNS call KMS with the caller's credentials
(`grant_target_keys`)."""
from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from jobsched.domain.tenant_tags import TENANT_TAG_KEY

# One action per target type: the targets role never gets a wildcard action.
TARGET_ACTIONS = {
    "sqs": "sqs:SendMessage",
    "sns": "sns:Publish",
    "events": "events:PutEvents",
    "lambda": "lambda:InvokeFunction",
}
# What SQS and SNS ask of KMS for a sender to a queue or topic encrypted with a customer-managed key
# (SQS Developer Guide, "Key management": a producer needs kms:GenerateDataKey and kms:Decrypt; SNS
# Developer Guide, "Encryption at rest": publishers likewise), and the services they may ask through.
SSE_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
SSE_SERVICES = ("sqs.*.amazonaws.com", "sns.*.amazonaws.com")
# The worker assumes the targets role from its own role session (role chaining): AWS caps such a
# session at one hour, whatever the role's maximum.
TARGET_SESSION_HOURS = 1


class TargetAccess(Construct):
    """The targets role: assumable by the worker's role only, with the tenant's session tag."""

    def __init__(self, scope: Construct, construct_id: str, *, worker: lambda_.Function,
                 patterns: tuple[str, ...], task_definitions: tuple[str, ...] = (),
                 clusters: tuple[str, ...] = (), task_roles: tuple[str, ...] = (), tagged_keys: bool = True,
                 key_patterns: tuple[str, ...] = ()) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        worker_role = worker.role
        # Trust: the worker's role, and only with exactly one session tag, the tenant's. A session
        # without it would match no resource (its principal tag is absent), but it is refused here.
        principal = iam.SessionTagsPrincipal(iam.ArnPrincipal(worker_role.role_arn)).with_conditions({
            "Null": {f"aws:RequestTag/{TENANT_TAG_KEY}": "false"},
            "ForAllValues:StringEquals": {"aws:TagKeys": [TENANT_TAG_KEY]},
        })
        self.role = iam.Role(self, "Role", assumed_by=principal,
                             max_session_duration=Duration.hours(TARGET_SESSION_HOURS),
                             description="jobsched worker, on behalf of one tenant: its tagged targets only")
        for service, resources in self.default_patterns(stack).items():
            self.role.add_to_policy(iam.PolicyStatement(
                actions=[TARGET_ACTIONS[service]], resources=resources,
                conditions={"StringEquals": {
                    f"aws:ResourceTag/{TENANT_TAG_KEY}": f"${{aws:PrincipalTag/{TENANT_TAG_KEY}}}"}}))
        for service in TARGET_ACTIONS:
            granted = [p for p in patterns if p.split(":")[2] == service]
            if granted:
                self.role.add_to_policy(iam.PolicyStatement(actions=[TARGET_ACTIONS[service]], resources=granted))
        self.grant_target_keys(stack, tagged_keys, key_patterns)
        self.grant_container_tasks(stack, task_definitions, clusters, task_roles)
        # The worker's role may assume it (with the tag) and nothing else of STS.
        worker.add_to_role_policy(iam.PolicyStatement(actions=["sts:AssumeRole", "sts:TagSession"],
                                                      resources=[self.role.role_arn]))

    def grant_target_keys(self, stack: Stack, tagged: bool, patterns: tuple[str, ...]) -> None:
        """SSE-KMS targets (`-c targetKeys`, docs/operations.md): the data-key calls SQS and SNS make
        with the session's credentials, and only through SQS or SNS (kms:ViaService, any region: a
        target may be in another region), on keys tagged with the session's tenant ("tagged", the
        default: tagging a key is the operator's grant, as for the queue itself) and on keys matching
        `targetKeyArnPatterns` for every tenant. The key's policy must delegate to IAM (the default
        key policy does); an AWS managed key (alias/aws/sqs, alias/aws/sns) needs no grant."""
        via_service = {"StringLike": {"kms:ViaService": list(SSE_SERVICES)}}
        if tagged:
            self.role.add_to_policy(iam.PolicyStatement(
                actions=list(SSE_KEY_ACTIONS), resources=[f"arn:{stack.partition}:kms:*:{stack.account}:key/*"],
                conditions={**via_service, "StringEquals": {
                    f"aws:ResourceTag/{TENANT_TAG_KEY}": f"${{aws:PrincipalTag/{TENANT_TAG_KEY}}}"}}))
        if patterns:
            self.role.add_to_policy(iam.PolicyStatement(actions=list(SSE_KEY_ACTIONS), resources=list(patterns),
                                                        conditions=via_service))

    def grant_container_tasks(self, stack: Stack, task_definitions: tuple[str, ...], clusters: tuple[str, ...],
                              task_roles: tuple[str, ...]) -> None:
        """ECS_TASK, granted by the operator only (docs/architecture.md, "ECS_TASK"): RunTask on the
        granted task definitions that carry the session's tenant tag, in the granted clusters;
        the tags RunTask puts on the task; PassRole of the granted roles to ECS tasks only; and
        DescribeTasks, ListTasks and StopTask in the granted clusters. Without both task
        definitions and clusters, no ECS action at all."""
        if not task_definitions or not clusters:
            return
        in_clusters = {"ArnLike": {"ecs:cluster": list(clusters)}}
        tagged_for_the_tenant = {f"aws:ResourceTag/{TENANT_TAG_KEY}": "${aws:PrincipalTag/" + TENANT_TAG_KEY + "}"}
        created_by_run_task = {"ecs:CreateAction": "RunTask"}
        passed_to_tasks = {"iam:PassedToService": "ecs-tasks.amazonaws.com"}
        account, partition = stack.account, stack.partition
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["ecs:RunTask"], resources=list(task_definitions),
            conditions={**in_clusters, "StringEquals": tagged_for_the_tenant}))
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["ecs:TagResource"], resources=[f"arn:{partition}:ecs:*:{account}:task/*"],
            conditions={"StringEquals": created_by_run_task}))
        # A running task carries its tenant's tag (propagated from its task definition, which RunTask
        # requires tagged for the tenant): another tenant's session may neither describe nor stop
        # it. IfExists: ECS deletes a task's tags when it is stopped (StopTask's API reference), and
        # the worker still describes its own stopped tasks (and may stop one again); an untagged task
        # of a granted cluster stays reachable (docs/reliability.md, "Tenant isolation").
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["ecs:DescribeTasks", "ecs:StopTask"], resources=[f"arn:{partition}:ecs:*:{account}:task/*"],
            conditions={**in_clusters, "StringEqualsIfExists": tagged_for_the_tenant}))
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["ecs:ListTasks"], resources=[f"arn:{partition}:ecs:*:{account}:container-instance/*"],
            conditions=in_clusters))
        if task_roles:
            self.role.add_to_policy(iam.PolicyStatement(
                actions=["iam:PassRole"], resources=list(task_roles),
                conditions={"StringEquals": passed_to_tasks}))

    @staticmethod
    def default_patterns(stack: Stack) -> dict[str, list[str]]:
        account, partition = stack.account, stack.partition
        return {
            "sqs": [f"arn:{partition}:sqs:*:{account}:*"],
            "sns": [f"arn:{partition}:sns:*:{account}:*"],
            "events": [f"arn:{partition}:events:*:{account}:event-bus/*"],
            "lambda": [f"arn:{partition}:lambda:*:{account}:function:*"],
        }

    def deny_own(self, queues: list, topics: list, stack: Stack, other_queue_arns=()) -> None:
        """Explicit denies, whatever the tags or the patterns say: a job's target is never one of
        the stack's own queues (lanes and dead-letter queues: the worker sends its own retries to
        the lanes with its own role, never with a tenant's session), functions or topics."""
        statements = [
            # With regions, the other regions' lanes too (their fixed names: regions.lane_name).
            ("sqs:SendMessage", [q.queue_arn for q in queues] + list(other_queue_arns)),
            # By name (CloudFormation names them "<stack>-..."): the worker's own ARN in this
            # policy would be a circular dependency.
            ("lambda:InvokeFunction", [stack.format_arn(service="lambda", resource="function",
                                                        resource_name=f"{stack.stack_name}-*",
                                                        arn_format=ArnFormat.COLON_RESOURCE_NAME)]),
            ("sns:Publish", [t.topic_arn for t in topics]),
        ]
        for action, resources in statements:
            if resources:
                self.role.add_to_policy(iam.PolicyStatement(effect=iam.Effect.DENY, actions=[action],
                                                            resources=resources))
