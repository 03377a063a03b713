"""Long-running targets report back: heartbeat (with progress), complete, fail. Authorized by
the per-execution callback token the target received with the call (X-Callback-Token), which
is stored only as a hash and changes with every attempt."""
from __future__ import annotations

import hmac

from jobsched.domain.clock import Clock
from jobsched.domain.errors import ConditionLost, Conflict, Unauthorized
from jobsched.domain.executions import (
    AttemptOutcome,
    AttemptRecord,
    Dispatch,
    DispatchKind,
    Execution,
    ExecutionStatus,
    job_id_of,
)
from jobsched.domain.jobs import Job
from jobsched.service.outcomes import Outcome, Outcomes
from jobsched.service.worker import LEASE_MARGIN_MS, callback_token_hash


class Callbacks:
    def __init__(self, stores, outcomes: Outcomes, clock: Clock) -> None:
        self._jobs = stores.jobs
        self._executions = stores.executions
        self._outcomes = outcomes
        self._clock = clock

    def heartbeat(self, execution_id: str, token: str | None, progress, ok: bool = False) -> dict:
        execution, job = self._authorize(execution_id, token)
        now = self._clock.now_ms()
        deadline = now + (job.spec.heartbeat_timeout_sec if job else 300) * 1000
        try:
            updated = self._executions.heartbeat(execution.job_id, execution_id, execution.attempt, progress,
                                                 deadline, now, ok=ok)
        except ConditionLost:
            raise Conflict("this attempt no longer holds the execution (it was taken over or ended)") from None
        self._outcomes.flow.extend(job, execution_id, deadline + LEASE_MARGIN_MS)  # a long attempt keeps its slot
        if updated.cancel_requested:
            record = AttemptRecord(execution.attempt, ExecutionStatus.CANCELLED, execution.attempt_started_ms or now,
                                   now, "cancelled on request")
            self._outcomes.cancel_running(_dispatch(execution, job), execution.attempt, [record], job=job)
            return {"status": "CANCELLED", "cancelRequested": True, "leaseUntil": None}
        return {"status": "RUNNING", "cancelRequested": False, "leaseUntil": deadline}

    def complete(self, execution_id: str, token: str | None, output) -> Execution:
        return self._end(execution_id, token, AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, output))

    def fail(self, execution_id: str, token: str | None, error: str) -> Execution:
        return self._end(execution_id, token, AttemptOutcome(False, ExecutionStatus.FAILED, error))

    def _end(self, execution_id: str, token: str | None, outcome: AttemptOutcome) -> Execution:
        execution, job = self._authorize(execution_id, token)
        now = self._clock.now_ms()
        record = AttemptRecord(execution.attempt, outcome.status, execution.attempt_started_ms or now, now,
                               outcome.error)
        result = self._outcomes.finish(job, _dispatch(execution, job), execution.attempt, [record], outcome)
        if result is Outcome.STALE_RESULT:
            raise Conflict("this attempt no longer holds the execution (it was taken over or ended)")
        ended = self._executions.get(execution.job_id, execution_id)
        assert ended is not None
        return ended

    def _authorize(self, execution_id: str, token: str | None) -> tuple[Execution, Job | None]:
        if not token:
            raise Unauthorized("send the X-Callback-Token that came with the call")
        job_id = job_id_of(execution_id)
        execution = self._executions.get(job_id, execution_id) if job_id else None
        # One answer for an unknown execution and a wrong token: an unauthenticated caller learns
        # nothing about which executions exist or what state they are in. (An ended attempt has
        # no token hash any more, so a token of an ended attempt is a wrong token too.)
        expected = execution.callback_token_hash if execution else None
        if not expected or not hmac.compare_digest(expected, callback_token_hash(token)):
            raise Unauthorized(BAD_TOKEN)
        if execution.status is not ExecutionStatus.RUNNING:
            raise Conflict(f"execution is {execution.status.value}")
        return execution, self._jobs.get(execution.tenant_id, execution.job_id, consistent=True)


BAD_TOKEN = "no running attempt of this execution holds this callback token"


def _dispatch(execution: Execution, job: Job | None) -> Dispatch:
    kind = DispatchKind.MANUAL if execution.execution_id.endswith(".manual") else DispatchKind.FIRE
    generation = job.generation if job else 0
    return Dispatch(kind, execution.tenant_id, execution.job_id, execution.execution_id, execution.scheduled_ms,
                    generation, execution.attempt, run=execution.run)
