"""Job use cases behind the API. Every read and write is scoped to the caller's tenant."""
from __future__ import annotations

from jobsched.api.models import JobRequest
from jobsched.api.mapping import to_spec
from jobsched.domain.clock import Clock
from jobsched.domain.errors import NotFound
from jobsched.domain.executions import Execution, job_id_of
from jobsched.domain.jobs import Job, JobState, new_job_id
from jobsched.domain.timers import Timer, TimerKind
from jobsched.service.handoff import HandOff
from jobsched.store.dynamo import Page


class JobsService:
    def __init__(self, stores, handoff: HandOff, clock: Clock) -> None:
        self._jobs = stores.jobs
        self._executions = stores.executions
        self._handoff = handoff
        self._clock = clock

    def create(self, tenant_id: str, request: JobRequest) -> Job:
        now = self._clock.now_ms()
        spec = to_spec(request, now)
        job = Job(tenant_id, new_job_id(), spec, JobState.ACTIVE, generation=1, version=1,
                  created_ms=now, updated_ms=now)
        self._jobs.put_new(job)
        first = spec.schedule.first_fire()
        if first is not None:
            # Crash between the job write and this one: the client saw an error and retries;
            # a job without a timer never fires, so the timer write is what the answer waits for.
            timer = Timer(first, TimerKind.FIRE, tenant_id, job.job_id, job.generation,
                          self._handoff.segment_of(job.job_id))
            self._handoff.place(timer, job)
        return job

    def get(self, tenant_id: str, job_id: str) -> Job:
        job = self._jobs.get(tenant_id, job_id, consistent=True)
        if job is None:
            raise NotFound(f"no job {job_id}")
        return job

    def executions(self, tenant_id: str, job_id: str, limit: int, cursor: str | None) -> Page:
        self.get(tenant_id, job_id)
        return self._executions.list_for_job(job_id, limit, cursor)

    def execution(self, tenant_id: str, execution_id: str) -> Execution:
        job_id = job_id_of(execution_id)
        # Another tenant's execution answers 404 exactly like a missing one.
        if job_id is None or self._jobs.get(tenant_id, job_id) is None:
            raise NotFound(f"no execution {execution_id}")
        execution = self._executions.get(job_id, execution_id)
        if execution is None or execution.tenant_id != tenant_id:
            raise NotFound(f"no execution {execution_id}")
        return execution
