"""The API's routes (api/routes.py) as methods, grouped by what they act on. Requests are the
API's own request models (api/models.py) or plain dicts of the same JSON; answers are the API's
response models (api/schemas.py, read leniently: client/answers.py)."""
from __future__ import annotations

import uuid
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from jobsched.api import schemas
from jobsched.api.models import (BackfillRequest, BulkRequest, CalendarRequest, CompleteRequest,
                                 FailRequest, HeartbeatRequest, JobRequest, PauseRequest, RotateSigningSecretRequest)
from jobsched.client.answers import dump, parse
from jobsched.client.session import Session
from jobsched.domain.executions import ExecutionStatus
from jobsched.domain.steps import STEP_ENDED

T = TypeVar("T", bound=BaseModel)
P = TypeVar("P", bound=BaseModel)
Body = BaseModel | Mapping[str, Any]


# An execution in one of these will not change again (a redrive makes it run anew).
ENDED = frozenset(status.value for status in STEP_ENDED | {ExecutionStatus.SKIPPED})


class WaitTimeout(TimeoutError):
    """An execution had not ended when the wait's time was up; `execution` is the last read."""

    def __init__(self, execution: schemas.Execution, timeout: float) -> None:
        super().__init__(f"{execution.executionId} is still {execution.status} after {timeout:g} s")
        self.execution = execution


def body_of(request: Body | None, model: type[BaseModel]) -> Any:
    """A request's JSON: a model as the API reads it (its aliases, only the fields set, so that
    the API's defaults apply), a dict as given (the API checks it and names any bad field).
    `model` is the API's model for the route: what a caller should build."""
    if request is None:
        return None
    if isinstance(request, BaseModel):
        if not isinstance(request, model):
            raise TypeError(f"expected a {model.__name__} or a dict, got a {type(request).__name__}")
        return request.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return dict(request)


# A job's fields that a create or a PUT takes (the API's JobRequest); the rest of an answer is state.
JOB_REQUEST_FIELDS = tuple(info.alias or name for name, info in JobRequest.model_fields.items())


def request_of(job: schemas.Job | Mapping[str, Any]) -> dict[str, Any]:
    """A job as the API answers it, back into the request that would make it as it is now: every
    field JobRequest takes that the job has (a PUT replaces them all, so none may be left out)."""
    data = dump(job) if isinstance(job, BaseModel) else dict(job)
    body = {k: data[k] for k in JOB_REQUEST_FIELDS if data.get(k) is not None}
    if body.get("type") == "DELAYED":
        body.pop("runAt", None)  # computed from delaySeconds at creation
    if body.get("type") == "ONE_TIME" and body.get("schedule"):
        body.pop("runAt", None)  # an at(...) schedule carries the instant
    return body


def new_idempotency_key() -> str:
    return f"jobsched-py-{uuid.uuid4().hex}"


def _id(value: str) -> str:
    return quote(value, safe="")


class Pager(Generic[T, P]):
    """A list route's pages, fetched as they are read, following `nextCursor` (boto3's
    paginator, Stripe's auto-paging): iterate it for the items of every page, or `pages()` for
    the pages themselves (each the API's list model: `items`, `nextCursor`)."""

    def __init__(self, fetch: Callable[[str | None], P], cursor: str | None = None) -> None:
        self._fetch = fetch
        self._cursor = cursor

    def pages(self) -> Iterator[P]:
        cursor = self._cursor
        while True:
            page = self._fetch(cursor)
            yield page
            cursor = page.nextCursor  # type: ignore[attr-defined]
            if not cursor:
                return

    def __iter__(self) -> Iterator[T]:
        for page in self.pages():
            yield from page.items  # type: ignore[attr-defined]

    def first_page(self) -> P:
        return next(self.pages())


class _Resource:
    def __init__(self, session: Session) -> None:
        self._session = session

    def _call(self, answer: type[T], method: str, path: str, body: Any = None, query: Mapping[str, Any] | None = None,
              headers: Mapping[str, str] | None = None) -> T:
        return parse(answer, self._session.request(method, path, body, query, headers))

    def _pager(self, page: type[P], path: str, query: Mapping[str, Any], limit: int | None,
               cursor: str | None) -> Pager[Any, P]:
        return Pager(lambda at: self._call(page, "GET", path, query={**query, "limit": limit, "cursor": at}), cursor)


class Jobs(_Resource):
    """/v1/jobs: create (one or a batch), read, list, replace, pause, resume, cancel, trigger,
    backfill, bulk actions, stats and occurrences."""

    def create(self, job: JobRequest | Mapping[str, Any], *, idempotency_key: str | None = None) -> schemas.Job:
        """POST /v1/jobs. The Idempotency-Key is made here unless given: every retry of this call
        sends the same one, so a create whose answer was lost creates one job, not two."""
        return self._call(schemas.Job, "POST", "/v1/jobs", body_of(job, JobRequest),
                          headers={"Idempotency-Key": idempotency_key or new_idempotency_key()})

    def create_batch(self, jobs: Iterable[JobRequest | Mapping[str, Any]], *,
                     idempotency_key: str | None = None) -> schemas.BatchAnswer:
        """POST /v1/jobs/batch: 1 to 100 jobs, a result per job in order (a job's own
        `idempotencyKey` may be set in its dict)."""
        body = {"jobs": [body_of(job, JobRequest) for job in jobs]}
        return self._call(schemas.BatchAnswer, "POST", "/v1/jobs/batch", body,
                          headers={"Idempotency-Key": idempotency_key or new_idempotency_key()})

    def get(self, job_id: str) -> schemas.Job:
        return self._call(schemas.Job, "GET", f"/v1/jobs/{_id(job_id)}")

    def list(self, *, state: str | None = None, tag: str | list[str] | None = None, name_prefix: str | None = None,
             limit: int | None = None, cursor: str | None = None) -> Pager[schemas.Job, schemas.JobList]:
        """Every job of the tenant that matches (tag "key:value", repeatable: all must match)."""
        tags = [tag] if isinstance(tag, str) else tag
        return self._pager(schemas.JobList, "/v1/jobs", {"state": state, "tag": tags, "namePrefix": name_prefix},
                           limit, cursor)

    def replace(self, job_id: str, job: JobRequest | Mapping[str, Any], *, if_match: int | None = None) -> schemas.Job:
        """PUT /v1/jobs/{jobId}: the job's mutable fields replaced; with `if_match` (the version
        read), a change made meanwhile answers 409 (ConflictError) instead of being lost."""
        headers = {"If-Match": str(if_match)} if if_match is not None else None
        return self._call(schemas.Job, "PUT", f"/v1/jobs/{_id(job_id)}", body_of(job, JobRequest), headers=headers)

    def update(self, job_id: str, changes: Mapping[str, Any], *, if_match: int | None = None) -> schemas.Job:
        """Read the job, change the given fields, write it back under If-Match (the version read,
        or `if_match`): the fields not given keep their value, and a change made meanwhile by
        someone else answers 409 (ConflictError) instead of being lost."""
        current = self.get(job_id)
        return self.replace(job_id, {**request_of(current), **changes},
                            if_match=current.version if if_match is None else if_match)

    def delete(self, job_id: str) -> schemas.Job:
        """DELETE /v1/jobs/{jobId}: cancel, no future fires; the history is kept."""
        return self._call(schemas.Job, "DELETE", f"/v1/jobs/{_id(job_id)}")

    def pause(self, job_id: str, reason: str | None = None) -> schemas.Job:
        body = body_of(PauseRequest(reason=reason), PauseRequest) if reason is not None else None
        return self._call(schemas.Job, "POST", f"/v1/jobs/{_id(job_id)}/pause", body)

    def resume(self, job_id: str) -> schemas.Job:
        return self._call(schemas.Job, "POST", f"/v1/jobs/{_id(job_id)}/resume")

    def trigger(self, job_id: str, *, idempotency_key: str | None = None) -> schemas.Execution:
        """Run now, outside the schedule (an Idempotency-Key made here unless given, as create)."""
        return self._call(schemas.Execution, "POST", f"/v1/jobs/{_id(job_id)}/trigger",
                          headers={"Idempotency-Key": idempotency_key or new_idempotency_key()})

    def backfill(self, job_id: str, from_: str, to: str) -> schemas.BackfillAnswer:
        """Every occurrence of the schedule in [from_, to) now, with the ids they had on time."""
        body = body_of(BackfillRequest.model_validate({"from": from_, "to": to}), BackfillRequest)
        return self._call(schemas.BackfillAnswer, "POST", f"/v1/jobs/{_id(job_id)}/backfill", body)

    def bulk(self, request: BulkRequest | Mapping[str, Any], *, until_done: bool = True) -> schemas.BulkAnswer:
        """POST /v1/jobs/bulk: PAUSE, RESUME or CANCEL every matching job. The API changes a page
        of matches per request; the request is repeated with the answer's `bulkId` until `done`
        (each repeat does the next page, never one again) and the last answer, the totals, is
        returned. `until_done=False`: the first page's answer only."""
        body = body_of(request, BulkRequest)
        answer = self._call(schemas.BulkAnswer, "POST", "/v1/jobs/bulk", body)
        while until_done and not answer.done and answer.bulkId:
            answer = self._call(schemas.BulkAnswer, "POST", "/v1/jobs/bulk", {**body, "bulkId": answer.bulkId})
        return answer

    def stats(self, job_id: str, window: str | None = None) -> schemas.JobStats:
        return self._call(schemas.JobStats, "GET", f"/v1/jobs/{_id(job_id)}/stats", query={"window": window})

    def occurrences(self, job_id: str, *, from_: str | None = None, to: str | None = None, limit: int | None = None,
                    cursor: str | None = None) -> Pager[schemas.Occurrence, schemas.OccurrenceList]:
        return self._pager(schemas.OccurrenceList, f"/v1/jobs/{_id(job_id)}/occurrences", {"from": from_, "to": to},
                           limit, cursor)


class Executions(_Resource):
    """/v1/executions: read one, a job's history (newest first), cancel, redrive."""

    def get(self, execution_id: str) -> schemas.Execution:
        return self._call(schemas.Execution, "GET", f"/v1/executions/{_id(execution_id)}")

    def list(self, job_id: str, *, limit: int | None = None,
             cursor: str | None = None) -> Pager[schemas.Execution, schemas.ExecutionList]:
        return self._pager(schemas.ExecutionList, f"/v1/jobs/{_id(job_id)}/executions", {}, limit, cursor)

    def cancel(self, execution_id: str) -> schemas.Execution:
        return self._call(schemas.Execution, "POST", f"/v1/executions/{_id(execution_id)}/cancel")

    def wait(self, execution_id: str, *, timeout: float = 60.0, interval: float = 1.0) -> schemas.Execution:
        """Read the execution every `interval` seconds until it has ended (SUCCEEDED, DEAD,
        CANCELLED, SKIPPED; a step also UPSTREAM_FAILED), as boto3's waiters do; WaitTimeout
        after `timeout` seconds. It sleeps with the session's Retries.sleep (a test's fake)."""
        retries = self._session.retries
        deadline = retries.now() + timeout
        while True:
            execution = self.get(execution_id)
            if execution.status in ENDED:
                return execution
            if retries.now() >= deadline:
                raise WaitTimeout(execution, timeout)
            retries.sleep(interval)

    def redrive(self, execution_id: str) -> schemas.Execution:
        """Run a DEAD execution (or a run's DEAD and UPSTREAM_FAILED steps) again."""
        return self._call(schemas.Execution, "POST", f"/v1/executions/{_id(execution_id)}/redrive")


class DeadLetters(_Resource):
    """/v1/dead-letters: executions that exhausted their retries, and their redrive."""

    def list(self, *, limit: int | None = None,
             cursor: str | None = None) -> Pager[schemas.Execution, schemas.ExecutionList]:
        return self._pager(schemas.ExecutionList, "/v1/dead-letters", {}, limit, cursor)

    def redrive(self, execution_id: str) -> schemas.Execution:
        return Executions(self._session).redrive(execution_id)


class Calendars(_Resource):
    """/v1/calendars: exclusion calendars (dates on which a job's occurrences are skipped)."""

    def put(self, name: str, dates: list[str] | None = None, description: str = "", *,
            request: CalendarRequest | Mapping[str, Any] | None = None) -> schemas.Calendar:
        """Create or replace: `dates` ("2026-12-25", ...) and a description, or a whole request."""
        body = body_of(request, CalendarRequest) if request is not None else {"description": description,
                                                                              "dates": list(dates or [])}
        return self._call(schemas.Calendar, "PUT", f"/v1/calendars/{_id(name)}", body)

    def get(self, name: str) -> schemas.Calendar:
        return self._call(schemas.Calendar, "GET", f"/v1/calendars/{_id(name)}")

    def list(self, *, limit: int | None = None,
             cursor: str | None = None) -> Pager[schemas.Calendar, schemas.CalendarList]:
        return self._pager(schemas.CalendarList, "/v1/calendars", {}, limit, cursor)

    def delete(self, name: str) -> schemas.Calendar:
        """409 (ConflictError) while a job uses it."""
        return self._call(schemas.Calendar, "DELETE", f"/v1/calendars/{_id(name)}")


class Signing(_Resource):
    """/v1/signing-secrets: the tenant's signing secret for the calls its HTTP targets receive."""

    def rotate(self, grace_sec: int | None = None) -> schemas.SigningSecret:
        """A new secret, shown this once; the previous one keeps signing for `grace_sec`."""
        body = body_of(RotateSigningSecretRequest(graceSec=grace_sec), RotateSigningSecretRequest) \
            if grace_sec is not None else None
        return self._call(schemas.SigningSecret, "POST", "/v1/signing-secrets/rotate", body)


class Callbacks(_Resource):
    """What a long-running target calls, with the X-Callback-Token its call carried (no API key
    needed): heartbeat while it works, then complete or fail."""

    def heartbeat(self, execution_id: str, token: str, progress: Any = None, *,
                  ok: bool = False) -> schemas.HeartbeatAnswer:
        """Extends the attempt's lease; `ok` reports success as far as the job's `expect` goes.
        The answer's `cancelRequested` says the execution was cancelled: stop."""
        body = body_of(HeartbeatRequest(progress=progress, ok=ok), HeartbeatRequest)
        return self._call(schemas.HeartbeatAnswer, "POST", f"/v1/executions/{_id(execution_id)}/heartbeat", body,
                          headers={"X-Callback-Token": token})

    def complete(self, execution_id: str, token: str, output: Any = None) -> schemas.Execution:
        body = body_of(CompleteRequest(output=output), CompleteRequest)
        return self._call(schemas.Execution, "POST", f"/v1/executions/{_id(execution_id)}/complete", body,
                          headers={"X-Callback-Token": token})

    def fail(self, execution_id: str, token: str, error: str = "failed") -> schemas.Execution:
        """The attempt failed: retried as the job's retry policy says."""
        body = body_of(FailRequest(error=error), FailRequest)
        return self._call(schemas.Execution, "POST", f"/v1/executions/{_id(execution_id)}/fail", body,
                          headers={"X-Callback-Token": token})


__all__ = ["JOB_REQUEST_FIELDS", "request_of", "Callbacks", "Calendars", "DeadLetters", "Executions", "Jobs", "Pager", "Signing",
           "body_of", "new_idempotency_key"]
