"""Absence alerts (a dead man's switch): a job with `expect: {successWithinSec}` must report
success within that long after each fire. A CHECK timer at the deadline, written with the
occurrence's FIRE timer (service/handoff.py), comes to the worker as a CHECK dispatch: it reads the
execution and, if no success is recorded by the deadline, marks it MISSING once (a conditional
write) and alerts once: the job's onFailure hook, the deployment's alert topic, a metric (the
worker counts the ALERTED outcome as AbsenceAlerts). An occurrence with no record at its deadline
(the tick lost it) gets a NOT_FIRED record and the same alerts."""
from __future__ import annotations

from enum import Enum

from jobsched.domain.clock import Clock
from jobsched.domain.executions import Dispatch, DispatchKind, Execution, ExecutionStatus, scheduled_ms_of
from jobsched.domain.hooks import alert_hook_id
from jobsched.domain.jobs import Job
from jobsched.domain.schedule import format_instant
from jobsched.domain.timers import Timer, TimerKind
from jobsched.domain.executions import execution_id_for
from jobsched.store.queues import Outgoing

# A check delivered again finds the mark made; it alerts again only if the alert never went out
# (the process died between the mark and the alert) and the mark is this old: a duplicate that
# arrives while the first delivery is still sending sends nothing.
ALERT_RETRY_AFTER_MS = 60_000


class CheckOutcome(str, Enum):
    MET = "MET"  # success within the deadline, or nothing was expected (skipped, cancelled, paused)
    LATE = "LATE"  # success after the deadline, seen by the check itself: marked, no alert
    ALERTED = "ALERTED"  # marked MISSING or NOT_FIRED, and alerted, by this delivery
    DUPLICATE = "DUPLICATE"  # marked before: nothing more


def check_timer(job: Job, occurrence_ms: int, segment: int) -> Timer | None:
    """The CHECK timer of one occurrence of a job with `expect`, else None."""
    if job.spec.expect is None:
        return None
    return Timer(occurrence_ms + job.spec.expect.success_within_sec * 1000, TimerKind.CHECK, job.tenant_id,
                 job.job_id, job.generation, segment, execution_id_for(job.job_id, occurrence_ms))


def success_ms(execution: Execution) -> int | None:
    """When the occurrence first reported success: its SUCCEEDED end, or a heartbeat with ok."""
    ends = [t for t in ((execution.finished_ms if execution.status is ExecutionStatus.SUCCEEDED else None),
                        execution.reported_ok_ms) if t is not None]
    return min(ends) if ends else None


class Expectations:
    def __init__(self, stores, clock: Clock) -> None:
        self._jobs = stores.jobs
        self._executions = stores.executions
        self._lanes = stores.lanes
        self._alerts = stores.alerts
        self._clock = clock

    def check(self, dispatch: Dispatch) -> CheckOutcome:
        """`dispatch.due_ms` is the deadline; the occurrence is the execution's."""
        deadline = dispatch.due_ms
        execution = self._executions.get(dispatch.job_id, dispatch.execution_id)
        now = self._clock.now_ms()
        if execution is None:
            job = self._jobs.get(dispatch.tenant_id, dispatch.job_id, consistent=True)
            if job is None or not job.fires() or job.generation != dispatch.generation:
                return CheckOutcome.MET  # paused, changed or deleted since: this occurrence was not wanted
            if not self._executions.put_not_fired(job.tenant_id, job.job_id, dispatch.execution_id,
                                                  scheduled_ms_of(dispatch.execution_id), job.generation, now):
                return self.check(dispatch)  # it fired (or another check recorded it) meanwhile: look again
            # Crash here: the record says NOT_FIRED without alertedMs; a redelivery alerts (below).
            self._alert(job, self._executions.get(job.job_id, dispatch.execution_id), "NOT_FIRED", deadline, now)
            return CheckOutcome.ALERTED
        if execution.status in (ExecutionStatus.SKIPPED, ExecutionStatus.CANCELLED):
            return CheckOutcome.MET  # not expected to run (overlap, calendar, misfire policy, cancel)
        succeeded = success_ms(execution)
        if succeeded is not None and succeeded <= deadline:
            return CheckOutcome.MET
        if execution.expectation is not None:
            if (execution.expectation in ("MISSING", "NOT_FIRED") and execution.alerted_ms is None
                    and execution.expectation_at_ms is not None
                    and now - execution.expectation_at_ms >= ALERT_RETRY_AFTER_MS):
                job = self._jobs.get(dispatch.tenant_id, dispatch.job_id, consistent=True)
                self._alert(job, execution, execution.expectation, deadline, now)
                return CheckOutcome.ALERTED
            return CheckOutcome.DUPLICATE
        if succeeded is not None:
            # It succeeded after its deadline, before this check ran (a late check): LATE, no alert.
            self._executions.mark_expectation(dispatch.job_id, dispatch.execution_id, "LATE", now)
            return CheckOutcome.LATE
        if not self._executions.mark_expectation(dispatch.job_id, dispatch.execution_id, "MISSING", now):
            return CheckOutcome.DUPLICATE  # another delivery of this check marked it first
        # Crash here: MISSING without alertedMs; the redelivered check alerts (above).
        job = self._jobs.get(dispatch.tenant_id, dispatch.job_id, consistent=True)
        self._alert(job, execution, "MISSING", deadline, now)
        return CheckOutcome.ALERTED

    def _alert(self, job: Job | None, execution: Execution | None, alert: str, deadline: int, now: int) -> None:
        """The hook's call (recorded once, claimed once: a repeat is absorbed), the topic, then the
        record that they went out. The metric is the worker's count of the ALERTED outcome."""
        if execution is None:
            return
        if job is not None and job.spec.on_failure is not None:
            hook_id = alert_hook_id(execution.execution_id, alert)
            self._executions.put_hook(job.tenant_id, job.job_id, hook_id, execution.execution_id,
                                      execution.scheduled_ms, job.generation)
            self._lanes.send([Outgoing(job.spec.priority, Dispatch(DispatchKind.HOOK, job.tenant_id, job.job_id,
                                                                     hook_id, execution.scheduled_ms,
                                                                     job.generation), 0)])
        self._alerts.publish({
            "alert": alert, "tenantId": execution.tenant_id, "jobId": execution.job_id,
            "jobName": job.spec.name if job is not None else None, "executionId": execution.execution_id,
            "scheduledAt": format_instant(execution.scheduled_ms), "deadline": format_instant(deadline),
            "status": execution.status.value, "at": format_instant(now)})
        self._executions.mark_alerted(execution.job_id, execution.execution_id, now)
