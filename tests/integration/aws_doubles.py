"""Thin fault-injecting doubles over the data access: what moto never does and AWS does.

moto is always consistent, never throttles, never leaves a batch unprocessed and has no time
limit. Each double here wraps the real boto3 object and changes only the one behaviour it names,
so a test can show that the code survives AWS's documented behaviour."""
from __future__ import annotations

import copy
import json
from typing import Any, Callable

from jobsched.domain.clock import FakeClock


def _wire_key(item: dict, names: tuple[str, ...]) -> tuple:
    return tuple(json.dumps(item[n], sort_keys=True) for n in names)


class StaleReads:
    """A low-level DynamoDB client whose eventually consistent reads answer from a snapshot taken
    earlier (as a replica that has not yet seen the newest writes would). Strongly consistent
    reads pass through to the real table."""

    def __init__(self, client) -> None:
        self._resource = client
        self._snapshots: dict[str, dict[tuple, dict]] = {}
        self.stale_answers = 0

    def snapshot(self, table_name: str, key_names: tuple[str, ...]) -> None:
        items = self._resource.scan(TableName=table_name, ConsistentRead=True)["Items"]  # tests keep tables tiny
        self._snapshots[table_name] = {_wire_key(i, key_names): copy.deepcopy(i) for i in items}
        self._keys = key_names

    def batch_get_item(self, RequestItems: dict, **kwargs) -> dict:  # noqa: N803 - boto3's name
        fresh: dict = {}
        answer: dict = {"Responses": {}, "UnprocessedKeys": {}}
        for table, request in RequestItems.items():
            if request.get("ConsistentRead") or table not in self._snapshots:
                fresh[table] = request
                continue
            self.stale_answers += 1
            snapshot = self._snapshots[table]
            answer["Responses"][table] = [snapshot[k] for k in
                                          (_wire_key(key, self._keys) for key in request["Keys"])
                                          if k in snapshot]
        if fresh:
            real = self._resource.batch_get_item(RequestItems=fresh, **kwargs)
            answer["Responses"].update(real.get("Responses", {}))
            answer["UnprocessedKeys"].update(real.get("UnprocessedKeys", {}))
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resource, name)


class Unprocessed:
    """A low-level DynamoDB client whose batch calls leave part of each request unprocessed, as a
    throttled table does: the first `times` calls process only the first item of each table's
    request (or none when `process_none`). Counts calls so a test can bound them."""

    def __init__(self, resource, times: int, process_none: bool = False, max_calls: int = 200) -> None:
        self._resource = resource
        self._left = times
        self._process_none = process_none
        self._max_calls = max_calls
        self.calls = 0

    def _count(self) -> None:
        self.calls += 1
        if self.calls > self._max_calls:
            raise AssertionError(f"more than {self._max_calls} batch calls: retries are unbounded")

    def batch_get_item(self, RequestItems: dict, **kwargs) -> dict:  # noqa: N803
        self._count()
        if self._left <= 0:
            return self._resource.batch_get_item(RequestItems=RequestItems, **kwargs)
        self._left -= 1
        keep = 0 if self._process_none else 1
        now = {t: {**r, "Keys": r["Keys"][:keep]} for t, r in RequestItems.items() if r["Keys"][:keep]}
        later = {t: {**r, "Keys": r["Keys"][keep:]} for t, r in RequestItems.items() if r["Keys"][keep:]}
        answer = self._resource.batch_get_item(RequestItems=now, **kwargs) if now else {"Responses": {}}
        return {"Responses": answer.get("Responses", {}), "UnprocessedKeys": later}

    def batch_write_item(self, RequestItems: dict, **kwargs) -> dict:  # noqa: N803
        self._count()
        if self._left <= 0:
            return self._resource.batch_write_item(RequestItems=RequestItems, **kwargs)
        self._left -= 1
        keep = 0 if self._process_none else 1
        now = {t: r[:keep] for t, r in RequestItems.items() if r[:keep]}
        later = {t: r[keep:] for t, r in RequestItems.items() if r[keep:]}
        if now:
            self._resource.batch_write_item(RequestItems=now, **kwargs)
        return {"UnprocessedItems": later}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resource, name)


class FunctionKilled(BaseException):
    """Lambda stopped the invocation at its time limit (nothing after this point ran)."""


class MortalContext:
    """A Lambda context with a real deadline on the fake clock: remaining time counts down as
    the clock moves, and `check()` kills the invocation once the deadline has passed."""

    def __init__(self, clock: FakeClock, timeout_ms: int) -> None:
        self._clock = clock
        self.deadline_ms = clock.now_ms() + timeout_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.deadline_ms - self._clock.now_ms()

    def check(self) -> None:
        if self._clock.now_ms() >= self.deadline_ms:
            raise FunctionKilled("Task timed out")


class SlowPages:
    """A timers store whose every page costs `page_ms` of the clock (a slow hand-off), inside a
    function that Lambda kills at its deadline."""

    def __init__(self, timers, clock: FakeClock, page_ms: int, context: Callable[[], MortalContext]) -> None:
        self._timers = timers
        self._clock = clock
        self._page_ms = page_ms
        self._context = context
        self.pages_read = 0

    def pages(self, bucket: str, after_sk: str | None = None):
        for page in self._timers.pages(bucket, after_sk):
            self._clock.advance_ms(self._page_ms)
            self._context().check()
            self.pages_read += 1
            yield page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._timers, name)


def wire_size(name: str, value: dict) -> int:
    """DynamoDB's size of one attribute in wire format (docs: CapacityUnitCalculations): the name's
    UTF-8 bytes, then a string's bytes, a number's ~1 byte per 2 significant digits + 1, a map's
    or list's elements + 3 + 1 per element. Sets: their elements (no formula published)."""
    size = len(name.encode())
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return size + len(inner.encode())
    if kind == "N":
        digits = inner.lstrip("-").replace(".", "").strip("0") or "0"
        return size + (len(digits) + 1) // 2 + 1
    if kind == "B":
        return size + len(inner)
    if kind in ("BOOL", "NULL"):
        return size + 1
    if kind == "M":
        return size + 3 + sum(wire_size(k, v) + 1 for k, v in inner.items())
    if kind == "L":
        return size + 3 + sum(wire_size("", v) + 1 for v in inner)
    return size + sum(len(str(v).encode()) for v in inner)


def item_size(item: dict | None) -> int:
    return sum(wire_size(k, v) for k, v in (item or {}).items())


def write_units(size_bytes: int) -> int:
    return max(1, -(-size_bytes // 1024))


def read_units(size_bytes: int, consistent: bool) -> float:
    units = max(1, -(-size_bytes // 4096))
    return units if consistent else units / 2


def tick_each_minute_out_of_time(harness, stores, page_size: int, page_ms: int, minutes, timeout_ms: int = 60_000) -> int:
    """Runs the tick of every segment once a minute over `minutes`, through a Timers store whose
    every page of `page_size` takes `page_ms` of the clock, each run with a function's remaining
    time as its budget (killed past it: the test fails). Returns how many runs stopped out of time."""
    import pytest

    from jobsched.service.handoff import HandOff
    from jobsched.service.tick import Ticker
    from jobsched.store.timers import TimersStore

    context = {"now": None}
    stores.timers = SlowPages(TimersStore(harness.session.resource("dynamodb"), harness.settings.timers_table,
                                          page_size=page_size), harness.clock, page_ms, lambda: context["now"])
    ticker = Ticker(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock)
    out_of_time = 0
    for minute in minutes:
        for segment in range(harness.settings.segments):
            harness.clock.set_ms(max(harness.clock.now_ms(), minute * 60_000 + 2_000))
            context["now"] = MortalContext(harness.clock, timeout_ms)
            try:
                report = ticker.run(segment, context["now"].get_remaining_time_in_millis)
            except FunctionKilled:
                pytest.fail("the tick ran past its time limit")
            out_of_time += report.out_of_time
    return out_of_time


class CapacityMeter:
    """Bills every GetItem, UpdateItem and PutItem of a session as DynamoDB does, per table,
    partition key and second of the clock: a write in 1 KB units on the larger of the item before
    and after (a failed condition billed on the item as it is: DynamoDB bills it as if written,
    so this is a lower bound), a read in 4 KB units. An item's size is read through a separate,
    unmetered client after each write and remembered (so only the metered session may write the
    items it bills). What AWS would throttle shows as a peak above 1,000 WU / 3,000 RU a key."""

    def __init__(self, session, clock, peek_client, peek: bool = True) -> None:
        from collections import defaultdict

        self._clock = clock
        self._peek = peek_client
        self._hash_keys: dict[str, list[str]] = {}
        self.writes: dict[tuple[str, str, int], float] = defaultdict(float)
        self.reads: dict[tuple[str, str, int], float] = defaultdict(float)
        self.largest_item: dict[str, int] = defaultdict(int)  # by table
        self.failed_conditions = 0
        self._sizes: dict[tuple[str, str], int] = {}
        # Without peeking, a write is billed on what it carries (key and values): exact for items
        # known to stay below 1 KB (one unit whatever they hold), and half the calls to moto.
        self._peeking = peek
        session.events.register("before-call.dynamodb.*", self._before)
        session.events.register("after-call.dynamodb.*", self._after)

    def _keys(self, table: str) -> list[str]:
        if table not in self._hash_keys:
            schema = self._peek.describe_table(TableName=table)["Table"]["KeySchema"]
            self._hash_keys[table] = [k["AttributeName"] for k in sorted(schema, key=lambda k: k["KeyType"])]
        return self._hash_keys[table]

    def _size(self, table: str, key: dict, fresh: bool = False, request: dict | None = None) -> int:
        if not self._peeking:
            return item_size({**key, **(request or {}).get("ExpressionAttributeValues", {}), **(request or {}).get("Item", {})})
        known = (table, json.dumps(key, sort_keys=True))
        if fresh or known not in self._sizes:
            self._sizes[known] = item_size(self._peek.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item"))
        return self._sizes[known]

    def _before(self, params, model, context, **kwargs):
        if model.name not in ("GetItem", "UpdateItem", "PutItem"):
            return
        request = json.loads(params["body"])
        table = request["TableName"]
        names = self._keys(table)
        key = request.get("Key") or {n: request["Item"][n] for n in names}
        context["meter"] = (table, key, json.dumps(key[names[0]], sort_keys=True), request,
                            self._size(table, key, request=request) if model.name != "GetItem" else 0)

    def _after(self, http_response, parsed, model, context, **kwargs):
        if "meter" not in context:
            return
        table, key, partition, request, before = context.pop("meter")
        second = self._clock.now_ms() // 1000
        if model.name == "GetItem":
            size = item_size(parsed.get("Item"))
            self.reads[(table, partition, second)] += read_units(size, bool(request.get("ConsistentRead")))
            return
        if parsed.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            self.failed_conditions += 1
            after = before  # unchanged
        else:
            after = self._size(table, key, fresh=True, request=request)
        self.largest_item[table] = max(self.largest_item[table], before, after)
        self.writes[(table, partition, second)] += write_units(max(before, after))

    def peak_writes(self, table: str | None = None) -> tuple[float, str]:
        """The most write units one partition key took in one second, and that key."""
        return max(((units, part) for (t, part, _), units in self.writes.items() if table in (None, t)),
                   default=(0.0, ""))

    def peak_reads(self, table: str | None = None) -> tuple[float, str]:
        return max(((units, part) for (t, part, _), units in self.reads.items() if table in (None, t)),
                   default=(0.0, ""))


class RetriedAfterReadTimeout:
    """A low-level DynamoDB client whose UpdateItem calls reach the table twice, the caller seeing
    only the second answer: botocore's retry after a read time-out, when the first request had
    been applied and only its answer was lost."""

    def __init__(self, client) -> None:
        self._client = client
        self.repeated = 0

    def update_item(self, **kwargs) -> dict:
        try:
            self._client.update_item(**kwargs)
        except Exception:  # noqa: BLE001 - the first answer is lost whatever it was
            pass
        self.repeated += 1
        return self._client.update_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class ThrottledRunTask:
    """A boto3 session whose ECS clients refuse RunTask while `refusals` is left, as an account over
    Fargate's RunTask rate does (ThrottlingException, "Rate exceeded", after botocore's retries), or
    with `capacity` as RunTask answers when Fargate has no capacity (no task, a failure whose reason
    says so). Every other call, and every RunTask after the refusals, reaches the real client.
    As ECS does (API reference, "Ensuring idempotency"), a RunTask repeated with a client token it
    has answered returns that first answer: a capacity refusal is kept for its token (a throttle is
    no answer, and is not kept)."""

    CAPACITY_REASON = "Capacity is unavailable at this time. Please try again later or in a different availability zone"

    def __init__(self, session, refusals: int, capacity: bool = False) -> None:
        self._session = session
        self.refusals = refusals
        self._capacity = capacity
        self.refused = 0
        self.started = 0
        self.answered: dict[str, dict] = {}  # clientToken -> the capacity refusal answered to it

    def client(self, service: str, *args, **kwargs):
        real = self._session.client(service, *args, **kwargs)
        return _RefusingEcs(real, self) if service == "ecs" else real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


class _RefusingEcs:
    def __init__(self, client, double: ThrottledRunTask) -> None:
        self._client = client
        self._double = double

    def run_task(self, **kwargs) -> dict:
        from botocore.exceptions import ClientError

        double = self._double
        token = kwargs.get("clientToken")
        if token in double.answered:
            double.refused += 1
            return double.answered[token]
        if double.refusals <= 0:
            double.started += 1
            return self._client.run_task(**kwargs)
        double.refusals -= 1
        double.refused += 1
        if double._capacity:
            answer = {"tasks": [], "failures": [{"arn": kwargs.get("taskDefinition"),
                                                 "reason": ThrottledRunTask.CAPACITY_REASON}]}
            if token:
                double.answered[token] = answer
            return answer
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                           "ResponseMetadata": {"HTTPStatusCode": 400}}, "RunTask")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
