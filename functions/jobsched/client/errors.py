"""The API's error envelope as exceptions (API.md, "Conventions"):
`{"error": {"code", "message", "details": [{"field", "message"}]}}`, one class per kind of
answer so that a caller catches what it can act on (`except NotFoundError`), each carrying the
status, the code, the message, the field details and the answer's headers."""
from __future__ import annotations

from typing import Any, Mapping

from jobsched.api import schemas
from jobsched.client.answers import lenient

ErrorDetail = lenient(schemas.ErrorDetail)


class ApiError(Exception):
    """An answer other than 2xx, or no answer (`status` 0, code UNREACHABLE)."""

    def __init__(self, status: int, code: str, message: str, details: list | tuple = (),
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details: list[schemas.ErrorDetail] = [
            d if isinstance(d, schemas.ErrorDetail) else ErrorDetail.model_validate(d) for d in details
            if isinstance(d, (dict, schemas.ErrorDetail))]
        self.headers = dict(headers or {})

    @property
    def fields(self) -> dict[str, str]:
        """Each field the API named, with its message (several for one field: joined by "; ")."""
        named: dict[str, str] = {}
        for detail in self.details:
            named[detail.field] = f"{named[detail.field]}; {detail.message}" if detail.field in named else detail.message
        return named

    @property
    def envelope(self) -> dict[str, Any]:
        """The error as the API sent it."""
        return {"error": {"code": self.code, "message": self.message,
                          "details": [d.model_dump(mode="json") for d in self.details]}}

    def __str__(self) -> str:
        detail = "; ".join(f"{d.field}: {d.message}" for d in self.details)
        text = f"{self.message}" + (f" ({detail})" if detail and detail not in self.message else "")
        if not self.status:
            return text
        return f"{self.status} {self.code}: {text}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status}, {self.code!r}, {self.message!r}, fields={self.fields!r})"


class InvalidRequestError(ApiError):
    """400 (malformed), 413 (too large), 422 (well-formed but invalid): `fields` names what."""


class AuthenticationError(ApiError):
    """401 or 403: no key, a bad key, or a callback token that no running attempt holds."""


class NotFoundError(ApiError):
    """404: no such job, execution or calendar for this tenant."""


class ConflictError(ApiError):
    """409: a state conflict, a version that changed (If-Match), or an idempotency key reused
    with another body."""


class RateLimitError(ApiError):
    """429: a tenant quota (raised once the retries that honour Retry-After are used up)."""


class ServiceUnavailableError(ApiError):
    """503, another 5xx, or no answer at all (status 0)."""


_BY_STATUS = {400: InvalidRequestError, 413: InvalidRequestError, 422: InvalidRequestError,
              401: AuthenticationError, 403: AuthenticationError, 404: NotFoundError, 409: ConflictError,
              429: RateLimitError}


def error_for(status: int, body: Any, headers: Mapping[str, str] | None = None, text: str = "") -> ApiError:
    """The exception for an answer: its envelope when it holds one, else its text."""
    kind = _BY_STATUS.get(status, ServiceUnavailableError if status == 0 or status >= 500 else ApiError)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        details = error.get("details") if isinstance(error.get("details"), list) else []
        return kind(status, error["code"], str(error.get("message", "")), details, headers)
    if isinstance(body, dict) and isinstance(body.get("message"), str):  # API Gateway's own {"message"}
        return kind(status, "HTTP_ERROR", body["message"], (), headers)
    return kind(status, "HTTP_ERROR", text[:300] or f"HTTP {status}", (), headers)
