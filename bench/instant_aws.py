"""AWS answered at once, in-process: DynamoDB and SQS requests get their answers from canned
data before botocore would send them (its `before-send` event), so boto3 builds and parses every
request as it would against AWS while no emulator runs. The CPU spent making the answers is
measured (per thread) and kept apart, so that a benchmark can subtract it.

Only what the tick and the worker ask is answered: GetItem, BatchGetItem and Query read the
canned items; writes succeed without changing them (each run sees the same data; a pack's claim
answers as the pack's first); SQS sends and visibility changes succeed."""
from __future__ import annotations

import bisect
import hashlib
import json
import threading
import time
from collections import Counter
from typing import Any

from botocore.awsrequest import AWSResponse


class _Body:
    """What botocore reads a response body from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_kwargs):
        yield self._data

    def read(self, *_args, **_kwargs) -> bytes:
        return self._data


def _key_value(value: dict) -> Any:
    ((kind, raw),) = value.items()
    return int(raw) if kind == "N" else raw


class InstantAws:
    def __init__(self, key_schema: dict[str, tuple[str, ...]]) -> None:
        self._keys = key_schema  # table -> (hash key, range key?)
        self._items: dict[str, dict[tuple, dict]] = {t: {} for t in key_schema}
        self._partitions: dict[str, dict[Any, list[tuple[Any, dict]]]] = {t: {} for t in key_schema}
        self._lock = threading.Lock()
        self.cpu_s = 0.0  # CPU spent answering (to subtract from a measurement)
        self.calls: Counter = Counter()
        self.empty_queries = 0  # Query answers without items (an empty slice of a bucket)
        self.recording: list[tuple[str, str, dict]] | None = None  # (service, operation, wire params)

    # --- canned data ---------------------------------------------------------------------------
    def put(self, table: str, wire_item: dict) -> None:
        names = self._keys[table]
        key = tuple(_key_value(wire_item[n]) for n in names)
        self._items[table][key] = wire_item
        if len(names) == 2:
            self._partitions[table].setdefault(key[0], []).append((key[1], wire_item))

    def seal(self) -> None:
        """Call once the data is in: orders each partition by range key."""
        for partitions in self._partitions.values():
            for rows in partitions.values():
                rows.sort(key=lambda r: r[0])

    def attach(self, session) -> None:
        # This double answers without an emulator: a strict layer left active by an earlier
        # in-process stack would look items up through a real endpoint. A bench that wants the
        # ledger activates a billing-only layer (StrictAws.billing_only) after attaching.
        from jobsched.local import strict_aws

        strict_aws.activate(None)
        session.events.register("before-send", self._answer)

    # --- answering -----------------------------------------------------------------------------
    def _answer(self, request, **_kwargs) -> AWSResponse:
        started = time.thread_time()
        target = request.headers["X-Amz-Target"]
        target = target.decode() if isinstance(target, bytes) else target
        prefix, operation = target.rsplit(".", 1)
        service = "sqs" if prefix == "AmazonSQS" else "dynamodb"
        params = json.loads(request.body or b"{}")
        body = json.dumps(getattr(self, f"_{service}_{operation}")(params)).encode()
        response = AWSResponse(request.url, 200, {"content-type": "application/x-amz-json-1.0",
                                                  "x-amzn-requestid": "instant"}, _Body(body))
        with self._lock:
            self.calls[(service, operation)] += 1
            if self.recording is not None:
                self.recording.append((service, operation, params))
            self.cpu_s += time.thread_time() - started
        return response

    def _key_of(self, table: str, key: dict) -> tuple:
        return tuple(_key_value(key[n]) for n in self._keys[table])

    @staticmethod
    def _project(item: dict, params: dict) -> dict:
        projection = params.get("ProjectionExpression")
        if not projection:
            return item
        names = params.get("ExpressionAttributeNames", {})
        wanted = [names.get(p.strip(), p.strip()) for p in projection.split(",")]
        return {n: item[n] for n in wanted if n in item}

    def _dynamodb_GetItem(self, params: dict) -> dict:
        item = self._items[params["TableName"]].get(self._key_of(params["TableName"], params["Key"]))
        return {"Item": self._project(item, params)} if item else {}

    def _dynamodb_BatchGetItem(self, params: dict) -> dict:
        responses = {}
        for table, request in params["RequestItems"].items():
            found = (self._items[table].get(self._key_of(table, k)) for k in request["Keys"])
            responses[table] = [self._project(i, request) for i in found if i]
        return {"Responses": responses, "UnprocessedKeys": {}}

    def _dynamodb_Query(self, params: dict) -> dict:
        """The key condition `hash = :value` (and `range BETWEEN :lo AND :hi`: the worker's query of
        its pack's fences), in range-key order, with Limit and ExclusiveStartKey."""
        table = params["TableName"]
        values = dict(params["ExpressionAttributeValues"])
        low, high = values.pop(":lo", None), values.pop(":hi", None)
        (value,) = values.values()
        rows = self._partitions[table].get(_key_value(value), [])
        if low is not None and high is not None:
            rows = [r for r in rows if _key_value(low) <= r[0] <= _key_value(high)]
        forward = params.get("ScanIndexForward", True)
        rows = rows if forward else rows[::-1]
        start = 0
        if "ExclusiveStartKey" in params:
            after = _key_value(params["ExclusiveStartKey"][self._keys[table][1]])
            keys = [r[0] for r in rows]
            start = bisect.bisect_right(keys, after) if forward else next(
                (i + 1 for i, k in enumerate(keys) if k == after), len(rows))
        limit = params.get("Limit", len(rows))
        page = rows[start:start + limit]
        self.empty_queries += not page
        answer: dict = {"Items": [self._project(i, params) for _, i in page], "Count": len(page),
                        "ScannedCount": len(page)}
        if start + limit < len(rows):
            last = page[-1][1]
            answer["LastEvaluatedKey"] = {n: last[n] for n in self._keys[table]}
        return answer

    def _dynamodb_PutItem(self, params: dict) -> dict:
        return {}

    def _dynamodb_UpdateItem(self, params: dict) -> dict:
        if params.get("ReturnValues") == "ALL_NEW" and str(params["Key"].get("jobId", {}).get("S", "")).startswith("pack#"):
            # A pack's claim (store/packs.py) reads back what it wrote: its first attempt, no outcomes.
            return {"Attributes": {**params["Key"], "attempt": {"N": "1"}, "outcomes": {"M": {}}}}
        return {}

    def _dynamodb_BatchWriteItem(self, params: dict) -> dict:
        return {"UnprocessedItems": {}}

    def _sqs_SendMessageBatch(self, params: dict) -> dict:
        return {"Successful": [{"Id": e["Id"], "MessageId": f"m-{e['Id']}",
                                "MD5OfMessageBody": hashlib.md5(e["MessageBody"].encode()).hexdigest()}
                               for e in params["Entries"]], "Failed": []}

    def _sqs_SendMessage(self, params: dict) -> dict:
        return {"MessageId": "m", "MD5OfMessageBody": hashlib.md5(params["MessageBody"].encode()).hexdigest()}

    def _sqs_ChangeMessageVisibility(self, params: dict) -> dict:
        return {}

    def _sqs_ChangeMessageVisibilityBatch(self, params: dict) -> dict:
        return {"Successful": [{"Id": e["Id"]} for e in params["Entries"]], "Failed": []}

    def _sqs_DeleteMessageBatch(self, params: dict) -> dict:
        return {"Successful": [{"Id": e["Id"]} for e in params["Entries"]], "Failed": []}
