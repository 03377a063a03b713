"""DynamoDB access shared by every table's store (a module per table beside it): `ClientError`
becomes a typed domain error here, once, by error code; batches, cursors and pages."""
from __future__ import annotations

import base64
import json
import random
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

from botocore.exceptions import ClientError

from jobsched.domain.errors import ConditionLost, FieldProblem, InvalidRequest
from jobsched.store.wire import item_from_wire

CONDITION_FAILED = "ConditionalCheckFailedException"


BATCH_GET_LIMIT = 100


# Batch calls of one page in flight at once (the tick's job reads, its next-timer writes).
GET_PARALLELISM = 8


WRITE_PARALLELISM = 8


BATCH_WRITE_LIMIT = 25


# UnprocessedKeys / UnprocessedItems (throttling, partition limits) are retried with capped
# exponential backoff and full jitter, a bounded number of times; then the caller fails and its
# own retry (the next tick, SQS redelivery) takes over instead of a hot loop against a throttle.
BATCH_RETRIES = 8


BATCH_BACKOFF_BASE_S = 0.05


BATCH_BACKOFF_CAP_S = 2.0


def sharded_counter(name: str, shard: int) -> str:
    """The name of one shard of a tenant's quota counter (service/jobs.py, Quotas). Shard 0 keeps
    the counter's unsharded name, so the places taken before sharding are given back there."""
    return name if shard == 0 else f"{name}#{shard}"


def raw_client(dynamodb):
    """A low-level client beside a resource. (The resource's own `meta.client` rewrites every
    request and answer through boto3's type (de)serializer: no use for wire-format calls.)"""
    import boto3

    meta = dynamodb.meta.client.meta
    return boto3.session.Session().client("dynamodb", region_name=meta.region_name, endpoint_url=meta.endpoint_url,
                                          config=meta.config)


class BatchIncomplete(RuntimeError):
    """DynamoDB left part of a batch unprocessed after every retry."""


def _backoff_s(retry: int) -> float:
    return random.random() * min(BATCH_BACKOFF_CAP_S, BATCH_BACKOFF_BASE_S * 2 ** retry)


def batch_until_done(call: Callable[[dict], dict], request: dict, unprocessed_key: str,
                     sleep: Callable[[float], None] = time.sleep) -> list[dict]:
    """Send a batch request, then what it left unprocessed, backing off between tries.
    Returns every answer; raises BatchIncomplete when retries run out."""
    answers = []
    for retry in range(BATCH_RETRIES + 1):
        if retry:
            sleep(_backoff_s(retry - 1))
        answer = call(request)
        answers.append(answer)
        request = answer.get(unprocessed_key) or {}
        if not request:
            return answers
    raise BatchIncomplete(f"{unprocessed_key}: still unprocessed after {BATCH_RETRIES} retries")


def plain(value: Any) -> Any:
    """DynamoDB's Decimals back to ints (all our numbers are integers) and floats."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _condition_lost(exc: ClientError, what: str) -> ConditionLost | None:
    """A failed condition as a domain outcome, with the item as it is now when DynamoDB returned
    it (ReturnValuesOnConditionCheckFailure). The resource API leaves that item in wire format."""
    if exc.response.get("Error", {}).get("Code") != CONDITION_FAILED:
        return None
    return ConditionLost(what=what, current=item_from_wire(exc.response.get("Item")))


def encode_cursor(key: dict | None) -> str | None:
    if not key:
        return None
    return base64.urlsafe_b64encode(json.dumps(plain(key), separators=(",", ":")).encode()).decode()


MAX_CURSOR_CHARS = 2048


def decode_cursor(cursor: str | None, required: dict[str, type]) -> dict | None:
    """A cursor this list returned, or InvalidRequest: each key present with its type (strings
    short and non-empty, numbers integers in range), so no forged cursor reaches DynamoDB as a
    key it refuses."""
    if not cursor:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor[:MAX_CURSOR_CHARS].encode("ascii")))
    except (ValueError, TypeError, RecursionError):
        key = None
    if (not isinstance(key, dict) or len(cursor) > MAX_CURSOR_CHARS or set(key) != set(required)
            or not all(_cursor_value_ok(key[name], kind) for name, kind in required.items())):
        raise InvalidRequest("cursor: not a cursor this list returned", [FieldProblem("cursor", "not a cursor")])
    return key


def _cursor_value_ok(value: Any, kind: type) -> bool:
    if kind is int:
        return type(value) is int and 0 <= value < 2**63
    return type(value) is str and 0 < len(value.encode("utf-8", "surrogatepass")) <= 256


@dataclass
class Page:
    items: list
    next_cursor: str | None
    cursor_after: Callable[[Any], str | None] | None = None  # the cursor that resumes after an item

    def first(self, count: int) -> "Page":
        """The first `count` items, with the cursor that continues after the last of them."""
        if count >= len(self.items) or self.cursor_after is None:
            return self
        return Page(self.items[:count], self.cursor_after(self.items[count - 1]), self.cursor_after)
