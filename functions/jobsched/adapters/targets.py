"""Routes each attempt to the invoker of its target type."""
from __future__ import annotations

from typing import Any

from jobsched.domain.executions import AttemptOutcome, Dispatch
from jobsched.domain.jobs import Job, TargetType
from jobsched.store.target_batches import TargetBatches, batch_key


class TargetRouter:
    def __init__(self, http, aws) -> None:
        self._http = http
        self._aws = aws

    def invoke(self, job: Job, dispatch: Dispatch, attempt: int, callback_token: str | None = None,
               progress: Any = None) -> AttemptOutcome:
        invoker = self._http if job.spec.target.type is TargetType.HTTP else self._aws
        return invoker.invoke(job, dispatch, attempt, callback_token=callback_token, progress=progress)

    def batch_key(self, job: Job) -> tuple | None:
        """What calls must share to go out in one batch request (store/target_batches.py); None:
        this target's calls go one by one."""
        return batch_key(job) if hasattr(self._aws, "tenant_sessions") else None

    def invoke_batch(self, calls: list[tuple[Job, Dispatch, int]]) -> list[AttemptOutcome]:
        """Calls of one batch_key, in as few requests as the service takes: each call's outcome."""
        return TargetBatches(self._aws).invoke_batch(calls)

    @property
    def task_calls(self):
        """Container tasks: describe and stop a running task in the job's tenant session."""
        return self._aws
