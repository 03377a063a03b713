"""Container tasks: ECS's "Task State Change" events of stopped tasks in the granted clusters go to
the task events function, which records the end of the attempt each task belongs to."""
from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

# EventBridge invokes the function asynchronously: its retry policy covers only the delivery to
# Lambda (a throttled or refused Invoke), retried with backoff for up to this long. Once Lambda has
# the event, a function error is retried by Lambda's asynchronous invocation, twice (three tries in
# all), and an event that fails them rests in the on-failure queue below (stack.py), never dropped;
# the worker's look at the task every 15 minutes records its end all the same.
MAX_EVENT_AGE = Duration.hours(24)
RETRY_ATTEMPTS = 185  # EventBridge's most
LAMBDA_RETRY_ATTEMPTS = 2  # Lambda's default, stated


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


def failure_destination(scope: Construct, fn: lambda_.Function, key: kms.IKey | None) -> sqs.Queue:
    """The queue an event rests in after Lambda's three tries failed (its record: the event, the
    error, the tries), encrypted as the lanes' DLQs and alarmed on its depth (alarms.py). Lambda
    sends it with the function's role: sqs:SendMessage here, data keys from the key (stack.py).
    The L1 invoke config: the CDK's SqsDestination grants wildcard KMS actions (kms:ReEncrypt*)."""
    queue = sqs.Queue(scope, "TaskEventsFailed", retention_period=Duration.days(14),
                      encryption=sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.SQS_MANAGED,
                      encryption_master_key=key, data_key_reuse=Duration.minutes(5) if key else None,
                      enforce_ssl=True)
    queue.grant(fn, "sqs:SendMessage")
    # Not a DLQ by a redrive policy (cdk-nag's check): Lambda's on-failure destination, itself the end.
    Validations.of(queue).acknowledge(Acknowledgment(
        id="AwsSolutions::AwsSolutions-SQS3",
        reason="The task events function's on-failure destination: the last stop of a failed event, as a DLQ."))
    lambda_.CfnEventInvokeConfig(
        scope, "TaskEventsInvokeConfig", function_name=fn.function_name, qualifier="$LATEST",
        # The event's age: Lambda's own default and most, 6 hours (MAX_EVENT_AGE is EventBridge's).
        maximum_retry_attempts=LAMBDA_RETRY_ATTEMPTS,
        destination_config=lambda_.CfnEventInvokeConfig.DestinationConfigProperty(
            on_failure=lambda_.CfnEventInvokeConfig.OnFailureProperty(destination=queue.queue_arn)))
    return queue
