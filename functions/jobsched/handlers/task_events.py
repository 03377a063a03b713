"""Task events function: ECS's "Task State Change" events (EventBridge rule, lastStatus STOPPED,
the granted clusters) → the end of the container attempt they belong to, fenced."""
from __future__ import annotations

from typing import Mapping

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from jobsched.handlers.wiring import build, lazy, metrics_for
from jobsched.service.container_tasks import ContainerTasks, task_log_url
from jobsched.service.outcomes import Outcome, Outcomes

logger = Logger(service="jobsched-task-events")

DETAIL_TYPE = "ECS Task State Change"
SOURCE = "aws.ecs"

OUTCOME_METRIC = {
    Outcome.SUCCEEDED: "TaskSucceeded",
    Outcome.RETRY_SCHEDULED: "TaskRetried",
    Outcome.DEAD: "TaskDead",
    Outcome.CANCELLED: "TaskCancelled",
    Outcome.STALE_RESULT: "TaskEventsStale",
}


def stopped_detail(event: dict) -> dict | None:
    """The event's detail when it tells of a stopped task; None for anything else (the rule lets
    only those through; another event is ignored, not failed)."""
    if not isinstance(event, dict) or event.get("source") != SOURCE or event.get("detail-type") != DETAIL_TYPE:
        return None
    detail = event.get("detail")
    if not isinstance(detail, dict) or detail.get("lastStatus") != "STOPPED" or not detail.get("taskArn"):
        return None
    return detail


def make_handler(env: Mapping[str, str], clock=None, session=None):
    parts = build(env, "task_events", clock, session)
    metrics = metrics_for(env, "jobsched-task-events")
    containers = ContainerTasks(parts.stores, Outcomes(parts.stores, parts.handoff, parts.clock), parts.clock,
                                log_url=task_log_url(env))

    @metrics.log_metrics
    @logger.inject_lambda_context(clear_state=True)
    def handler(event, context):
        detail = stopped_detail(event)
        if detail is None:
            metrics.add_metric(name="TaskEventsIgnored", unit=MetricUnit.Count, value=1)
            return {"outcome": "IGNORED"}
        # An exception fails the invocation: EventBridge retries it (the rule's retry policy),
        # and a repeat changes nothing once the end is recorded (fenced).
        outcome = containers.record_stopped(detail)
        metrics.add_metric(name=OUTCOME_METRIC.get(outcome, "TaskEventsOther"), unit=MetricUnit.Count, value=1)
        logger.info("task stopped", extra={"taskArn": detail.get("taskArn"), "outcome": outcome.value,
                                           "stopCode": detail.get("stopCode")})
        return {"outcome": outcome.value}

    return handler


handler = lazy(make_handler)
