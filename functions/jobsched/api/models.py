"""Request models of the public API (shared/API.md). Parsed strictly: a wrong type is an
error naming the field, never a silent coercion."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jobsched.domain import container_tasks as tasks
from jobsched.domain.calendars import CALENDAR_NAME, MAX_CALENDAR_DATES, MAX_CALENDARS_PER_JOB, MAX_DESCRIPTION_CHARS
from jobsched.domain.endpoints import TargetUrl
from jobsched.domain.errors import FieldProblem, InvalidRequest, PayloadTooLarge
from jobsched.domain.flow import MAX_CONCURRENCY, MAX_RATE_PER_SECOND
from jobsched.domain.jobs import EXPECT_MAX_SEC, EXPECT_MIN_SEC
from jobsched.domain.steps import MAX_STEPS
from jobsched.domain.json_text import NotText, loads_strict, size_bytes

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_TIMEOUT_SEC = 840  # one attempt runs inside one worker invocation (15 min, less room to record)
# A container task (ECS_TASK) runs outside the worker: its timeout may reach a day. The models take
# up to that; api/mapping.py holds every other target type to MAX_TIMEOUT_SEC (422 naming the field).
MAX_TASK_TIMEOUT_SEC = tasks.MAX_TIMEOUT_SEC
# What a long-running target may report (complete's output, heartbeat's progress): stored on the
# execution item, which DynamoDB caps at 400 KB, and returned in lists of up to 100 executions.
MAX_REPORT_BYTES = 64 * 1024
# Target headers: few, small, and never one that the call itself must control.
MAX_HEADERS = 32
MAX_TAGS = 20
MAX_HEADER_VALUE_CHARS = 4096
MAX_HEADERS_TOTAL_BYTES = 8192
RESERVED_HEADERS = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade",
    "proxy-authorization", "proxy-connection", "content-type", "user-agent", "expect",
    "x-execution-id", "x-attempt", "x-job-id", "x-callback-token", "x-progress", "x-run-id", "x-step",
    "webhook-id", "webhook-timestamp", "webhook-signature",  # signed calls: a job must not forge them
    "traceparent",  # the execution's trace context (domain/trace.py); a job may set its tracestate
})
# X-Amz-*: a call must not carry AWS request headers (a signature, a security token, a target
# operation) that an AWS endpoint, or the local stack's emulator, would act on.
RESERVED_HEADER_PREFIXES = ("x-jobsched-", "x-amz-")
# Patterns are matched with fullmatch: `$` also matches before a final newline ("X-Tenant\n").
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")  # an RFC 9110 token
# Keys a job stores and is found by (tag keys, flow-control keys): printable text only, so that
# a key can be written in a filter, a header or a log line and read back as it was given.
_TAG_KEY = re.compile(r"[^\x00-\x1f\x7f-\x9f:]{1,64}")
_FLOW_KEY = re.compile(r"[^\x00-\x1f\x7f-\x9f]{1,128}")


# Bidirectional formatting characters: text holding one is shown in another order than it is
# read (a name that looks like another in a list, a log line or a terminal).
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# For the document (JSON Schema patterns; printable_name and the validators below enforce them).
_PRINTABLE = "[^\\x00-\\x1f\\x7f-\\x9f]"
TAG_FILTER = "^[^:]+:"  # "key:value" (handlers/api.py _tag)
_NOT_IN_NAMES = "\\x00-\\x1f\\x7f-\\x9f" + "".join(f"\\u{ord(c):04x}" for c in sorted(BIDI_CONTROLS))
PRINTABLE_NAME = f"^[^{_NOT_IN_NAMES}]*$"  # printable_name
NAME_PATTERN = f"^(?=.*\\S)[^{_NOT_IN_NAMES}]+$"  # a job's name: printable_name, not only spaces


@lru_cache(maxsize=None)
def _int_fields(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(info.alias or name for name, info in model.model_fields.items()
                     if info.annotation in (int, int | None))


def printable_name(value: str) -> str:
    """A name is shown in lists, logs and terminals: no NUL or other control character, and no
    bidirectional formatting character."""
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
        raise ValueError("must not hold NUL or other control characters")
    if any(c in BIDI_CONTROLS for c in value):
        raise ValueError("must not hold bidirectional formatting characters (U+202A-U+202E, U+2066-U+2069, ...)")
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        """JSON has one kind of number: 26003.0 is the integer 26003 (so says JSON Schema's
        "integer", which the document gives). Strict parsing refuses it for an int field; it is
        read as that int here, and only there (a payload keeps its numbers as given)."""
        if not isinstance(data, dict):
            return data
        ints = _int_fields(cls)
        return {key: int(value) if key in ints and isinstance(value, float) and value.is_integer() else value
                for key, value in data.items()}


class HttpTarget(_Model):
    type: Literal["HTTP"]
    url: str = Field(max_length=2048)
    method: Literal["POST", "PUT", "PATCH", "GET", "DELETE"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict, json_schema_extra={
        "maxProperties": MAX_HEADERS, "propertyNames": {"pattern": f"^{_HEADER_NAME.pattern}$"},
        "additionalProperties": {"type": "string", "maxLength": MAX_HEADER_VALUE_CHARS, "pattern": "^[\\t\\x20-\\x7e\\x80-\\xff]*$"}})

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        TargetUrl.parse(value)  # the call's own reading of it (domain/endpoints.py): ValueError if none
        return value

    @field_validator("headers")
    @classmethod
    def _headers_the_call_allows(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_HEADERS:
            raise ValueError(f"at most {MAX_HEADERS} headers")
        total = 0
        for name, text in value.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name[:64]!r} is not a valid header name")
            lowered = name.lower()
            if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_HEADER_PREFIXES):
                raise ValueError(f"{name} is set by the scheduler itself and cannot be given")
            if len(text) > MAX_HEADER_VALUE_CHARS or any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in text):
                raise ValueError(f"{name}: a value of at most {MAX_HEADER_VALUE_CHARS} characters without "
                                 "control characters")
            try:
                total += len(name) + len(text.encode("latin-1"))
            except UnicodeEncodeError:
                raise ValueError(f"{name}: header values must be Latin-1 text") from None
        if total > MAX_HEADERS_TOTAL_BYTES:
            raise ValueError(f"at most {MAX_HEADERS_TOTAL_BYTES} bytes of headers in all")
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


class EcsTaskTarget(_Model):
    """A container task on Fargate (shared/API.md, "Container tasks"); each field is checked whole
    (fullmatch), and the overrides it makes against ECS's size limit in api/mapping.py."""
    type: Literal["ECS_TASK"]
    cluster: str
    taskDefinition: str
    launchType: Literal["FARGATE"] = "FARGATE"
    subnets: list[str] = Field(min_length=1, max_length=16)
    securityGroups: list[str] = Field(default_factory=list, max_length=5)
    assignPublicIp: bool = False
    container: str
    command: list[str] = Field(default_factory=list, max_length=tasks.MAX_COMMAND_ITEMS)
    environment: dict[str, str] = Field(default_factory=dict)
    # The payload rides in RunTask's container overrides (JOBSCHED_PAYLOAD), which CloudTrail records
    # and ECS's task events and DescribeTasks show to whoever may read them. True: never there; the
    # task gets JOBSCHED_PAYLOAD_REF (/v1/jobs/{jobId}) and reads the job's payload with an API key.
    payloadByReference: bool = Field(False, description=(
        "true: the payload is never put in RunTask's container overrides (recorded by CloudTrail, shown in "
        "ECS task events and DescribeTasks); the task gets JOBSCHED_PAYLOAD_REF (/v1/jobs/{jobId}) and reads "
        "the job's `payload` there with the tenant's API key (give the task the key through its task "
        "definition's `secrets`). false (default): inline in JOBSCHED_PAYLOAD when it fits RunTask's 8,192 "
        "characters of overrides, else by reference"))

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        if not (tasks.CLUSTER_ARN.fullmatch(value) or tasks.CLUSTER_NAME.fullmatch(value)):
            raise ValueError("a cluster name (letters, digits, - and _) or a cluster ARN "
                             "arn:aws:ecs:<region>:<account>:cluster/<name>")
        return value

    @field_validator("taskDefinition")
    @classmethod
    def _task_definition(cls, value: str) -> str:
        if not tasks.TASK_DEFINITION_ARN.fullmatch(value):
            raise ValueError("a task definition ARN with its revision: "
                             "arn:aws:ecs:<region>:<account>:task-definition/<family>:<revision>")
        return value

    @field_validator("subnets")
    @classmethod
    def _subnets(cls, value: list[str]) -> list[str]:
        for subnet in value:
            if not tasks.SUBNET.fullmatch(subnet):
                raise ValueError(f"{subnet[:40]!r} is not a subnet id (subnet-<hex>)")
        return value

    @field_validator("securityGroups")
    @classmethod
    def _security_groups(cls, value: list[str]) -> list[str]:
        for group in value:
            if not tasks.SECURITY_GROUP.fullmatch(group):
                raise ValueError(f"{group[:40]!r} is not a security group id (sg-<hex>)")
        return value

    @field_validator("container")
    @classmethod
    def _container(cls, value: str) -> str:
        if not tasks.CONTAINER_NAME.fullmatch(value):
            raise ValueError("a container name of the task definition: 1 to 255 letters, digits, - and _")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        for item in value:
            if not item or len(item) > tasks.MAX_COMMAND_ITEM_CHARS or "\x00" in item:
                raise ValueError(f"each item: 1 to {tasks.MAX_COMMAND_ITEM_CHARS} characters, no NUL")
        return value

    @field_validator("environment")
    @classmethod
    def _environment(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > tasks.MAX_ENVIRONMENT:
            raise ValueError(f"at most {tasks.MAX_ENVIRONMENT} variables")
        for name, text in value.items():
            if not tasks.ENV_NAME.fullmatch(name):
                raise ValueError(f"{name[:64]!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
            if name.upper().startswith(tasks.RESERVED_ENV_PREFIX):
                raise ValueError(f"{name}: names starting with {tasks.RESERVED_ENV_PREFIX} are set by the scheduler")
            if len(text) > tasks.MAX_ENV_VALUE_CHARS or "\x00" in text:
                raise ValueError(f"{name}: a value of at most {tasks.MAX_ENV_VALUE_CHARS} characters, no NUL")
        return value


TargetModel = Annotated[
    Union[HttpTarget, SqsTarget, SnsTarget, EventBridgeTarget, LambdaTarget, EcsTaskTarget], Field(discriminator="type")
]


class RetryPolicyModel(_Model):
    maxAttempts: int = Field(3, ge=1, le=20)
    backoff: Literal["EXPONENTIAL", "FIXED"] = "EXPONENTIAL"
    initialDelayMs: int = Field(1000, ge=0, le=86_400_000)
    maxDelayMs: int = Field(3_600_000, ge=0, le=7 * 86_400_000)


class FlowControlModel(_Model):
    key: str = Field(min_length=1, max_length=128, json_schema_extra={"pattern": f"^{_FLOW_KEY.pattern}$"})
    # What the sharded items support within DynamoDB's limits (domain/flow.py): 1,250 slot maps,
    # 20 rate counters a second.
    maxConcurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY)
    ratePerSecond: int | None = Field(None, ge=1, le=MAX_RATE_PER_SECOND)

    @field_validator("key")
    @classmethod
    def _printable_key(cls, value: str) -> str:
        if not _FLOW_KEY.fullmatch(value):
            raise ValueError("1 to 128 characters without control characters")
        return value

    @model_validator(mode="after")
    def _a_limit(self) -> "FlowControlModel":
        if self.maxConcurrency is None and self.ratePerSecond is None:
            raise ValueError("give maxConcurrency, ratePerSecond or both")
        return self


class StepModel(_Model):
    name: str = Field(min_length=1, max_length=64)
    target: TargetModel
    dependsOn: list[str] = Field(default_factory=list, max_length=100)
    retryPolicy: RetryPolicyModel | None = None
    timeoutSec: int | None = Field(None, ge=1, le=MAX_TASK_TIMEOUT_SEC)


class ExpectModel(_Model):
    """Absence alerts: each fire must report success within this many seconds (its range is
    checked in api/mapping.py: 422 naming `expect.successWithinSec`; the document says it)."""
    successWithinSec: int = Field(json_schema_extra={"minimum": EXPECT_MIN_SEC, "maximum": EXPECT_MAX_SEC})


class MisfirePolicyModel(_Model):
    """Catch-up that does not flood: misfirePolicy's object form. The numbers' ranges, and that
    they go only with RUN_ALL, are checked in api/mapping.py (422 naming the field)."""
    policy: Literal["RUN_ONCE", "RUN_ALL", "SKIP"]
    maxCatchUp: int | None = None
    catchUpPerMinute: int | None = None


_MISFIRE_NAMES = ("RUN_ONCE", "RUN_ALL", "SKIP")


class JobRequest(_Model):
    name: str = Field(min_length=1, max_length=128, json_schema_extra={"pattern": NAME_PATTERN})
    type: Literal["ONE_TIME", "DELAYED", "CRON", "RATE"]
    schedule: str | None = Field(None, max_length=256)
    timezone: str = Field("UTC", max_length=64)
    runAt: str | None = Field(None, max_length=64)
    delaySeconds: int | None = Field(None, ge=0, le=366 * 86_400)
    startAt: str | None = Field(None, max_length=64)
    endAt: str | None = Field(None, max_length=64)
    target: TargetModel | None = None
    # A job whose fire runs a DAG of steps instead of one target (shared/API.md, "Steps").
    # At most MAX_STEPS (domain/steps.py, 422 naming `steps`); the model stops a longer list unread.
    steps: list[StepModel] | None = Field(None, max_length=1000, json_schema_extra=lambda schema: schema["anyOf"][0]
                                          .update(minItems=1, maxItems=MAX_STEPS))
    payload: Any = None
    retryPolicy: RetryPolicyModel = Field(default_factory=RetryPolicyModel)
    timeoutSec: int = Field(300, ge=1, le=MAX_TASK_TIMEOUT_SEC)
    priority: Literal["HIGH", "NORMAL", "LOW"] = "NORMAL"
    overlapPolicy: Literal["ALLOW", "SKIP"] = "ALLOW"
    misfirePolicy: Literal["RUN_ONCE", "RUN_ALL", "SKIP"] | MisfirePolicyModel = "RUN_ONCE"
    jitterSec: int = Field(0, ge=0, le=3600)
    heartbeatTimeoutSec: int = Field(300, ge=10, le=86_400)
    retryOn4xx: bool = False  # retry an HTTP 4xx other than 408 and 429 (not retried by default)
    onSuccess: TargetModel | None = None  # called once per execution that succeeds, with its summary
    onFailure: TargetModel | None = None  # called once per execution that ends DEAD, with its summary
    flowControl: FlowControlModel | None = None
    tags: dict[str, str] = Field(default_factory=dict, json_schema_extra={
        "maxProperties": MAX_TAGS, "propertyNames": {"pattern": f"^{_TAG_KEY.pattern}$"},
        "additionalProperties": {"type": "string", "maxLength": 256, "pattern": f"^{_PRINTABLE}*$"}})
    # Schedule bounds and self-pausing (CRON and RATE jobs only).
    maxRuns: int | None = Field(None, ge=1, le=10_000_000)
    pauseAfterFailures: int | None = Field(None, ge=1, le=1000)
    # Exclusion calendars (CRON and RATE jobs): no fire on a date, in `timezone`, of one of them.
    excludeCalendars: list[str] = Field(default_factory=list, max_length=MAX_CALENDARS_PER_JOB, json_schema_extra={
        "items": {"type": "string", "pattern": f"^{CALENDAR_NAME.pattern}$"}})
    # Absence alerts: success must be reported within successWithinSec of each fire.
    expect: ExpectModel | None = None

    @field_validator("name")
    @classmethod
    def _printable_name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must hold more than spaces")
        return printable_name(value)

    @field_validator("misfirePolicy", mode="before")
    @classmethod
    def _misfire_form(cls, value: Any) -> Any:
        # Catch-up that does not flood: one clear message for either form (a union's error names
        # each member it tried).
        if isinstance(value, dict):
            try:
                return MisfirePolicyModel.model_validate(value)
            except ValidationError as exc:
                raise ValueError("; ".join(f"{_field_path(e['loc'])}: {_message(e)}" for e in exc.errors())) from None
        if value not in _MISFIRE_NAMES:
            raise ValueError("one of RUN_ONCE, RUN_ALL, SKIP, or an object "
                             "{\"policy\", \"maxCatchUp\", \"catchUpPerMinute\"}")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_TAGS:
            raise ValueError(f"at most {MAX_TAGS} tags")
        for key, text in value.items():
            if not _TAG_KEY.fullmatch(key):
                raise ValueError(f"tag key {key[:70]!r}: 1 to 64 characters, no ':' (filters read key:value) "
                                 "and no control characters")
            if len(text) > 256 or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text):
                raise ValueError(f"tag {key}: a value of at most 256 characters without control characters")
        return value

    @model_validator(mode="after")
    def _target_or_steps(self) -> "JobRequest":
        if (self.target is None) == (self.steps is None):
            raise ValueError("give either target or steps (not both)")
        return self


class CalendarRequest(_Model):
    """PUT /v1/calendars/{name}: create or replace an exclusion calendar."""
    description: str = Field("", max_length=MAX_DESCRIPTION_CHARS, json_schema_extra={"pattern": PRINTABLE_NAME})
    dates: list[str] = Field(max_length=MAX_CALENDAR_DATES, json_schema_extra={"items": {"type": "string",
                                                                                         "format": "date"}})

    @field_validator("description")
    @classmethod
    def _printable_description(cls, value: str) -> str:
        return printable_name(value)


class RotateSigningSecretRequest(_Model):
    graceSec: int = Field(86_400, ge=0, le=7 * 86_400)  # how long the previous secret keeps signing


class PauseRequest(_Model):
    reason: str | None = Field(None, max_length=500)


class JobFilter(_Model):
    tag: str | list[str] | None = Field(None, json_schema_extra=lambda schema: [  # "key:value", all must match
        (part.get("items") or part).update(pattern=TAG_FILTER) for part in schema["anyOf"][:2]])
    state: Literal["ACTIVE", "PAUSED", "COMPLETED", "CANCELLED"] | None = None
    namePrefix: str | None = Field(None, min_length=1, max_length=128, json_schema_extra=lambda schema: schema["anyOf"][0]
                                   .update(pattern=PRINTABLE_NAME))

    @field_validator("namePrefix")
    @classmethod
    def _printable_prefix(cls, value: str | None) -> str | None:
        return None if value is None else printable_name(value)


BULK_ID = re.compile(r"bulk_[0-9a-f]{32}")


class BulkRequest(_Model):
    action: Literal["PAUSE", "RESUME", "CANCEL"]
    filter: JobFilter = Field(default_factory=JobFilter)
    # An empty filter matches every job of the tenant: acted on only with "all": true.
    all: bool = False
    dryRun: bool = False
    reason: str | None = Field(None, max_length=500)  # PAUSE: the reason each job shows
    # The next page of a bulk operation that did not end in its first request (its answer's bulkId).
    bulkId: str | None = Field(None, min_length=1, max_length=64, json_schema_extra={"pattern": f"^{BULK_ID.pattern}$"})

    @field_validator("bulkId")
    @classmethod
    def _bulk_id(cls, value: str | None) -> str | None:
        if value is not None and not BULK_ID.fullmatch(value):
            raise ValueError("must be the bulkId of an earlier answer")
        return value


class BackfillRequest(_Model):
    from_: str = Field(alias="from", max_length=64)
    to: str = Field(max_length=64)


class HeartbeatRequest(_Model):
    progress: Any = None
    # Absence alerts: the work succeeded as far as the job's `expect` is concerned (a long task
    # that reports its health before its end).
    ok: bool = False


# Batch create (shared/API.md, "v1 additions (round 4)"): each job as POST /v1/jobs takes it, with
# its own optional idempotency key. The envelope is checked first; each job on its own, so one job's
# bad input never fails the others.
MAX_BATCH_JOBS = 100
# The batch's body: at most this many bytes (a job's own limit still holds for each). Lambda's
# synchronous invocation carries at most 6 MB each way (the event's headers and envelope included),
# under API Gateway's 10 MB; the answer (a job's JSON per job) stays under it too.
MAX_BATCH_BODY_BYTES = 5 * 1024 * 1024


class BatchJobRequest(JobRequest):
    idempotencyKey: str | None = Field(None, min_length=1, max_length=255, pattern=r"^[\x21-\x7e]+$")


class BatchCreateRequest(_Model):
    """The document's form of the body; the handler checks the envelope with BatchEnvelope and
    each job with BatchJobRequest, apart."""
    jobs: list[BatchJobRequest] = Field(min_length=1, max_length=MAX_BATCH_JOBS)


class BatchEnvelope(_Model):
    jobs: list[Any] = Field(min_length=1, max_length=MAX_BATCH_JOBS)


class CompleteRequest(_Model):
    output: Any = None


class FailRequest(_Model):
    error: str = Field("failed", max_length=2000)


def parse_body(model: type[_Model], body: str | None) -> Any:
    """JSON text → model, or InvalidRequest naming each bad field (never a 500)."""
    if body is None or not body.strip():
        raise InvalidRequest("the request needs a JSON body", [FieldProblem("body", "missing")])
    try:
        data = loads_strict(body)
    except NotText as exc:  # a lone surrogate, at any depth, keys too: the field that holds it
        field = exc.path or "body"
        raise InvalidRequest(f"{field}: not Unicode text (a lone UTF-16 surrogate)",
                             [FieldProblem(field, "a lone UTF-16 surrogate (\\ud800-\\udfff) is not Unicode text")]) from None
    except ValueError as exc:
        raise InvalidRequest(f"malformed JSON: {exc}", [FieldProblem("body", "not valid JSON (RFC 8259)")]) from None
    return parse_data(model, data)


def parse_data(model: type[_Model], data: Any, where: str = "body") -> Any:
    """A parsed JSON value → model, or InvalidRequest naming each bad field (never a 500)."""
    if not isinstance(data, dict):
        raise InvalidRequest(f"the {where} must be a JSON object", [FieldProblem(where, "not an object")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = [FieldProblem(_field_path(e["loc"]), _message(e)) for e in exc.errors()]
        summary = "; ".join(f"{d.field}: {d.message}" for d in details[:5])
        raise InvalidRequest(f"invalid request: {summary}", details) from None


def _message(error: dict) -> str:
    """pydantic's message without its own prefix ("Value error, ..."): our validators' text."""
    if error["type"] == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    return error["msg"]


def _field_path(loc: tuple) -> str:
    # Drop discriminator tags that pydantic inserts ("target.HTTP.url" → "target.url").
    parts = [str(p) for p in loc if not (isinstance(p, str) and p.isupper())]
    return ".".join(parts) or "body"


def check_report_size(value: Any, field: str) -> Any:
    """A long-running target's report (output, progress) must fit its item and a list page."""
    size = size_bytes(value)
    if size > MAX_REPORT_BYTES:
        raise PayloadTooLarge(f"{field}: {size} bytes is over the {MAX_REPORT_BYTES // 1024} KB limit",
                              [FieldProblem(field, f"over {MAX_REPORT_BYTES // 1024} KB")])
    return value
