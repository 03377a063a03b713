"""SQS lanes by priority, each with its own dead-letter queue."""
from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from jobsched.domain.jobs import Priority
# A message that crashed the worker this many times rests in the lane's DLQ (a record handed back
# as new messages: the worker sends it there after as many receives, handlers/worker.py).
from jobsched.settings import MAX_RECEIVE_COUNT


# SQS's data-key reuse period on the lanes with the stack's key (60 s to 24 h; SQS's default 5
# minutes, kept on the dead-letter queues, which see no steady traffic). An hour cuts the lanes'
# KMS requests twelvefold (a quiet deployment: $0.95 -> $0.44 a month of KMS requests); what it
# gives up: a disabled key or a revoked grant stops SQS's use of a data key it holds after up to
# an hour, and CloudTrail records a data key's use once an hour per sender and lane.
LANE_DATA_KEY_REUSE = Duration.hours(1)


class Lanes(Construct):
    def __init__(self, scope: Construct, construct_id: str, worker_timeout: Duration, key: kms.IKey | None = None,
                 names: dict[Priority, str] | None = None) -> None:
        super().__init__(scope, construct_id)
        self.queues: dict[Priority, sqs.Queue] = {}
        self.dead_letters: dict[Priority, sqs.Queue] = {}
        for priority in Priority:
            name = priority.value.capitalize()
            dlq = sqs.Queue(
                self,
                f"{name}Dlq",
                retention_period=Duration.days(14),
                encryption=sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.SQS_MANAGED,
                encryption_master_key=key,
                # One data key serves many messages for 5 minutes: far fewer KMS calls.
                data_key_reuse=Duration.minutes(5) if key else None,
                enforce_ssl=True,
            )
            self.dead_letters[priority] = dlq
            self.queues[priority] = sqs.Queue(
                self,
                f"{name}Lane",
                # Named in multi-region mode only (regions.lane_name): another region sends to them.
                queue_name=(names or {}).get(priority),
                # AWS's guidance for Lambda consumers: six times the function timeout, room for
                # the event source mapping to retry a throttled invocation. Once the worker runs
                # a batch it cuts its records' visibility to what the batch can take
                # (handlers/worker.py), so a crashed invocation's records come back in minutes.
                visibility_timeout=Duration.seconds(worker_timeout.to_seconds() * 6),
                retention_period=Duration.days(4),
                encryption=sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.SQS_MANAGED,
                encryption_master_key=key,
                # One data key serves a sender's (and the pollers') messages for an hour: SQS asks
                # KMS for a data key once an hour per sender role and lane, not every 5 minutes
                # (docs/architecture.md, "Lanes and KMS").
                data_key_reuse=LANE_DATA_KEY_REUSE if key else None,
                enforce_ssl=True,
                dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=MAX_RECEIVE_COUNT),
            )
