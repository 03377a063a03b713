"""The Timers table: the timer wheel, a bucket per minute and segment in slices."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Callable, Iterator

from jobsched.domain.timer_packs import TimerExpander, pack_timers
from jobsched.domain.timers import Timer
from jobsched.store.dynamo import BATCH_WRITE_LIMIT, WRITE_PARALLELISM, batch_until_done, raw_client


class TimerPage(list):
    """A page of a bucket's timers (packs expanded); `last` when DynamoDB said no more follow;
    `last_sk` the sort key of the last ITEM read (a pack's, not its last timer's): the position to
    resume after."""

    def __init__(self, timers, last: bool = False, last_sk: str | None = None) -> None:
        super().__init__(timers)
        self.last = last
        self.last_sk = last_sk if last_sk is not None else (self[-1].sort_key if self else None)


class TimersStore:
    def __init__(self, dynamodb, table_name: str, page_size: int = 500,
                 sleep: Callable[[float], None] = time.sleep, client=None,
                 parallelism: int = WRITE_PARALLELISM) -> None:
        self._pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="batch-write")
        self._dynamodb = dynamodb
        self._client = client or raw_client(dynamodb)
        self._table = dynamodb.Table(table_name)
        self._name = table_name
        self.page_size = page_size
        self._sleep = sleep

    def put_many(self, timers: list[Timer], pack: bool = False, written_ms: int | None = None) -> None:
        """Timer keys are unique per action and their content immutable, so a repeated put
        rewrites identical data: idempotent without a condition, and batchable. `pack`: the next
        FIRE timers go into timer packs, one item per (bucket, up to 100 timers), whose keys and
        contents follow from their members (domain/timer_packs.py): idempotent too. `written_ms`:
        the writer's clock before the put, stamped on every timer and pack (`writtenMs`)."""
        if written_ms is not None:
            timers = [replace(t, written_ms=written_ms) for t in timers]
        packs, singles = pack_timers(timers) if pack else ([], timers)
        if len(singles) == 1 and not packs:
            self._client.put_item(TableName=self._name, Item=singles[0].to_wire())
            return
        items = packs + [t.to_wire() for t in {(t.bucket, t.sort_key): t for t in singles}.values()]
        if len(items) == 1:
            self._client.put_item(TableName=self._name, Item=items[0])
            return
        requests = [{self._name: [{"PutRequest": {"Item": item}} for item in items[start:start + BATCH_WRITE_LIMIT]]}
                    for start in range(0, len(items), BATCH_WRITE_LIMIT)]

        def write(request: dict) -> None:
            batch_until_done(lambda r: self._client.batch_write_item(RequestItems=r), request,
                             "UnprocessedItems", self._sleep)

        if len(requests) == 1:
            write(requests[0])
            return
        # The batches of one page in parallel (their order does not matter: each timer is written
        # whole, and the bucket is marked done only after all of them). A failure raises here.
        list(self._pool.map(write, requests))

    def pages(self, bucket: str, after_sk: str | None = None) -> Iterator[TimerPage]:
        """Due-ordered pages of one bucket (after `after_sk` when given), strongly consistent so
        that a timer written before the bucket was claimed is always seen. Packs are expanded; a
        page ends at an item's end once it holds `page_size` timers (a query answer of packs can
        hold many times that), so a page's `last_sk` is always an item's key."""
        start: dict | None = {"bucket": {"S": bucket}, "sk": {"S": after_sk}} if after_sk else None
        expander = TimerExpander()
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self._name,
                "KeyConditionExpression": "#b = :b",
                "ExpressionAttributeNames": {"#b": "bucket"},
                "ExpressionAttributeValues": {":b": {"S": bucket}},
                "ConsistentRead": True,
                "Limit": self.page_size,
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            answer = self._client.query(**kwargs)
            items = answer.get("Items", [])
            start = answer.get("LastEvaluatedKey")
            timers: list[Timer] = []
            for index, item in enumerate(items):
                timers.extend(expander.expand((item,)))
                if len(timers) >= self.page_size and index + 1 < len(items):
                    yield TimerPage(timers, last=False, last_sk=item["sk"]["S"])
                    timers = []
            if timers or (items and not start):
                yield TimerPage(timers, last=not start, last_sk=items[-1]["sk"]["S"])
            if not start:
                return
