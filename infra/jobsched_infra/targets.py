"""What the worker may call on behalf of jobs: named actions on target resources only."""
from __future__ import annotations

from aws_cdk import Stack
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
