"""Routes each attempt to the invoker of its target type."""
from __future__ import annotations

from typing import Any

from jobsched.domain.executions import AttemptOutcome, Dispatch
from jobsched.domain.jobs import Job, TargetType


class TargetRouter:
    def __init__(self, http, aws) -> None:
        self._http = http
        self._aws = aws

    def invoke(self, job: Job, dispatch: Dispatch, attempt: int, callback_token: str | None = None,
               progress: Any = None) -> AttemptOutcome:
        invoker = self._http if job.spec.target.type is TargetType.HTTP else self._aws
        return invoker.invoke(job, dispatch, attempt, callback_token=callback_token, progress=progress)

    @property
    def task_calls(self):
        """Container tasks: describe and stop a running task in the job's tenant session."""
        return self._aws
