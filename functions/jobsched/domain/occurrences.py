"""The occurrence ledger: every nominal occurrence of a job in a window and what became of it.

Computed, not stored: the schedule's occurrences are walked from the window's start; an occurrence
that ran (or was recorded SKIPPED) is answered by its execution record (same deterministic id);
one with no record is explained by what the job itself remembers (its pause spans, its bounds,
its cancellation or completion) or by the records around it (a catch-up's MISSED_WINDOW record,
a RUN_ONCE run that coalesced it). Nothing is written per occurrence for the ledger."""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Callable

from jobsched.domain.executions import Execution, ExecutionStatus, execution_id_for
from jobsched.domain.jobs import CompletedReason, Job, JobState
from jobsched.domain.schedule import format_instant

# A window is at most this long (the API answers 422 naming `to` beyond it).
MAX_WINDOW_MS = 31 * 86_400_000
# An occurrence due less than this long ago with no record is still on its way (an SQS delay, a
# flow-control or lane-share hold before its claim): PENDING, not NOT_FIRED.
IN_FLIGHT_GRACE_MS = 5 * 60_000
# A MISSED_WINDOW record stands for the occurrences up to 7 days before its catch-up (catchup.py):
# the ledger looks that far back for one that covers the window's first occurrences.
MISSED_WINDOW_REACH_MS = 7 * 86_400_000


class Outcome(str, Enum):
    FIRED = "FIRED"
    SKIPPED = "SKIPPED"
    PENDING = "PENDING"  # not due yet, or due moments ago and still on its way
    # Due, past the grace, no record and no reason the scheduler knows of (the tick lost it): the
    # occurrence an absence alert (NOT_FIRED) is about.
    NOT_FIRED = "NOT_FIRED"


class Reason(str, Enum):
    OVERLAP = "OVERLAP"
    PAUSED = "PAUSED"
    MISSED_WINDOW = "MISSED_WINDOW"
    EXCLUDED = "EXCLUDED"
    BEFORE_START = "BEFORE_START"
    AFTER_END = "AFTER_END"
    MAX_RUNS_REACHED = "MAX_RUNS_REACHED"
    CANCELLED = "CANCELLED"
    DEDUPLICATED = "DEDUPLICATED"


# SKIPPED records written before records carried their reason (skipReason): the overlap check's
# and misfirePolicy SKIP's. They expire with the retention (30 days).
_LEGACY_OVERLAP_TEXT = "skipped: the previous run was still running"


@dataclass(frozen=True)
class Occurrence:
    scheduled_ms: int
    outcome: Outcome
    reason: Reason | None = None
    execution_id: str | None = None
    late_ms: int | None = None
    status: ExecutionStatus | None = None
    expectation: str | None = None  # MISSING, LATE or NOT_FIRED (absence alerts)
    detail: str | None = None


def expectation_of(execution: Execution) -> str | None:
    """MISSING as marked; LATE once a success came after the mark (derived at read: the success
    path writes nothing more for it)."""
    mark = execution.expectation
    if mark == "NOT_FIRED" and execution.started_ms is not None:
        mark = "MISSING"  # it did fire after all, later than its deadline
    if mark == "MISSING" and (execution.status is ExecutionStatus.SUCCEEDED or execution.reported_ok_ms is not None):
        return "LATE"
    return mark


def occurrence_times(job: Job, start_ms: int, to_ms: int, limit: int) -> list[int]:
    """Up to `limit` fire instants of the job's schedule in [start_ms, to_ms), its bounds
    (startAt, endAt) ignored: the ledger lists the occurrences the bounds left out too."""
    schedule = replace(job.spec.schedule, start_ms=None, end_ms=None)
    found: list[int] = []
    nominal = schedule.next_fire_after(job.nominal_of(start_ms) - 1)
    while nominal is not None and len(found) < limit:
        fire = job.fire_at(nominal)
        if fire >= to_ms:
            break
        if fire >= start_ms:
            found.append(fire)
        nominal = schedule.next_fire_after(nominal)
    return found


def ledger(job: Job, times: list[int], records: list[Execution], before: list[Execution], now_ms: int,
           excludes: Callable[[Job, int], bool] | None = None) -> list[Occurrence]:
    """What became of each occurrence at `times` (ascending). `records`: the job's scheduled
    executions in the span of `times` (no triggers, steps, hooks); `before`: the newest few
    records before that span (a MISSED_WINDOW record or a late RUN_ONCE run there may cover the
    first occurrences). `excludes`: the hand-off's exclusion rule (CalendarCache.excludes), for the
    occurrences still to come: one on an excluded date is SKIPPED (EXCLUDED), not PENDING."""
    by_id = {r.execution_id: r for r in records}
    around = sorted(before + records, key=lambda r: r.scheduled_ms)
    return [_answer(job, at, by_id.get(execution_id_for(job.job_id, at)), around, now_ms, excludes) for at in times]


def record_row(execution: Execution) -> Occurrence:
    """A record of the job's schedule as it was before its last change (no occurrence of today's
    schedule): listed as it is."""
    return _from_record(execution) or Occurrence(execution.scheduled_ms, Outcome.FIRED)


def _from_record(execution: Execution) -> Occurrence | None:
    at = execution.scheduled_ms
    common = {"execution_id": execution.execution_id, "status": execution.status}
    if execution.status is ExecutionStatus.SKIPPED:
        reason = _skip_reason(execution)
        return Occurrence(at, Outcome.SKIPPED, reason, detail=execution.error, **common)
    if execution.status is ExecutionStatus.CANCELLED and execution.started_ms is None:
        return Occurrence(at, Outcome.SKIPPED, Reason.CANCELLED, detail=execution.error, **common)
    if execution.expectation == "NOT_FIRED" and execution.started_ms is None:
        # The absence check found nothing and marked it (still claimable: a late fire runs it).
        return Occurrence(at, Outcome.NOT_FIRED, expectation="NOT_FIRED",
                          detail="due, never dispatched or claimed; alerted NOT_FIRED", **common)
    if execution.started_ms is None:
        return Occurrence(at, Outcome.PENDING, **common)
    return Occurrence(at, Outcome.FIRED, late_ms=execution.late_ms, expectation=expectation_of(execution),
                      **({"detail": "released late by the catch-up policy"} if execution.catch_up else {}), **common)


def _skip_reason(execution: Execution) -> Reason:
    if execution.skip_reason in Reason.__members__:
        return Reason(execution.skip_reason)
    # An older record without its reason: the overlap check's text, else misfirePolicy SKIP's.
    return Reason.OVERLAP if (execution.error or "").startswith(_LEGACY_OVERLAP_TEXT) else Reason.MISSED_WINDOW


def _answer(job: Job, at: int, record: Execution | None, around: list[Execution], now_ms: int,
            excludes: Callable[[Job, int], bool] | None = None) -> Occurrence:
    if record is not None:
        answered = _from_record(record)
        if answered is not None:
            return answered
    schedule = job.spec.schedule
    nominal = job.nominal_of(at)
    if schedule.start_ms is not None and nominal < schedule.start_ms:
        return Occurrence(at, Outcome.SKIPPED, Reason.BEFORE_START, detail="before the job's startAt")
    if schedule.end_ms is not None and nominal >= schedule.end_ms:
        return Occurrence(at, Outcome.SKIPPED, Reason.AFTER_END, detail="at or after the job's endAt")
    for earlier in reversed(around):
        if earlier.scheduled_ms >= at or earlier.skip_reason == Reason.EXCLUDED.value:
            continue
        if (earlier.skip_reason == Reason.MISSED_WINDOW.value and earlier.skipped_through_ms is not None
                and at <= earlier.skipped_through_ms):
            return Occurrence(at, Outcome.SKIPPED, Reason.MISSED_WINDOW, earlier.execution_id,
                              detail=f"beyond the catch-up's maxCatchUp: counted in {earlier.execution_id}")
        if earlier.started_ms is not None and earlier.started_ms >= at and earlier.status is not ExecutionStatus.SKIPPED:
            # misfirePolicy RUN_ONCE: the occurrences missed before a late fire ran are that one run.
            return Occurrence(at, Outcome.SKIPPED, Reason.DEDUPLICATED, earlier.execution_id,
                              detail=f"missed while the scheduler was behind; run once as {earlier.execution_id}")
        break  # the newest earlier record explains nothing about this one
    span = _paused_span(job, at)
    if span is not None:
        return Occurrence(at, Outcome.SKIPPED, Reason.PAUSED, detail=span)
    ended_at = job.updated_ms  # a CANCELLED or COMPLETED job's last write is its end
    if job.state is JobState.CANCELLED and at >= ended_at:
        return Occurrence(at, Outcome.SKIPPED, Reason.CANCELLED, detail="the job was cancelled")
    if job.state is JobState.COMPLETED and job.completed_reason is CompletedReason.MAX_RUNS_REACHED and (
            at >= ended_at or any(r.run is not None and r.run >= (job.spec.max_runs or 0) and r.scheduled_ms < at
                                  for r in around)):
        return Occurrence(at, Outcome.SKIPPED, Reason.MAX_RUNS_REACHED,
                          detail=f"the job had fired maxRuns ({job.spec.max_runs}) times")
    if at > now_ms - IN_FLIGHT_GRACE_MS:
        if excludes is not None and job.spec.exclude_calendars and excludes(job, nominal):
            return Occurrence(at, Outcome.SKIPPED, Reason.EXCLUDED,
                              detail="on a date of an exclusion calendar: its hand-off records it SKIPPED")
        return Occurrence(at, Outcome.PENDING)
    return Occurrence(at, Outcome.NOT_FIRED, detail="due, no execution and no reason recorded")


def _paused_span(job: Job, at: int) -> str | None:
    for start, end in job.paused_spans:
        if start <= at and (end is None or at <= end):
            until = f" to {format_instant(end)}" if end is not None else " (still paused" + (
                f": {job.paused_reason})" if job.paused_reason else ")")
            return f"paused from {format_instant(start)}{until}"
    if job.state is JobState.PAUSED and not job.paused_spans and at >= job.updated_ms:
        return "paused"  # paused before the job kept its spans: since its last change
    return None
