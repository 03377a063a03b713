"""The route table: the single list from which the API registers its handlers and from which
the OpenAPI document is generated, so the two cannot drift."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import BaseModel

from jobsched.api import schemas
from jobsched.api.answers import PREVIEW_TYPES
from jobsched.api.models import (
    BackfillRequest,
    BatchCreateRequest,
    BulkRequest,
    CalendarRequest,
    CompleteRequest,
    FailRequest,
    HeartbeatRequest,
    JobRequest,
    PauseRequest,
    RotateSigningSecretRequest,
    TAG_FILTER,
)
from jobsched.domain.calendars import CALENDAR_NAME
from jobsched.domain.jobs import CATCH_UP_PER_MINUTE_LIMIT, MAX_CATCH_UP_LIMIT, JobState
from jobsched.domain.stats import WINDOWS_MS


@dataclass(frozen=True)
class Param:
    name: str
    where: str  # "query" or "header"
    description: str
    type: str = "string"
    # What the handler enforces, for the document (JSON Schema: minimum, maximum, enum, pattern, ...).
    schema: tuple[tuple[str, object], ...] = ()
    required: bool = False


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    path: str  # OpenAPI form: /v1/jobs/{jobId}
    summary: str
    status: int
    response: type[BaseModel] | None
    request: type[BaseModel] | None = None
    params: tuple[Param, ...] = field(default_factory=tuple)
    auth: bool = True
    errors: tuple[int, ...] = (400, 401, 404)
    body_required: bool = True  # False: an absent body is read as {} (every field has a default)

    @property
    def resolver_path(self) -> str:
        """Powertools' form: /v1/jobs/<jobId>."""
        return self.path.replace("{", "<").replace("}", ">")


# Path parameters: a calendar's name is checked whole (400); an id that is no id of ours is a 404.
PATH_SCHEMAS: dict[str, dict] = {"name": {"type": "string", "pattern": f"^{CALENDAR_NAME.pattern}$"}}


def _bounds(low: int, high: int, **more) -> tuple[tuple[str, object], ...]:
    return (("minimum", low), ("maximum", high), *more.items())


INSTANT = (("format", "date-time"),)  # RFC 3339 (domain/schedule.parse_instant; 422 outside the span of time)
PAGING = (Param("limit", "query", "1..100, default 20", "integer", _bounds(1, 100, default=20)),
          Param("cursor", "query", "nextCursor of the previous page (empty: the first page)"))
CALLBACK = Param("X-Callback-Token", "header", "the token that came with the call (X-Callback-Token)")
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}", re.ASCII)  # printable ASCII, a UUID or a hash with a prefix
IDEMPOTENCY = Param("Idempotency-Key", "header", "a repeat with the same key and body returns the first answer",
                    schema=(("pattern", f"^{IDEMPOTENCY_KEY.pattern}$"),))

ROUTES: tuple[Route, ...] = (
    Route("create_job", "POST", "/v1/jobs", "Create a job", 201, schemas.Job, JobRequest, (IDEMPOTENCY,),
          errors=(400, 401, 409, 413, 422, 429)),
    Route("create_jobs", "POST", "/v1/jobs/batch", "Create 1 to 100 jobs: a result per job, in order", 200,
          schemas.BatchAnswer, BatchCreateRequest, (IDEMPOTENCY,), errors=(400, 401, 409, 413)),
    Route("list_jobs", "GET", "/v1/jobs", "List the tenant's jobs", 200, schemas.JobList,
          params=(Param("state", "query", "ACTIVE, PAUSED, COMPLETED or CANCELLED",
                        schema=(("enum", [state.value for state in JobState]),)),
                  Param("tag", "query", "key:value; repeatable, all must match", schema=(("pattern", TAG_FILTER),)),
                  Param("namePrefix", "query", "names that start with this", schema=(("minLength", 1),)), *PAGING)),
    Route("bulk_jobs", "POST", "/v1/jobs/bulk", "One action (PAUSE, RESUME, CANCEL) on every matching job", 200,
          schemas.BulkAnswer, BulkRequest, errors=(400, 401, 404, 409, 422)),
    Route("get_job", "GET", "/v1/jobs/{jobId}", "One job", 200, schemas.Job),
    Route("replace_job", "PUT", "/v1/jobs/{jobId}", "Replace schedule, target, payload and policies", 200,
          schemas.Job, JobRequest, (Param("If-Match", "header", "the version the change is based on", "integer"),),
          errors=(400, 401, 404, 409, 413, 422)),
    Route("cancel_job", "DELETE", "/v1/jobs/{jobId}", "Cancel: no future fires; history is kept", 200, schemas.Job),
    Route("pause_job", "POST", "/v1/jobs/{jobId}/pause", "Pause a recurring job (optional reason)", 200, schemas.Job,
          PauseRequest, errors=(400, 401, 404, 409), body_required=False),
    Route("backfill_job", "POST", "/v1/jobs/{jobId}/backfill",
          "Run the occurrences of [from, to) now, with the ids they had on time", 202, schemas.BackfillAnswer,
          BackfillRequest, errors=(400, 401, 404, 409, 422)),
    Route("resume_job", "POST", "/v1/jobs/{jobId}/resume", "Resume a paused job from now", 200, schemas.Job,
          errors=(401, 404, 409)),
    Route("trigger_job", "POST", "/v1/jobs/{jobId}/trigger", "Run now, outside the schedule", 202,
          schemas.Execution, params=(IDEMPOTENCY,), errors=(400, 401, 404, 409)),
    Route("list_executions", "GET", "/v1/jobs/{jobId}/executions", "Execution history, newest first", 200,
          schemas.ExecutionList, params=PAGING),
    Route("job_stats", "GET", "/v1/jobs/{jobId}/stats",
          "Outcomes and lateness of the executions scheduled in the last hour, day or week", 200, schemas.JobStats,
          params=(Param("window", "query", "1h, 24h (default) or 7d", schema=(("enum", list(WINDOWS_MS)),)),)),
    Route("job_occurrences", "GET", "/v1/jobs/{jobId}/occurrences",
          "Every occurrence of the schedule in [from, to) (at most 31 days), oldest first, and what became of it",
          200, schemas.OccurrenceList, params=(
              Param("from", "query", "RFC 3339 instant, default a day before to", schema=INSTANT),
              Param("to", "query", "RFC 3339 instant, default an hour from now", schema=INSTANT), *PAGING),
          errors=(400, 401, 404, 422)),
    Route("get_execution", "GET", "/v1/executions/{executionId}", "One execution with its attempts", 200,
          schemas.Execution),
    Route("cancel_execution", "POST", "/v1/executions/{executionId}/cancel", "Cancel a pending or running execution",
          202, schemas.Execution, errors=(401, 404, 409)),
    Route("heartbeat_execution", "POST", "/v1/executions/{executionId}/heartbeat",
          "Long-running target: report progress and extend the lease", 200, schemas.HeartbeatAnswer,
          HeartbeatRequest, (CALLBACK,), auth=False, errors=(400, 401, 404, 409, 413), body_required=False),
    Route("complete_execution", "POST", "/v1/executions/{executionId}/complete",
          "Long-running target: report success", 200, schemas.Execution, CompleteRequest, (CALLBACK,), auth=False,
          errors=(400, 401, 404, 409, 413), body_required=False),
    Route("fail_execution", "POST", "/v1/executions/{executionId}/fail",
          "Long-running target: report failure (retried per policy)", 200, schemas.Execution, FailRequest,
          (CALLBACK,), auth=False, errors=(400, 401, 404, 409), body_required=False),
    Route("list_dead_letters", "GET", "/v1/dead-letters", "Executions that exhausted their retries", 200,
          schemas.ExecutionList, params=PAGING),
    Route("redrive_execution", "POST", "/v1/executions/{executionId}/redrive", "Run a dead execution again",
          202, schemas.Execution, errors=(401, 404, 409)),
    Route("schedule_preview", "GET", "/v1/schedule-preview", "The next fire instants of a schedule", 200,
          schemas.Preview, params=(
              Param("type", "query", "CRON, RATE or ONE_TIME", schema=(("enum", list(PREVIEW_TYPES)),)),
              Param("schedule", "query", "the expression", schema=(("minLength", 1),), required=True),
              Param("timezone", "query", "IANA time zone, default UTC", schema=(("minLength", 1),)),
              Param("count", "query", "1..100, default 10", "integer", _bounds(1, 100, default=10)),
              Param("after", "query", "RFC 3339 instant, default now", schema=INSTANT),
              # Schedule bounds: only fire times in [startAt, endAt), at most maxRuns of them.
              Param("startAt", "query", "RFC 3339 instant: no fire time before it", schema=INSTANT),
              Param("endAt", "query", "RFC 3339 instant: no fire time at or after it", schema=INSTANT),
              Param("maxRuns", "query", "1..10000000: at most this many fire times", "integer", _bounds(1, 10_000_000)),
              # Catch-up that does not flood
              Param("maxCatchUp", "query", "1..10000: show a RUN_ALL catch-up of at most this many", "integer",
                    _bounds(1, MAX_CATCH_UP_LIMIT)),
              Param("catchUpPerMinute", "query", "1..600: the catch-up's release rate", "integer",
                    _bounds(1, CATCH_UP_PER_MINUTE_LIMIT)),
              # Exclusion calendars
              Param("excludeCalendars", "query", "calendar names, comma-separated or repeated: their dates are "
                                                 "skipped",
                    schema=(("pattern", f"^{CALENDAR_NAME.pattern}(,{CALENDAR_NAME.pattern})*$"),))),
          errors=(400, 401, 422)),
    # Exclusion calendars.
    Route("put_calendar", "PUT", "/v1/calendars/{name}", "Create or replace an exclusion calendar (at most 1,000 "
          "dates)", 200, schemas.Calendar, CalendarRequest, errors=(400, 401, 422)),
    Route("list_calendars", "GET", "/v1/calendars", "List the tenant's exclusion calendars", 200,
          schemas.CalendarList, params=PAGING),
    Route("get_calendar", "GET", "/v1/calendars/{name}", "One exclusion calendar", 200, schemas.Calendar),
    Route("delete_calendar", "DELETE", "/v1/calendars/{name}", "Delete an exclusion calendar no job uses", 200,
          schemas.Calendar, errors=(400, 401, 404, 409)),
    Route("rotate_signing_secret", "POST", "/v1/signing-secrets/rotate",
          "New signing secret (shown once); the previous one keeps signing for graceSec", 201,
          schemas.SigningSecret, RotateSigningSecretRequest, errors=(400, 401, 422), body_required=False),
    Route("openapi", "GET", "/v1/openapi.json", "This document", 200, None, auth=False, errors=()),
    Route("health", "GET", "/v1/health",
          "Liveness: the status alone; with a valid key also the region and the segments it holds; in a multi-region "
          "deployment 503 (status degraded) while this region holds no segment",
          200, schemas.Health, auth=False, errors=()),
)

# The web console's files (handlers/api.py): no key to load them; the console asks for one.
CONSOLE_PATHS = ("/console", "/console/{name}")


def public_routes() -> tuple[tuple[str, str], ...]:
    """(method, path) of every route that takes no tenant key: API Gateway serves them without the
    API's Lambda authorizer (infra: stack.py); every other path goes through it."""
    return tuple((r.method, r.path) for r in ROUTES if not r.auth) + tuple(("GET", p) for p in CONSOLE_PATHS)
