"""What the worker may call on behalf of jobs: named actions on target resources only."""
from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

# One action per target type: the worker never gets a wildcard action.
TARGET_ACTIONS = {
    "sqs": "sqs:SendMessage",
    "sns": "sns:Publish",
    "events": "events:PutEvents",
    "lambda": "lambda:InvokeFunction",
}


class TargetAccess:
    @staticmethod
    def default_patterns(stack: Stack) -> dict[str, list[str]]:
        account, partition = stack.account, stack.partition
        return {
            "sqs": [f"arn:{partition}:sqs:*:{account}:*"],
            "sns": [f"arn:{partition}:sns:*:{account}:*"],
            "events": [f"arn:{partition}:events:*:{account}:event-bus/*"],
            "lambda": [f"arn:{partition}:lambda:*:{account}:function:*"],
        }

    @classmethod
    def grant_to(cls, fn: lambda_.Function, patterns: tuple[str, ...], stack: Stack) -> None:
        by_service = cls.default_patterns(stack)
        if patterns:
            by_service = {service: [p for p in patterns if p.split(":")[2] == service] for service in TARGET_ACTIONS}
        for service, resources in by_service.items():
            if resources:
                fn.add_to_role_policy(iam.PolicyStatement(actions=[TARGET_ACTIONS[service]], resources=resources))

    @staticmethod
    def deny_own(fn: lambda_.Function, queues: list, topics: list, stack: Stack) -> None:
        """Explicit denies, whatever the allow patterns say: a job's target is never one of the
        stack's own dead-letter queues, functions or topics. (The lanes cannot be denied, since the
        worker itself sends retries to them: a lane message must carry the scheduler's seal, and
        the API refuses the stack's resources as targets.)"""
        statements = [
            ("sqs:SendMessage", [q.queue_arn for q in queues]),
            # By name (CloudFormation names them "<stack>-..."): the worker's own ARN in its own
            # policy would be a circular dependency.
            ("lambda:InvokeFunction", [stack.format_arn(service="lambda", resource="function",
                                                        resource_name=f"{stack.stack_name}-*",
                                                        arn_format=ArnFormat.COLON_RESOURCE_NAME)]),
            ("sns:Publish", [t.topic_arn for t in topics]),
        ]
        for action, resources in statements:
            if resources:
                fn.add_to_role_policy(iam.PolicyStatement(effect=iam.Effect.DENY, actions=[action],
                                                          resources=resources))
