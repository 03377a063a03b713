"""The worker: run one attempt of one execution, exactly once in effect.

Delivery is at-least-once; the conditional claim makes execution once in effect, and the
attempt number fences every later write of the attempt."""
from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Protocol

from jobsched.domain.clock import Clock
from jobsched.domain.errors import ConditionLost
from jobsched.domain.executions import AttemptOutcome, AttemptRecord, Dispatch, DispatchKind, ExecutionStatus
from jobsched.domain.jobs import Job, JobState
from jobsched.domain.retry import SQS_MAX_DELAY_MS
from jobsched.domain.timers import Timer, TimerKind
from jobsched.service.handoff import HandOff
from jobsched.store.queues import Outgoing

# A lease outlives the attempt's own timeout by this margin before another worker may take over.
LEASE_MARGIN_MS = 60_000
# SQS delays are whole seconds rounded down: wait out at most this much before calling the target.
MAX_PRECISION_WAIT_MS = 1_500


class TargetInvoker(Protocol):
    def invoke(self, job: Job, dispatch: Dispatch, attempt: int) -> AttemptOutcome: ...


class Outcome(str, Enum):
    SUCCEEDED = "SUCCEEDED"
    RETRY_SCHEDULED = "RETRY_SCHEDULED"
    DEAD = "DEAD"
    STALE_MESSAGE = "STALE_MESSAGE"  # job deleted, changed or paused since dispatch
    DUPLICATE = "DUPLICATE"  # another delivery holds or finished this execution
    RETRY_RECOVERED = "RETRY_RECOVERED"  # a crash left a recorded retry unsent: sent now
    STALE_RESULT = "STALE_RESULT"  # our lease was taken over; our result was rejected


class RedeliverLater(Exception):
    """The execution is running under a live lease: let SQS redeliver after the visibility
    timeout, when the lease has expired if that worker died."""


@dataclass(frozen=True)
class WorkResult:
    outcome: Outcome
    attempt: int = 0
    late_ms: int | None = None


class Worker:
    def __init__(self, stores, handoff: HandOff, invoker: TargetInvoker, clock: Clock,
                 unit_random: Callable[[], float] = random.random) -> None:
        self._jobs = stores.jobs
        self._executions = stores.executions
        self._lanes = stores.lanes
        self._handoff = handoff
        self._invoker = invoker
        self._clock = clock
        self._random = unit_random

    def process(self, dispatch: Dispatch) -> WorkResult:
        job = self._jobs.get(dispatch.tenant_id, dispatch.job_id, consistent=True)
        if not _still_wanted(job, dispatch):
            return WorkResult(Outcome.STALE_MESSAGE)

        if dispatch.kind is DispatchKind.FIRE:
            early_ms = dispatch.due_ms - self._clock.now_ms()
            if 0 < early_ms <= MAX_PRECISION_WAIT_MS:
                self._clock.sleep(early_ms / 1000)

        now = self._clock.now_ms()
        try:
            claim = self._executions.claim(dispatch, now, now + job.spec.timeout_sec * 1000 + LEASE_MARGIN_MS)
        except ConditionLost as lost:
            return self._claim_lost(job, dispatch, lost.current)
        # Crash from here until the result is written: SQS redelivers after the visibility
        # timeout, by then the lease has expired, and the next delivery takes over (LOST).
        outcome = self._invoker.invoke(job, dispatch, claim.attempt)
        finished = self._clock.now_ms()
        records = [r for r in (claim.taken_over,) if r is not None]
        records.append(AttemptRecord(claim.attempt, outcome.status, now, finished, outcome.error))
        late_ms = now - dispatch.due_ms if claim.attempt == 1 else None
        try:
            if outcome.ok:
                self._executions.finish_attempt(dispatch, claim.attempt, ExecutionStatus.SUCCEEDED, records,
                                                finished, None, outcome.output)
                self._complete_if_last(job, dispatch, finished)
                return WorkResult(Outcome.SUCCEEDED, claim.attempt, late_ms)
            if job.spec.retry.exhausted(claim.attempt):
                self._executions.finish_attempt(dispatch, claim.attempt, ExecutionStatus.DEAD, records,
                                                finished, outcome.error)
                self._complete_if_last(job, dispatch, finished)
                return WorkResult(Outcome.DEAD, claim.attempt, late_ms)
            retry_at = finished + job.spec.retry.delay_before(claim.attempt + 1, self._random())
            self._executions.finish_attempt(dispatch, claim.attempt, ExecutionStatus.FAILED, records,
                                            finished, outcome.error, retry_at_ms=retry_at)
        except ConditionLost:
            return WorkResult(Outcome.STALE_RESULT, claim.attempt, late_ms)
        # Crash here: FAILED is recorded with its retryAt; the redelivered message finds it and
        # sends the retry (see _claim_lost), so the retry is never lost.
        self._schedule_retry(job, dispatch, claim.attempt + 1, retry_at)
        return WorkResult(Outcome.RETRY_SCHEDULED, claim.attempt, late_ms)

    def _claim_lost(self, job: Job, dispatch: Dispatch, current: dict | None) -> WorkResult:
        if current is None:
            return WorkResult(Outcome.DUPLICATE)
        status = current.get("status")
        attempt = int(current.get("attempt", 0))
        if status == ExecutionStatus.RUNNING.value:
            raise RedeliverLater(dispatch.execution_id)
        if status == ExecutionStatus.FAILED.value and attempt == dispatch.attempt and current.get("retryAtMs"):
            self._schedule_retry(job, dispatch, attempt + 1, int(current["retryAtMs"]))
            return WorkResult(Outcome.RETRY_RECOVERED, attempt)
        return WorkResult(Outcome.DUPLICATE, attempt)

    def _schedule_retry(self, job: Job, dispatch: Dispatch, attempt: int, retry_at_ms: int) -> None:
        now = self._clock.now_ms()
        if retry_at_ms - now <= SQS_MAX_DELAY_MS:
            retry = Dispatch(DispatchKind.RETRY, dispatch.tenant_id, dispatch.job_id, dispatch.execution_id,
                             dispatch.due_ms, dispatch.generation, attempt)
            self._lanes.send([Outgoing(job.spec.priority, retry, max(0, -(-(retry_at_ms - now) // 1000)))])
            return
        timer = Timer(retry_at_ms, TimerKind.RETRY, job.tenant_id, job.job_id, job.generation,
                      self._handoff.segment_of(job.job_id), dispatch.execution_id, attempt)
        self._handoff.place(timer, job)

    def _complete_if_last(self, job: Job, dispatch: Dispatch, now_ms: int) -> None:
        """A job whose schedule has no occurrence after this one (a one-off, or a recurring job
        past its endAt) is COMPLETED once that occurrence has ended."""
        if dispatch.kind is DispatchKind.MANUAL or job.state is not JobState.ACTIVE:
            return
        if job.spec.schedule.next_fire_after(dispatch.due_ms) is None:
            self._jobs.mark_completed(job, now_ms)


def _still_wanted(job: Job | None, dispatch: Dispatch) -> bool:
    if job is None:
        return False
    if dispatch.kind is DispatchKind.MANUAL:
        return job.state is not JobState.CANCELLED
    if job.generation != dispatch.generation:
        return False  # updated, paused, resumed or cancelled since this was dispatched
    return dispatch.kind is DispatchKind.RETRY or job.fires()
