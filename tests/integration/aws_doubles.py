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
