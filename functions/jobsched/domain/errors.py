"""Typed domain errors. The API maps them to HTTP answers; nothing matches message text."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FieldProblem:
    field: str
    message: str


class DomainError(Exception):
    code = "ERROR"

    def __init__(self, message: str, details: list[FieldProblem] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []


class InvalidRequest(DomainError):
    """Malformed: wrong JSON, missing fields, wrong types (HTTP 400)."""

    code = "VALIDATION_ERROR"


class UnprocessableRequest(DomainError):
    """Well-formed but invalid: bad cron, unknown time zone, runAt too far back (HTTP 422)."""

    code = "UNPROCESSABLE"

    @classmethod
    def for_field(cls, field_name: str, message: str) -> "UnprocessableRequest":
        return cls(f"{field_name}: {message}", [FieldProblem(field_name, message)])


class NotFound(DomainError):
    code = "NOT_FOUND"


class Conflict(DomainError):
    code = "CONFLICT"


class ChangedConcurrently(Conflict):
    """A job's optimistic lock lost: another change was written between its read and this write.
    A client that did not ask for the lock (no If-Match) never sees it: the change is made again
    on a fresh read (service/jobs.py)."""


class WrongRegion(DomainError):
    """Regions: this region does not hold the segment the request would act on; the region that
    does must make the decision (DESIGN.md: no exactly-once decision rests on a replicated write).
    The API forwards such a change to the holder (handlers/api.py); what it cannot forward (no
    region holds the segment now, a lease that moved while forwarded, the holder unreachable)
    answers HTTP 503 with Retry-After: the lease settles within a minute and a lease."""

    code = "REGION_UNAVAILABLE"


class PayloadTooLarge(DomainError):
    code = "PAYLOAD_TOO_LARGE"


@dataclass
class ConditionLost(Exception):
    """A conditional write found the item in another state: someone else has it.

    A normal outcome to count, never a failure of the batch."""

    what: str = ""
    current: dict | None = field(default=None)


class Unavailable(DomainError):
    """A write the service could not make now (a throttle, an AWS error after its retries): HTTP
    503, nothing changed; the client repeats the request (with its idempotency key)."""

    code = "THROTTLED"


class Unauthorized(DomainError):
    code = "UNAUTHORIZED"


class QuotaExceeded(DomainError):
    """A tenant quota (active jobs, creates per second): HTTP 429."""

    code = "QUOTA_EXCEEDED"
