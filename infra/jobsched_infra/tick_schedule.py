"""One EventBridge rule per segment, each minute, all invoking the tick under one permission."""
from __future__ import annotations

import json

from aws_cdk import Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

# Rules are named "<stack>-tick-<segment>" so that one resource-policy statement on the tick
# covers all of them (CDK's rule targets add one statement per rule, and Lambda's 20 KB policy
# limit is passed near 47 segments while the configuration allows 128: jobsched/sizing.py).
RULE_NAME_INFIX = "-tick-"
# A tick event older than this is dropped: the next minute's tick catches up instead.
MAX_EVENT_AGE_SECONDS = 60


class TickSchedule(Construct):
    def __init__(self, scope: Construct, construct_id: str, tick_fn: lambda_.IFunction, segments: int) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        prefix = f"{stack.stack_name}{RULE_NAME_INFIX}"
        self.rules = []
        for segment in range(segments):
            self.rules.append(events.CfnRule(
                self,
                f"Segment{segment}",
                name=f"{prefix}{segment}",
                description=f"jobsched tick for segment {segment}",
                schedule_expression="cron(* * * * ? *)",
                state="ENABLED",
                targets=[events.CfnRule.TargetProperty(
                    arn=tick_fn.function_arn,
                    id="Tick",
                    input=json.dumps({"segment": segment}),
                    # A missed tick is caught up by the next one; a retried one would overlap it.
                    retry_policy=events.CfnRule.RetryPolicyProperty(
                        maximum_retry_attempts=0, maximum_event_age_in_seconds=MAX_EVENT_AGE_SECONDS),
                )],
            ))
        self.permission = lambda_.CfnPermission(
            self,
            "InvokeFromRules",
            action="lambda:InvokeFunction",
            function_name=tick_fn.function_arn,
            principal="events.amazonaws.com",
            source_account=stack.account,
            source_arn=stack.format_arn(service="events", resource="rule", resource_name=f"{prefix}*"),
        )
