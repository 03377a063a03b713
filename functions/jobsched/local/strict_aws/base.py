"""What every part of the strict layer shares: AWS's limits (AWS-LIMITS.md), the emulator's
account and Region, the function a call is made by (`acting_as`), one call's state between its
check and its bill (`_Call`), and the error botocore raises for a refusal."""
from __future__ import annotations

import base64
import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Any, Iterator

from botocore.exceptions import ClientError


REGION = "us-east-1"
ACCOUNT = "123456789012"  # the emulator's account (local/events.py uses the same)

KB = 1024
MAX_ITEM_BYTES = 400 * KB
MAX_PARTITION_KEY_BYTES = 2048
MAX_SORT_KEY_BYTES = 1024
MAX_EXPRESSION_BYTES = 4 * KB
MAX_PLACEHOLDER_BYTES = 255
MAX_SUBSTITUTION_BYTES = 2 * KB * KB
BATCH_GET_MAX_KEYS = 100
BATCH_WRITE_MAX_ITEMS = 25
TRANSACTION_MAX_ITEMS = 100
TRANSACTION_MAX_BYTES = 4 * KB * KB
SQS_MAX_MESSAGE_BYTES = 1024 * KB  # raised from 256 KiB in 2025 (AWS-LIMITS.md, SQS)
SQS_MAX_BATCH_ENTRIES = 10
SQS_MAX_BATCH_BYTES = 1024 * KB
# A standard queue's in-flight messages (received, not deleted, not visible again): past about this
# many a short-polling ReceiveMessage is answered OverLimit, a long poll nothing (AWS-LIMITS.md, SQS).
SQS_IN_FLIGHT_PER_QUEUE = 120_000
SNS_MAX_MESSAGE_BYTES = 256 * KB  # a topic's default MaximumMessageSize
SNS_MAX_BATCH_ENTRIES = 10
SNS_MAX_BATCH_BYTES = 256 * KB
EVENTS_MAX_ENTRY_BYTES = 256 * KB  # AWS's PutEvents page; a 1 MiB figure is only third-party
EVENTS_MAX_ENTRIES = 10
PARTITION_WCU_PER_SECOND = 1000
PARTITION_RCU_PER_SECOND = 3000
KMS_REQUESTS_PER_SECOND = 100_000  # shared symmetric quota in us-east-1
# Fargate, per account and Region (ECS Developer Guide, "AWS Fargate throttling quotas"): RunTask
# calls at 20 a second, burst and sustained; tasks launched from a bucket of 100 refilled at 20 a
# second. Over either: ThrottlingException.
RUN_TASK_CALLS = (20, 20)  # (bucket, refill a second)
FARGATE_LAUNCHES = (100, 20)

# How each service answers a call its caller's policies do not allow (code, HTTP status).
ACCESS_DENIED = {
    "dynamodb": ("AccessDeniedException", 400),
    "kms": ("AccessDeniedException", 400),
    "events": ("AccessDeniedException", 400),
    "lambda": ("AccessDeniedException", 403),
    "sqs": ("AccessDenied", 403),
    "sns": ("AuthorizationError", 403),
    "sts": ("AccessDenied", 403),
    "ecs": ("AccessDeniedException", 400),
}

current_function: contextvars.ContextVar[str | None] = contextvars.ContextVar("strict_aws_function", default=None)
_internal: contextvars.ContextVar[bool] = contextvars.ContextVar("strict_aws_internal", default=False)


class StrictLayerError(RuntimeError):
    """The layer cannot decide (an unsupported policy construct): it fails loudly, never allows."""


@contextlib.contextmanager
def acting_as(function: str | None) -> Iterator[None]:
    """Calls made inside are made by `function` (its name: api, tick, worker)."""
    token = current_function.set(function)
    try:
        yield
    finally:
        current_function.reset(token)


def _raw_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return base64.b64decode(value)


@dataclass
class _Call:
    """One call's state between its check and its bill (kept in botocore's request context)."""
    service: str
    operation: str
    params: dict
    second: int
    before: dict = field(default_factory=dict)  # (table, key json) → the item before a write
    after: dict = field(default_factory=dict)  # (table, key json) → the item after it (or as read), reported
    unreported: bool = False  # reports on, but the answer carried none
    answer_empty: bool = False  # a long-polling ReceiveMessage past the in-flight limit: answered empty


def _access_key(client) -> str | None:
    """The access key id a client signs with (None: unsigned, or none resolved yet)."""
    credentials = getattr(getattr(client, "_request_signer", None), "_credentials", None)
    return getattr(credentials, "access_key", None) if credentials is not None else None


def _error(client, operation: str, code: str, message: str, status: int) -> ClientError:
    """The exception botocore raises for an error answer: the client's modeled class for the code."""
    response = {"Error": {"Code": code, "Message": message},
                "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0}}
    return client.exceptions.from_code(code)(response, operation)
