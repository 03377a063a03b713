"""The Timers table: the timer wheel, a bucket per minute and segment in slices."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator

from jobsched.domain.timers import Timer
from jobsched.store.dynamo import BATCH_WRITE_LIMIT, WRITE_PARALLELISM, batch_until_done, raw_client
class TimerPage(list):
    """A page of a bucket's timers; `last` when DynamoDB said no more follow."""

    def __init__(self, timers, last: bool = False) -> None:
        super().__init__(timers)
        self.last = last


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

    def put_many(self, timers: list[Timer]) -> None:
        """Timer keys are unique per action and their content immutable, so a repeated put
        rewrites identical data: idempotent without a condition, and batchable."""
        if len(timers) == 1:
            self._client.put_item(TableName=self._name, Item=timers[0].to_wire())
            return
        unique = list({(t.bucket, t.sort_key): t for t in timers}.values())
        requests = [{self._name: [{"PutRequest": {"Item": t.to_wire()}} for t in unique[start:start + BATCH_WRITE_LIMIT]]}
                    for start in range(0, len(unique), BATCH_WRITE_LIMIT)]

        def write(request: dict) -> None:
            batch_until_done(lambda r: self._client.batch_write_item(RequestItems=r), request,
                             "UnprocessedItems", self._sleep)

        if len(requests) == 1:
            write(requests[0])
            return
        # The batches of one page in parallel (their order does not matter: each timer is written
        # whole, and the bucket is marked done only after all of them). A failure raises here.
        list(self._pool.map(write, requests))

    def pages(self, bucket: str, after_sk: str | None = None) -> Iterator[list[Timer]]:
        """Due-ordered pages of one bucket (after `after_sk` when given), strongly consistent so
        that a timer written before the bucket was claimed is always seen."""
        start: dict | None = {"bucket": {"S": bucket}, "sk": {"S": after_sk}} if after_sk else None
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
            if items:
                yield TimerPage((Timer.from_wire(i) for i in items), last=not start)
            if not start:
                return
