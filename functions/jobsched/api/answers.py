"""What the API answers: domain values as the API's JSON (jobs, executions, occurrences, tasks,
calendars) and the schedule previews. The other way, a request to domain values: mapping.py."""
from __future__ import annotations

from typing import Any, Callable

from jobsched.domain.errors import FieldProblem, InvalidRequest, UnprocessableRequest
from jobsched.domain.calendars import EXCLUDED, first_not_excluded, is_excluded
from jobsched.domain.executions import Execution
from jobsched.domain.trace import trace_id_of
from jobsched.domain.occurrences import Occurrence, expectation_of
from jobsched.domain.jobs import Job, JobState
from jobsched.domain.aws_expressions import is_aws_expression, parse_at, rate_to_duration
from jobsched.domain.schedule import (BEGINNING_OF_TIME_MS, ScheduleType, cron_schedule, format_instant,
                                      local_instant, parse_duration_ms, rate_schedule)
from jobsched.api.mapping import _check_expression_kind, misfire_policy_to_json


PREVIEW_TYPES = ("CRON", "RATE", "ONE_TIME")


def parse_rate_period(expression: str) -> int:
    return parse_duration_ms(rate_to_duration(expression) if is_aws_expression(expression) else expression)


def preview_schedule(job_type: str, expression: str, tz: str, count: int, after_ms: int,
                     start_ms: int | None = None, end_ms: int | None = None, max_runs: int | None = None) -> list[int]:
    """The next `count` fire instants after `after_ms`, for a form that shows them. Schedule
    bounds: only instants in [startAt, endAt), and no more than `max_runs` of them (the fires a
    job created now with these bounds would make)."""
    if job_type not in PREVIEW_TYPES:
        raise InvalidRequest(f"type: preview takes one of {', '.join(PREVIEW_TYPES)}", [FieldProblem("type", "unsupported")])
    if not 1 <= count <= 100:
        raise InvalidRequest("count: must be an integer from 1 to 100", [FieldProblem("count", "1..100")])
    if job_type == "ONE_TIME":
        _check_expression_kind(job_type, expression)
        if not is_aws_expression(expression):
            raise UnprocessableRequest.for_field("schedule", "a ONE_TIME preview takes an at(...) expression")
        instant = local_instant(parse_at(expression), tz, "schedule")
        return [instant] if instant > after_ms else []
    _check_expression_kind(job_type, expression)
    if job_type == "CRON":
        # Checked from the beginning of time: an expression that matches dates has simply none
        # left after an `after` near the end of time (an empty list), it does not "never match".
        schedule = cron_schedule(expression, tz, BEGINNING_OF_TIME_MS, start_ms, end_ms)
    else:
        schedule = rate_schedule(expression, after_ms - parse_rate_period(expression), start_ms, end_ms)
    if max_runs is not None:
        count = min(count, max_runs)
    out: list[int] = []
    cursor = after_ms
    while len(out) < count:
        nxt = schedule.next_fire_after(cursor)
        if nxt is None:
            break
        out.append(nxt)
        cursor = nxt
    return out


# Exclusion calendars in a preview: occurrences walked at most (a PT1M rate skips 1,440 a day),
# and skipped ones listed at most.
PREVIEW_WALK_LIMIT = 5000
PREVIEW_SKIPPED_LIMIT = 100


def preview_excluding(job_type: str, expression: str, tz: str, count: int, after_ms: int,
                      start_ms: int | None, end_ms: int | None, max_runs: int | None,
                      names: tuple[str, ...], dates_of: dict[str, frozenset[str] | None]) -> tuple[list[int], list[dict]]:
    """The next `count` fire instants that no named calendar excludes, and the occurrences skipped
    on the way (at most PREVIEW_SKIPPED_LIMIT; the walk stops after PREVIEW_WALK_LIMIT occurrences).
    Schedule bounds apply: instants in [start_ms, end_ms), at most `max_runs` fires (an excluded
    occurrence is not sent, so it is not a run)."""
    if max_runs is not None:
        count = min(count, max_runs)
    fires: list[int] = []
    skipped: list[dict] = []
    walked, cursor = 0, after_ms
    while len(fires) < count and walked < PREVIEW_WALK_LIMIT:
        chunk = preview_schedule(job_type, expression, tz, 100, cursor, start_ms, end_ms)
        for instant in chunk:
            if len(fires) == count:
                break
            walked += 1
            if not is_excluded(instant, tz, names, dates_of):
                fires.append(instant)
            elif len(skipped) < PREVIEW_SKIPPED_LIMIT:
                skipped.append({"at": instant, "reason": EXCLUDED})
        if len(chunk) < 100:
            break
        cursor = chunk[-1]
    return fires, skipped


def calendar_to_json(calendar) -> dict:
    return {"name": calendar.name, "description": calendar.description, "dates": list(calendar.dates),
            "createdAt": format_instant(calendar.created_ms), "updatedAt": format_instant(calendar.updated_ms),
            "version": calendar.version}


def next_fire_at(job: Job, now_ms: int, excludes: Callable[[Job, int], bool] | None = None) -> int | None:
    """`excludes`: exclusion calendars' rule as the hand-off applies it (CalendarCache.excludes);
    the next fire shown is then the first occurrence that is not excluded."""
    if job.state is not JobState.ACTIVE:
        return None
    if job.spec.max_runs is not None and job.run_count >= job.spec.max_runs:
        return None  # schedule bounds: its last run is under way; none follows
    schedule = job.spec.schedule
    if not schedule.recurring:
        nominal = schedule.run_at_ms
    else:
        nominal = schedule.next_fire_after(max(job.nominal_of(now_ms), schedule.first_fire() or now_ms) - 1)
        if excludes is not None and job.spec.exclude_calendars:
            nominal = first_not_excluded(job, nominal, excludes)
    return None if nominal is None else job.fire_at(nominal)


def job_to_json(job: Job, now_ms: int, excludes: Callable[[Job, int], bool] | None = None) -> dict:
    spec = job.spec
    schedule = spec.schedule
    body: dict[str, Any] = {
        "jobId": job.job_id,
        "name": spec.name,
        "type": schedule.type.value,
        "schedule": schedule.text,
        "timezone": schedule.timezone,
    }
    if schedule.type is ScheduleType.ONE_TIME:
        body["runAt"] = format_instant(schedule.run_at_ms)
    if schedule.type is ScheduleType.DELAYED:
        body["delaySeconds"] = schedule.delay_seconds
        body["runAt"] = format_instant(schedule.run_at_ms)
    if schedule.start_ms is not None:
        body["startAt"] = format_instant(schedule.start_ms)
    if schedule.end_ms is not None:
        body["endAt"] = format_instant(schedule.end_ms)
    body.update({
        "target": spec.target.to_item() if spec.target is not None else None,
        **({"steps": spec.steps.to_item()} if spec.steps is not None else {}),
        "payload": spec.payload,
        "retryPolicy": {
            "maxAttempts": spec.retry.max_attempts,
            "backoff": spec.retry.backoff.value,
            "initialDelayMs": spec.retry.initial_delay_ms,
            "maxDelayMs": spec.retry.max_delay_ms,
        },
        "timeoutSec": spec.timeout_sec,
        "priority": spec.priority.value,
        "overlapPolicy": spec.overlap_policy.value,
        "misfirePolicy": misfire_policy_to_json(spec),
        "jitterSec": spec.jitter_sec,
        "heartbeatTimeoutSec": spec.heartbeat_timeout_sec,
        "retryOn4xx": spec.retry_on_4xx,
        "onSuccess": spec.on_success.to_item() if spec.on_success else None,
        "onFailure": spec.on_failure.to_item() if spec.on_failure else None,
        "flowControl": spec.flow_control.to_item() if spec.flow_control else None,
        "tags": dict(spec.tags),
        "pausedReason": job.paused_reason,
        # Schedule bounds and self-pausing.
        "maxRuns": spec.max_runs,
        "pauseAfterFailures": spec.pause_after_failures,
        "runCount": job.run_count,
        "completedReason": job.completed_reason.value if job.completed_reason else None,
        "excludeCalendars": list(spec.exclude_calendars),
        "expect": spec.expect.to_item() if spec.expect else None,  # absence alerts
        "state": job.state.value,
        "nextFireAt": format_instant(next_fire_at(job, now_ms, excludes)),
        "createdAt": format_instant(job.created_ms),
        "updatedAt": format_instant(job.updated_ms),
        "version": job.version,
    })
    return body


def occurrence_to_json(row: Occurrence) -> dict:
    return {"scheduledAt": format_instant(row.scheduled_ms), "outcome": row.outcome.value,
            "reason": row.reason.value if row.reason else None, "executionId": row.execution_id,
            "lateMs": row.late_ms, "status": row.status.value if row.status else None,
            "expectation": row.expectation, "detail": row.detail[:300] if row.detail else None}


def execution_to_json(execution: Execution, steps: list[Execution] | None = None,
                      order: list[str] | None = None) -> dict:
    """An execution; a run adds its steps (in the job's step order), a step its run and name."""
    body = _execution_fields(execution)
    if execution.run_id is not None:
        body["runId"] = execution.run_id
        body["step"] = execution.step_name
    if steps is not None:
        position = {name: i for i, name in enumerate(order or [])}
        body["steps"] = [{
            "name": s.step_name, "executionId": s.execution_id, "status": s.status.value, "attempt": s.attempt,
            "startedAt": format_instant(s.started_ms), "finishedAt": format_instant(s.finished_ms), "error": s.error,
        } for s in sorted(steps, key=lambda s: position.get(s.step_name or "", len(position)))]
    return body


def _execution_fields(execution: Execution) -> dict:
    return {
        "executionId": execution.execution_id,
        "jobId": execution.job_id,
        "scheduledAt": format_instant(execution.scheduled_ms),
        "status": execution.status.value,
        "attempt": execution.attempt,
        "startedAt": format_instant(execution.started_ms),
        "finishedAt": format_instant(execution.finished_ms),
        "durationMs": execution.duration_ms,
        "lateMs": execution.late_ms,
        "attempts": [
            {
                "attempt": a.attempt,
                "status": a.status.value,
                "startedAt": format_instant(a.started_ms),
                "finishedAt": format_instant(a.finished_ms),
                "error": a.error,
            }
            for a in execution.attempts
        ],
        "output": execution.output,
        "error": execution.error,
        "progress": execution.progress,
        "nextAttemptAt": format_instant(execution.retry_at_ms),
        "cancelRequested": execution.cancel_requested,
        "throttledMs": execution.throttled_ms,
        "traceId": trace_id_of(execution.execution_id),  # the trace every attempt's call carries
        # Catch-up that does not flood.
        "catchUp": execution.catch_up,
        # Backfill: run late on purpose (its lateMs says how late); counted in no lateness.
        "backfill": execution.backfill,
        # Absence alerts: MISSING, LATE (a success after the mark), NOT_FIRED, or null.
        "expectation": expectation_of(execution),
        # Container tasks (ECS_TASK): the running or last attempt's task; null for other targets.
        "task": task_to_json(execution.task),
        **({"reason": execution.skip_reason, "skippedCount": execution.skipped_count,
            "skippedThrough": format_instant(execution.skipped_through_ms)} if execution.skip_reason else {}),
    }


def task_to_json(task: dict | None) -> dict | None:
    """shared/API.md, "Container tasks": exactly these four names."""
    if task is None:
        return None
    return {"taskArn": task.get("taskArn"), "exitCode": task.get("exitCode"),
            "stoppedReason": task.get("stoppedReason"), "logUrl": task.get("logUrl")}
