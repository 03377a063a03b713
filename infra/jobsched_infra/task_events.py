"""Container tasks: ECS's "Task State Change" events of stopped tasks in the granted clusters go to
the task events function, which records the end of the attempt each task belongs to."""
from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

# EventBridge retries a failed invocation with backoff for up to this long (then drops the event:
# the worker's look at the task every 15 minutes records its end all the same).
MAX_EVENT_AGE = Duration.hours(24)
RETRY_ATTEMPTS = 185  # EventBridge's most


class TaskEventsRule(Construct):
    def __init__(self, scope: Construct, construct_id: str, fn: lambda_.IFunction, clusters: tuple[str, ...]) -> None:
        super().__init__(scope, construct_id)
        # Only STOPPED tasks of the clusters the deployment grants: RUNNING and PENDING changes
        # (several per task) never invoke the function.
        self.rule = events.Rule(self, "Stopped", description="jobsched: container tasks that stopped",
                                event_pattern=events.EventPattern(
                                    source=["aws.ecs"], detail_type=["ECS Task State Change"],
                                    detail={"lastStatus": ["STOPPED"],
                                            "clusterArn": [_cluster_filter(c) for c in clusters]}))
        self.rule.add_target(targets.LambdaFunction(fn, retry_attempts=RETRY_ATTEMPTS, max_event_age=MAX_EVENT_AGE))


def _cluster_filter(pattern: str):
    """An ARN pattern with IAM's wildcard as EventBridge matches it: exact, or a wildcard filter."""
    return {"wildcard": pattern} if "*" in pattern or "?" in pattern else pattern
