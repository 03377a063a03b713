"""The first CloudWatch dashboard: dispatches, lateness, outcomes, queue and DLQ depth."""
from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigw2
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from jobsched.domain.jobs import Priority

NAMESPACE = "Jobsched"
PERIOD = Duration.minutes(1)
# The tick's "tick" line per run (handlers/tick.py): its duration and how far behind, per segment.
TICK_RUNS_QUERY = [
    'filter message = "tick"',
    "stats max(durationMs) as slowestMs, avg(durationMs) as meanMs, max(behindMinutes) as behind, count(*) as runs"
    " by segment",
    "sort segment asc",
]
# What the ticks dispatched, a minute at a time, from their log lines (no Dispatched metric: sent
# every hour it was $0.30 a month; docs/performance.md, "A quiet deployment").
DISPATCHED_QUERY = [
    'filter message = "tick"',
    "stats sum(dispatched) as dispatched by bin(1m)",
]


def app_metric(service: str, name: str, statistic: str = "Sum") -> cw.Metric:
    return cw.Metric(namespace=NAMESPACE, metric_name=name, dimensions_map={"service": service},
                     statistic=statistic, period=PERIOD, label=f"{name} {statistic}")


class Dashboard(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, lanes: dict[Priority, sqs.Queue],
                 dead_letters: dict[Priority, sqs.Queue], functions: dict[str, lambda_.Function],
                 tables: dict[str, ddb.Table], api: apigw.RestApi | apigw2.HttpApi) -> None:
        super().__init__(scope, construct_id)
        board = cw.Dashboard(self, "Board", dashboard_name=None, default_interval=Duration.hours(3))
        worker, tick = "jobsched-worker", "jobsched-tick"
        board.add_widgets(
            cw.GraphWidget(title="Fire lateness (ms)", width=12, left=[
                app_metric(worker, "FireLatenessMs", "p50"),
                app_metric(worker, "FireLatenessMs", "p99"),
                app_metric(worker, "FireLatenessMs", "Maximum"),
            ]),
            cw.GraphWidget(title="Outcomes", width=12, left=[
                app_metric(worker, "Succeeded"),
                app_metric(worker, "Retried"),
                app_metric(worker, "Dead"),
                app_metric(worker, "DuplicatesDropped"),
                app_metric(worker, "StaleResultsRejected"),
            ]),
        )
        board.add_widgets(
            cw.LogQueryWidget(title="Dispatched a minute (the ticks' log lines)", width=12,
                              view=cw.LogQueryVisualizationType.LINE,
                              log_group_names=[functions["tick"].log_group.log_group_name],
                              query_lines=DISPATCHED_QUERY),
        )
        board.add_widgets(
            cw.GraphWidget(title="Lane depth", width=8, left=[
                q.metric_approximate_number_of_messages_visible(period=PERIOD, label=p.value)
                for p, q in lanes.items()
            ]),
            cw.GraphWidget(title="Dead-letter depth", width=8, left=[
                q.metric_approximate_number_of_messages_visible(period=PERIOD, label=f"{p.value} DLQ")
                for p, q in dead_letters.items()
            ]),
            # Sent only when not zero (handlers/tick.py add_counts): no data is 0.
            cw.GraphWidget(title="Tick catch-up", width=8, left=[
                app_metric(tick, "BucketsCaughtUp"),
                app_metric(tick, "MinutesBehind", "Maximum"),
            ]),
        )
        board.add_widgets(
            cw.GraphWidget(title="Lambda errors", width=12, left=[
                fn.metric_errors(period=PERIOD, label=name) for name, fn in functions.items()
            ]),
            cw.GraphWidget(title="Lambda throttles", width=12, left=[
                fn.metric_throttles(period=PERIOD, label=name) for name, fn in functions.items()
            ]),
        )
        board.add_widgets(
            cw.GraphWidget(title="Age of oldest message (s)", width=12, left=[
                q.metric_approximate_age_of_oldest_message(period=PERIOD, label=p.value, statistic="Maximum")
                for p, q in {**lanes}.items()] + [
                q.metric_approximate_age_of_oldest_message(period=PERIOD, label=f"{p.value} DLQ", statistic="Maximum")
                for p, q in dead_letters.items()]),
            # From the tick's log lines, not metrics: a metric per segment was $0.30 a month each
            # (docs/performance.md, "A quiet deployment"); Logs Insights scans the tick's log group
            # ($0.005 a GB) only while the dashboard is open.
            cw.LogQueryWidget(title="Tick runs per segment (ms)", width=12, view=cw.LogQueryVisualizationType.TABLE,
                              log_group_names=[functions["tick"].log_group.log_group_name],
                              query_lines=TICK_RUNS_QUERY),
        )
        board.add_widgets(
            cw.GraphWidget(title="Catch-up per segment (minutes behind; only segments behind)", width=12, left=[
                cw.MathExpression(expression=f"SEARCH('{{{NAMESPACE},Segment,service}} "
                                             f"MetricName=\"SegmentMinutesBehind\"', 'Maximum', 60)",
                                  label="", period=PERIOD)]),
            cw.GraphWidget(title="Lambda concurrency", width=12, left=[
                fn.metric("ConcurrentExecutions", period=PERIOD, statistic="Maximum", label=name)
                for name, fn in functions.items()]),
        )
        board.add_widgets(
            cw.GraphWidget(title="DynamoDB throttled requests", width=12, left=[
                m for name, table in tables.items() for m in (
                    table.metric("ReadThrottleEvents", period=PERIOD, statistic="Sum", label=f"{name} reads"),
                    table.metric("WriteThrottleEvents", period=PERIOD, statistic="Sum", label=f"{name} writes"))]),
            cw.GraphWidget(title="DynamoDB consumed capacity", width=12, left=[
                m for name, table in tables.items() for m in (
                    table.metric_consumed_read_capacity_units(period=PERIOD, label=f"{name} RCU"),
                    table.metric_consumed_write_capacity_units(period=PERIOD, label=f"{name} WCU"))]),
        )
        board.add_widgets(
            cw.GraphWidget(title="API 4xx and 5xx", width=12, left=[
                api.metric_client_error(period=PERIOD, label="4xx"), api.metric_server_error(period=PERIOD, label="5xx"),
                app_metric("jobsched-api", "Api4xx"), app_metric("jobsched-api", "Api5xx")]),
            cw.GraphWidget(title="API requests and errors by route", width=12, left=[
                cw.MathExpression(expression=f"SEARCH('{{{NAMESPACE},route,service}} MetricName=\"{name}\"', "
                                             f"'Sum', 60)", label=name, period=PERIOD)
                for name in ("ApiRequests", "Api4xx", "Api5xx")]),
        )
        board.add_widgets(
            cw.GraphWidget(title="API latency (ms)", width=12, left=[
                api.metric_latency(period=PERIOD, statistic="p50", label="p50"),
                api.metric_latency(period=PERIOD, statistic="p99", label="p99")]),
        )
        self.dashboard = board
