"""Request models of the public API (shared/API.md). Parsed strictly: a wrong type is an
error naming the field, never a silent coercion."""
from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from jobsched.domain.errors import FieldProblem, InvalidRequest

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_TIMEOUT_SEC = 840  # one attempt runs inside one worker invocation (15 min, less room to record)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class HttpTarget(_Model):
    type: Literal["HTTP"]
    url: str = Field(max_length=2048)
    method: Literal["POST", "PUT", "PATCH", "GET", "DELETE"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parsed = urlparse(value)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        return value


class SqsTarget(_Model):
    type: Literal["SQS"]
    queueUrl: str


class SnsTarget(_Model):
    type: Literal["SNS"]
    topicArn: str


class EventBridgeTarget(_Model):
    type: Literal["EVENTBRIDGE"]
    eventBusName: str
    source: str
    detailType: str


class LambdaTarget(_Model):
    type: Literal["LAMBDA"]
    functionArn: str


TargetModel = Annotated[
    Union[HttpTarget, SqsTarget, SnsTarget, EventBridgeTarget, LambdaTarget], Field(discriminator="type")
]


class RetryPolicyModel(_Model):
    maxAttempts: int = Field(3, ge=1, le=20)
    backoff: Literal["EXPONENTIAL", "FIXED"] = "EXPONENTIAL"
    initialDelayMs: int = Field(1000, ge=0, le=86_400_000)
    maxDelayMs: int = Field(3_600_000, ge=0, le=7 * 86_400_000)


class JobRequest(_Model):
    name: str = Field(min_length=1, max_length=128)
    type: Literal["ONE_TIME", "DELAYED", "CRON", "RATE"]
    schedule: str | None = Field(None, max_length=256)
    timezone: str = Field("UTC", max_length=64)
    runAt: str | None = Field(None, max_length=64)
    delaySeconds: int | None = Field(None, ge=0, le=366 * 86_400)
    startAt: str | None = Field(None, max_length=64)
    endAt: str | None = Field(None, max_length=64)
    target: TargetModel
    payload: Any = None
    retryPolicy: RetryPolicyModel = Field(default_factory=RetryPolicyModel)
    timeoutSec: int = Field(300, ge=1, le=MAX_TIMEOUT_SEC)
    priority: Literal["HIGH", "NORMAL", "LOW"] = "NORMAL"
    overlapPolicy: Literal["ALLOW", "SKIP"] = "ALLOW"
    misfirePolicy: Literal["RUN_ONCE", "RUN_ALL", "SKIP"] = "RUN_ONCE"
    jitterSec: int = Field(0, ge=0, le=3600)
    heartbeatTimeoutSec: int = Field(300, ge=10, le=86_400)


class HeartbeatRequest(_Model):
    progress: Any = None


class CompleteRequest(_Model):
    output: Any = None


class FailRequest(_Model):
    error: str = Field("failed", max_length=2000)


def parse_body(model: type[_Model], body: str | None) -> Any:
    """JSON text → model, or InvalidRequest naming each bad field (never a 500)."""
    if body is None or not body.strip():
        raise InvalidRequest("the request needs a JSON body", [FieldProblem("body", "missing")])
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise InvalidRequest(f"malformed JSON: {exc}", [FieldProblem("body", "not valid JSON")]) from None
    if not isinstance(data, dict):
        raise InvalidRequest("the body must be a JSON object", [FieldProblem("body", "not an object")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = [FieldProblem(_field_path(e["loc"]), e["msg"]) for e in exc.errors()]
        summary = "; ".join(f"{d.field}: {d.message}" for d in details[:5])
        raise InvalidRequest(f"invalid request: {summary}", details) from None


def _field_path(loc: tuple) -> str:
    # Drop discriminator tags that pydantic inserts ("target.HTTP.url" → "target.url").
    parts = [str(p) for p in loc if not (isinstance(p, str) and p.isupper())]
    return ".".join(parts) or "body"
