"""Alarms, all published to one SNS topic that operators subscribe to (docs/operations.md). The
topics are encrypted with the stack's key when it has one (storage.py's key policy lets CloudWatch
publish to them)."""
from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from jobsched.domain.jobs import Priority
from jobsched_infra.dashboard import app_metric

# A tick that has not caught up within this many minutes is an incident, not a blip.
TICK_BEHIND_MINUTES = 3
LATENESS_P99_MS = 1000
# Share of the executions ended over 5 minutes (SUCCEEDED or DEAD: an attempt that retries has not
# ended) that end DEAD. Two metrics (an alarm is billed per metric it reads): the retried attempts
# were a third, and counting them only made the share smaller while a job retries.
DEAD_RATE_PERCENT = 5
# A lane's in-flight messages (received, not yet deleted or visible again): SQS answers receives
# past about 120,000 of them with nothing, and the lane stalls for every tenant. Half of that is
# far above the peak the sizing expects (docs/operations.md: 11,364 at herd1m) and leaves room to act.
LANE_IN_FLIGHT_ALARM = 60_000
# The API's own 5xx answers (its Api5xx count: a throttled table's 503 THROTTLED, a route's 500)
# over 5 minutes. With it, no DynamoDB throttle alarm: a throttle the SDK's retries absorb costs
# only time, one they do not shows as this alarm (the API), TickBehind or TickErrors (the tick),
# WorkerRecordErrors or LatenessP99 (the worker). The six throttle alarm metrics (reads + writes of
# three tables) were $0.60 a month of a quiet deployment's bill; this one is $0.10, and sends no
# data while the API answers no 5xx (docs/performance.md, "A quiet deployment").
API_5XX_ALARM = 5


class Alarms(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, segments: int, dead_letters: dict[Priority, sqs.Queue],
                 functions: dict[str, lambda_.Function],
                 lanes: dict[Priority, sqs.Queue] | None = None, key: kms.IKey | None = None,
                 failed_events: dict[str, sqs.Queue] | None = None) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Topic", display_name="jobsched alarms", enforce_ssl=True, master_key=key)
        # Absence alerts (a job's `expect` not met, or an occurrence that never fired): about jobs,
        # not about the deployment's health, so a topic of their own that a tenant-facing team can
        # subscribe to without the alarms. The worker publishes to it (stack.py grants exactly that).
        # Encrypted with the same key: the worker that publishes needs kms:GenerateDataKey and
        # kms:Decrypt on it (stack.py grants them to the functions that write the tables and lanes).
        self.alert_topic = sns.Topic(self, "AlertTopic", display_name="jobsched absence alerts", enforce_ssl=True,
                                     master_key=key)
        action = cw_actions.SnsAction(self.topic)
        self.alarms: list[cw.Alarm] = []

        def add(name: str, metric: cw.IMetric, threshold: float, description: str, periods: int = 1,
                comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                missing=cw.TreatMissingData.NOT_BREACHING) -> None:
            alarm = cw.Alarm(self, name, metric=metric, threshold=threshold, evaluation_periods=periods,
                             comparison_operator=comparison, treat_missing_data=missing,
                             alarm_description=description)
            alarm.add_alarm_action(action)
            self.alarms.append(alarm)

        for priority, dlq in dead_letters.items():
            add(f"{priority.value.capitalize()}DlqNotEmpty",
                dlq.metric_approximate_number_of_messages_visible(period=Duration.minutes(1), statistic="Maximum"),
                0, f"The {priority.value} lane's dead-letter queue holds messages that crashed the worker "
                   "5 times. Runbook: docs/operations.md#a-dlq-is-not-empty")
        for name, queue in (failed_events or {}).items():
            add(f"{name}FailedNotEmpty",
                queue.metric_approximate_number_of_messages_visible(period=Duration.minutes(1), statistic="Maximum"),
                0, f"The {name} function's on-failure queue holds events it failed three times (Lambda's "
                   "asynchronous retries). Runbook: docs/operations.md#an-on-failure-queue-is-not-empty")
        for priority, lane in (lanes or {}).items():
            add(f"{priority.value.capitalize()}LaneInFlight",
                lane.metric_approximate_number_of_messages_not_visible(period=Duration.minutes(1),
                                                                       statistic="Maximum"),
                LANE_IN_FLIGHT_ALARM,
                f"The {priority.value} lane holds more than {LANE_IN_FLIGHT_ALARM:,} in-flight messages for 3 "
                "minutes; past about 120,000 SQS delivers nothing from it. "
                "Runbook: docs/operations.md#a-lanes-in-flight-messages-near-sqss-limit", periods=3)
        tick = functions["tick"]
        add("TickMissing", tick.metric_invocations(period=Duration.minutes(1), statistic="Sum"), segments,
            f"Fewer than {segments} tick invocations a minute for 3 minutes: a segment is not ticking. "
            "Runbook: docs/operations.md#ticks-missing-or-behind", periods=3,
            comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD, missing=cw.TreatMissingData.BREACHING)
        add("TickBehind", app_metric("jobsched-tick", "MinutesBehind", "Maximum"), TICK_BEHIND_MINUTES,
            f"A segment's tick is more than {TICK_BEHIND_MINUTES} minutes behind. "
            "Runbook: docs/operations.md#ticks-missing-or-behind", periods=3)
        add("LatenessP99", app_metric("jobsched-worker", "FireLatenessMs", "p99"), LATENESS_P99_MS,
            "Jobs start more than a second after their due instant (p99 over 5 minutes). "
            "Runbook: docs/operations.md#lateness-p99-over-1-s", periods=5)
        dead_rate = cw.MathExpression(
            expression="100 * dead / MAX([succeeded + dead, 1])",
            using_metrics={"dead": app_metric("jobsched-worker", "Dead"),
                           "succeeded": app_metric("jobsched-worker", "Succeeded")},
            period=Duration.minutes(5), label="dead %")
        add("DeadRate", dead_rate, DEAD_RATE_PERCENT,
            f"More than {DEAD_RATE_PERCENT}% of the executions ended in 5 minutes end DEAD. "
            "Runbook: docs/operations.md#errors")
        # A record that raised is reported failed (not the invocation): counted by the worker.
        add("WorkerRecordErrors", app_metric("jobsched-worker", "WorkerRecordErrors"), 5,
            "More than 5 lane records failed in the worker in 5 minutes (each is handed back and "
            "retried). Runbook: docs/operations.md#errors")
        for name, fn in functions.items():
            add(f"{name.capitalize()}Errors", fn.metric_errors(period=Duration.minutes(5), statistic="Sum"), 5,
                f"The {name} function failed more than 5 times in 5 minutes. Runbook: docs/operations.md#errors")
        add("ApiServerErrors", app_metric("jobsched-api", "Api5xx").with_(period=Duration.minutes(5)), API_5XX_ALARM,
            f"The API answered more than {API_5XX_ALARM} requests with a 5xx in 5 minutes (a throttled table's "
            "503 THROTTLED, or a 500). Runbook: docs/operations.md#the-api-answers-5xx")
