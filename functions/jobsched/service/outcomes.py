"""Ending an attempt: success, retry with backoff, DEAD, or CANCELLED on request. One place for
the worker, the heartbeat-deadline check and the long-running callbacks (complete, fail)."""
from __future__ import annotations

import random
import threading
from collections import Counter
from contextlib import contextmanager
from enum import Enum
from typing import Callable, Iterator

from jobsched.domain.clock import Clock
from jobsched.domain.errors import ConditionLost
from jobsched.domain.executions import (AttemptOutcome, AttemptRecord, Dispatch, DispatchKind, Execution,
                                        ExecutionStatus, ended_dispatch)
from jobsched.domain.jobs import CompletedReason, Job, JobState
from jobsched.domain.retry import SQS_MAX_DELAY_MS
from jobsched.domain.executions import scheduled_ms_of
from jobsched.domain.hooks import hook_execution_id, hook_of
from jobsched.domain.steps import step_of
from jobsched.domain.timers import Timer, TimerKind
from jobsched.service.handoff import HandOff
from jobsched.service.flow import FlowGate
from jobsched.service.runs import Runs
from jobsched.store.jobs import active_counter
from jobsched.store.queues import Outgoing


class Outcome(str, Enum):
    SUCCEEDED = "SUCCEEDED"
    RETRY_SCHEDULED = "RETRY_SCHEDULED"
    DEAD = "DEAD"
    CANCELLED = "CANCELLED"
    ACCEPTED = "ACCEPTED"  # a long-running target took the work and reports back
    SKIPPED = "SKIPPED"  # overlapPolicy SKIP: the previous run was still running
    STALE_MESSAGE = "STALE_MESSAGE"  # job deleted, changed or paused since dispatch
    DUPLICATE = "DUPLICATE"  # another delivery holds or finished this execution
    RETRY_RECOVERED = "RETRY_RECOVERED"  # a crash left a recorded retry unsent: sent now
    STALE_RESULT = "STALE_RESULT"  # our lease was taken over; our result was rejected
    LEASE_EXTENDED = "LEASE_EXTENDED"  # a heartbeat moved the deadline: checked again then
    LOST = "LOST"  # a long-running attempt missed its heartbeat deadline
    RUN_STARTED = "RUN_STARTED"  # a job with steps: its run's first steps were sent
    THROTTLED = "THROTTLED"  # flow control held it back: sent again for later, no attempt used
    NOT_HELD = "NOT_HELD"  # regions: its segment's lease has a later epoch (handed off again there)
    LANE_SHARE_HELD = "LANE_SHARE_HELD"  # its tenant or host holds its lane share: later, no attempt used
    EXPECTATION_CHECKED = "EXPECTATION_CHECKED"  # absence alerts: a CHECK found success, or nothing to alert
    ABSENCE_ALERTED = "ABSENCE_ALERTED"  # absence alerts: marked MISSING or NOT_FIRED and alerted, once


def pause_reason(count: int, execution_id: str, error: str | None) -> str:
    """The pausedReason of a job that paused itself: the count, the last execution, its error."""
    last = f"; last error: {error[:300]}" if error else ""
    return f"paused after {count} consecutive executions ended DEAD; the last: {execution_id}{last}"


def retry_delay(retry, next_attempt: int, unit_random: float, retry_after_ms: int | None) -> int:
    """The backoff before the next attempt; when the target said when to come back (Retry-After
    on 429 or 503), that wait instead, bounded by the policy's maximum delay."""
    if retry_after_ms is not None:
        return min(max(0, retry_after_ms), retry.max_delay_ms)
    return retry.delay_before(next_attempt, unit_random)


def as_step_view(job: Job | None, execution_id: str) -> Job | None:
    """A step's attempt ends under its step's policies (retry, timeout): the job as that step
    runs it (Job.for_step). Anything else, or a view already, is returned as it is."""
    if job is None or job.spec.steps is None or job.version < 0:
        return job
    ref = step_of(execution_id)
    step = job.spec.steps.step(ref[1]) if ref else None
    return job.for_step(step, ref[0], {}) if step is not None else job


class Outcomes:
    def __init__(self, stores, handoff: HandOff, clock: Clock,
                 unit_random: Callable[[], float] = random.random) -> None:
        self._jobs = stores.jobs
        self._executions = stores.executions
        self._lanes = stores.lanes
        self._handoff = handoff
        self._clock = clock
        self._random = unit_random
        self._lock = threading.Lock()
        self._deferred: Counter | None = None
        self.runs = Runs(stores, handoff, clock, on_run_end=self.after_end)
        self.flow = FlowGate(stores, clock)

    def finish(self, job: Job | None, dispatch: Dispatch, attempt: int, records: list[AttemptRecord],
               outcome: AttemptOutcome, lease_expired_by: int | None = None) -> Outcome:
        now = self._clock.now_ms()
        job = as_step_view(job, dispatch.execution_id)
        step = job is not None and job.spec.steps is not None and step_of(dispatch.execution_id) is not None
        retry = job.spec.retry if job else None
        try:
            if outcome.ok:
                self._record_end(job, dispatch, attempt, ExecutionStatus.SUCCEEDED, records, now, None,
                                 output=outcome.output, task=outcome.task)
                self._ended(job, dispatch, ExecutionStatus.SUCCEEDED, now, step)
                return Outcome.SUCCEEDED
            if retry is None or retry.exhausted(attempt) or job.state is JobState.CANCELLED or not outcome.retryable:
                self._record_end(job, dispatch, attempt, ExecutionStatus.DEAD, records, now, outcome.error,
                                 lease_expired_by=lease_expired_by, dead_letter=not step, task=outcome.task)
                self._ended(job, dispatch, ExecutionStatus.DEAD, now, step, outcome.error)
                return Outcome.DEAD
            retry_at = now + retry_delay(retry, attempt + 1, self._random(), outcome.retry_after_ms)
            self._record_end(job, dispatch, attempt, ExecutionStatus.FAILED, records, now, outcome.error,
                             retry_at_ms=retry_at, lease_expired_by=lease_expired_by, task=outcome.task)
        except ConditionLost as lost:
            current = lost.current or {}
            if (current.get("status") == ExecutionStatus.RUNNING.value and int(current.get("attempt", 0)) == attempt
                    and current.get("cancelRequested")):
                return self.cancel_running(dispatch, attempt, records, outcome.error, job, task=outcome.task)
            return Outcome.STALE_RESULT  # another attempt holds it now (and its flow-control slot)
        # Crash here: FAILED is recorded with its retryAt; the redelivered message finds it and
        # sends the retry (Worker._claim_lost), so the retry is never lost.
        self.schedule_retry(job, dispatch, attempt + 1, retry_at)
        return Outcome.RETRY_SCHEDULED

    def _record_end(self, job: Job | None, dispatch: Dispatch, attempt: int, status: ExecutionStatus,
                    records: list[AttemptRecord], now_ms: int, error: str | None, **details) -> None:
        """The attempt's fenced end (ConditionLost if it no longer holds the execution), then its
        flow-control slot, if any, is free (the attempt is over, whatever follows)."""
        self._executions.finish_attempt(dispatch, attempt, status, records, now_ms, error, **details)
        self.flow.give_back(job, dispatch.execution_id)

    def _ended(self, job: Job | None, dispatch: Dispatch, status: ExecutionStatus, now_ms: int, step: bool,
               error: str | None = None) -> None:
        """After an execution's end is recorded: a step moves its run on; anything else may
        complete its job and call its completion hook."""
        if step:
            self.runs.step_ended(job, dispatch.execution_id, status)
        else:
            self.after_end(job, dispatch, status, now_ms, error)

    def after_end(self, job: Job | None, dispatch: Dispatch, status: ExecutionStatus, now_ms: int,
                  error: str | None = None) -> None:
        """An execution (or a run) ended: its job may be complete, and its hook is called."""
        if hook_of(dispatch.execution_id) is not None:
            return  # a hook's own call: it completes nothing and has no hook
        # The hook first: a crash before the job is completed leaves the job ACTIVE, so the end's
        # redelivered message still reaches Worker._claim_lost, which does both again.
        self.send_hook(job, dispatch.execution_id, status)
        self._complete_if_last(job, dispatch, now_ms)
        # After the completion: a job whose last run ended DEAD is COMPLETED, not paused.
        self._count_failures(job, dispatch, status, now_ms, error)

    def _count_failures(self, job: Job | None, dispatch: Dispatch, status: ExecutionStatus, now_ms: int,
                        error: str | None) -> None:
        """pauseAfterFailures: a scheduled fire (it has a run number) that ended DEAD counts one
        more in a row, and the job pauses itself at the threshold; one that SUCCEEDED clears the
        count. No write on the success path while the count (as the worker read it) is zero.
        Crash between the count and the pause: the end's redelivered message counts nothing
        twice (the count remembers its last execution) and makes the pause then."""
        if job is None or dispatch.run is None:
            return
        if status is ExecutionStatus.SUCCEEDED:
            if job.consecutive_failures > 0:
                self._jobs.clear_failures(job, now_ms)
            return
        threshold = job.spec.pause_after_failures
        if status is not ExecutionStatus.DEAD or threshold is None:
            return
        count = self._jobs.count_dead(job, dispatch.execution_id, now_ms)
        if count is not None and count >= threshold and job.state is JobState.ACTIVE:
            self._jobs.pause_itself(job, threshold, pause_reason(count, dispatch.execution_id, error), now_ms)

    def send_hook(self, job: Job | None, execution_id: str, status: ExecutionStatus) -> None:
        """Record the hook's call PENDING and send it (safe to repeat: the record is written once,
        and a second send is a duplicate that the hook's claim absorbs)."""
        target = None if job is None else (job.spec.on_success if status is ExecutionStatus.SUCCEEDED
                                           else job.spec.on_failure if status is ExecutionStatus.DEAD else None)
        hook_id = hook_execution_id(execution_id, status)
        if target is None or hook_id is None:
            return
        self._executions.put_hook(job.tenant_id, job.job_id, hook_id, execution_id, scheduled_ms_of(execution_id),
                                  job.generation)
        # Crash here: the end's message comes back, finds the execution ended, and calls this again.
        self._lanes.send([Outgoing(job.spec.priority, Dispatch(DispatchKind.HOOK, job.tenant_id, job.job_id, hook_id,
                                                                 scheduled_ms_of(execution_id), job.generation), 0)])

    def cancel_running(self, dispatch: Dispatch, attempt: int, records: list[AttemptRecord],
                       error: str | None = None, job: Job | None = None, task: dict | None = None) -> Outcome:
        now = self._clock.now_ms()
        cancelled = [AttemptRecord(r.attempt, ExecutionStatus.CANCELLED if r.attempt == attempt else r.status,
                                   r.started_ms, r.finished_ms, r.error) for r in records]
        try:
            self._record_end(job, dispatch, attempt, ExecutionStatus.CANCELLED, cancelled, now,
                             error or "cancelled on request", task=task)
        except ConditionLost:
            return Outcome.STALE_RESULT
        # A cancelled execution has ended as any other: a step moves its run on, and the occurrence
        # of a one-off job (or a job's last run) completes its job, its quota place given back.
        step = job is not None and job.spec.steps is not None and step_of(dispatch.execution_id) is not None
        self._ended(job, dispatch, ExecutionStatus.CANCELLED, now, step)
        return Outcome.CANCELLED

    def after_cancel(self, job: Job | None, execution: Execution) -> None:
        """The API cancelled an execution that waited (PENDING, or FAILED until its retry): what
        follows any end follows it (its job may complete). A crash before this: the execution's
        next message finds it CANCELLED and does it then (Worker._claim_lost)."""
        self.after_end(job, ended_dispatch(execution), ExecutionStatus.CANCELLED, self._clock.now_ms())

    def schedule_retry(self, job: Job, dispatch: Dispatch, attempt: int, retry_at_ms: int) -> None:
        """Backoffs up to SQS's 15-minute cap ride an SQS delay; longer ones become RETRY timers."""
        now = self._clock.now_ms()
        retry = Dispatch(DispatchKind.RETRY, dispatch.tenant_id, dispatch.job_id, dispatch.execution_id,
                         dispatch.due_ms, job.generation, attempt, run=dispatch.run)
        # Regions: a retry is a timer whatever its backoff, so that it is in the replicated tables
        # and a region that takes the segment over runs it (a delayed message would stay in the
        # queues of the region that sent it).
        if retry_at_ms - now <= SQS_MAX_DELAY_MS and not self._handoff.multi_region:
            # Rounded up to the next whole second: a retry is never early.
            self._lanes.send([Outgoing(job.spec.priority, retry, retry_at_ms + 999)])
            return
        timer = Timer(retry_at_ms, TimerKind.RETRY, job.tenant_id, job.job_id, job.generation,
                      self._handoff.segment_of(job.job_id), dispatch.execution_id, attempt, runs=dispatch.run or 0)
        self._handoff.place(timer, job)

    def arm_lease_check(self, dispatch: Dispatch, attempt: int, deadline_ms: int, job: Job | None) -> None:
        timer = Timer(deadline_ms, TimerKind.LEASE, dispatch.tenant_id, dispatch.job_id, dispatch.generation,
                      self._handoff.segment_of(dispatch.job_id), dispatch.execution_id, attempt)
        self._handoff.place(timer, job)

    def _complete_if_last(self, job: Job | None, dispatch: Dispatch, now_ms: int) -> None:
        """A job whose schedule has no occurrence after this one (a one-off, or a recurring job
        past its endAt) is COMPLETED once that occurrence has ended."""
        if job is None or dispatch.kind in (DispatchKind.MANUAL, DispatchKind.BACKFILL) or job.state is not JobState.ACTIVE:
            return
        recurring = job.spec.schedule.recurring
        if recurring and dispatch.run is not None and job.spec.max_runs is not None and dispatch.run >= job.spec.max_runs:
            reason: CompletedReason | None = CompletedReason.MAX_RUNS_REACHED  # its last run has ended
        elif job.spec.schedule.next_fire_after(job.nominal_of(dispatch.due_ms)) is None:
            reason = CompletedReason.END_REACHED if recurring else None
        else:
            return
        if self._jobs.mark_completed(job, now_ms, reason, dispatch.run if recurring else None):
            self._give_back(job.tenant_id, active_counter(job.quota_shard))

    def _give_back(self, tenant_id: str, counter: str) -> None:
        with self._lock:
            if self._deferred is not None:
                self._deferred[(tenant_id, counter)] += 1
                return
        self._jobs.give_back_quota(tenant_id, counter)

    @contextmanager
    def batched_give_backs(self) -> Iterator[list[Exception]]:
        """Within it, the quota places of jobs that end are given back once per counter at the
        end: one write for a worker batch's ten one-time jobs of a tenant instead of ten. (As
        before, a crash between a job's end and its give-back leaves the place counted: the
        quota errs toward refusing.) Yields the list that receives any give-back that failed."""
        failed: list[Exception] = []
        with self._lock:
            self._deferred = Counter()
        try:
            yield failed
        finally:
            with self._lock:
                deferred, self._deferred = self._deferred, None
            for (tenant_id, counter), count in deferred.items():
                try:
                    self._jobs.give_back_quota(tenant_id, counter, count)
                except Exception as exc:  # noqa: BLE001 - reported by the caller, never lost silently
                    failed.append(exc)
