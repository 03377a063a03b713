"""The API's HTTP boundary, shared by its handler: the error envelope and the status of each
domain error, and the numbers, tags, states and keys a query string, header or path carries,
parsed into values (a 400 naming the field otherwise)."""
from __future__ import annotations

import re

from aws_lambda_powertools.event_handler import Response, content_types

from jobsched.api.routes import IDEMPOTENCY_KEY
from jobsched.domain.jobs import JobState
from jobsched.domain.errors import (
    Unavailable,
    WrongRegion,
    Conflict,
    DomainError,
    FieldProblem,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    QuotaExceeded,
    Unauthorized,
    UnprocessableRequest,
)


# Lambda answers API Gateway with at most 6 MB, in which the body is a JSON string (each quote or
# backslash escaped again): a page's items stay under 2.5 MB of ASCII JSON, so any page fits.
MAX_PAGE_BYTES = 2_500_000

HTTP_STATUS = {
    InvalidRequest: 400,
    Unauthorized: 401,
    Unavailable: 503,
    NotFound: 404,
    Conflict: 409,
    WrongRegion: 503,  # retried: the change is forwarded to its region once a region holds it
    PayloadTooLarge: 413,
    UnprocessableRequest: 422,
    QuotaExceeded: 429,
}


def http_status(exc: DomainError) -> int:
    return next((s for cls, s in HTTP_STATUS.items() if isinstance(exc, cls)), 400)


def error_body(code: str, message: str, details: list[FieldProblem] | None = None) -> dict:
    return {"code": code, "message": message, "details": [{"field": d.field, "message": d.message}
                                                           for d in details or []]}


def error_response(status: int, code: str, message: str, details: list[FieldProblem] | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    body = {"error": error_body(code, message, details)}
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)


# Every number a query string or header carries: ASCII digits only (str.isdigit() also takes
# "²" and "٣", which int() then refuses), at most 18 of them.
_ASCII_INT = re.compile(r"-?[0-9]{1,18}", re.ASCII)
# A path parameter (job or execution id) longer than this is no id of ours (DynamoDB refuses a key
# past 1,024 bytes, which would otherwise become a 500).
MAX_ID_BYTES = 256
MAX_QUERY_CHARS = 256
INTERNAL_MESSAGE = "the request failed inside the scheduler; it was logged"


def _limit(value: str | None) -> int:
    if value is None:
        return 20
    if not _ASCII_INT.fullmatch(value) or not 1 <= int(value) <= 100:
        raise InvalidRequest("limit: must be an integer from 1 to 100", [FieldProblem("limit", "1..100")])
    return int(value)


def _int_param(value: str | None, name: str, default: int | None) -> int | None:
    if value is None or value == "":
        return default
    text = value.strip().strip('"')
    if not _ASCII_INT.fullmatch(text):
        raise InvalidRequest(f"{name}: must be an integer in ASCII digits", [FieldProblem(name, "not an integer")])
    return int(text)


def _bounded_int_param(value: str | None, name: str, low: int, high: int) -> int | None:
    """An optional integer query parameter in [low, high]: 400 naming it otherwise."""
    number = _int_param(value, name, None)
    if number is not None and not low <= number <= high:
        raise InvalidRequest(f"{name}: must be from {low} to {high}", [FieldProblem(name, f"{low}..{high}")])
    return number


def _idempotency_key(value: str | None) -> str | None:
    if value is None:
        return None
    if not IDEMPOTENCY_KEY.fullmatch(value):
        raise InvalidRequest("Idempotency-Key: 1 to 255 printable ASCII characters",
                             [FieldProblem("Idempotency-Key", "1 to 255 printable ASCII characters")])
    return value


def _tag(text: str, field: str = "tag") -> tuple[str, str]:
    """'key:value' → (key, value); the value may hold ':' itself."""
    key, separator, value = text.partition(":")
    if not separator or not key:
        raise InvalidRequest(f"{field}: key:value", [FieldProblem(field, "key:value")])
    return key, value


def _state(value: str | None) -> JobState | None:
    if not value:
        return None
    try:
        return JobState(value)
    except ValueError:
        names = ", ".join(s.value for s in JobState)
        raise InvalidRequest(f"state: one of {names}", [FieldProblem("state", f"one of {names}")]) from None
