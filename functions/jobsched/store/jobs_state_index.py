"""The Jobs table's state index, sharded: `JobsByStateShard` (partition `stateShard` =
"<tenant>#<state>#<n>", sort `jobId`, keys only), n a stable hash of the job id mod STATE_SHARDS.

Why sharded: the index it replaces, `JobsByState` (partition `tenantId`, sort `state`), put all of a
tenant's entries on one index partition key, and a completion moves a job's entry (its sort key
changes: a delete and a put on the index). One tenant completing 10,000 one-time jobs a second
wrote 20,000 WCU a second there, 10,000 more for its creates' entries; the key's 1,000 WCU a second
throttles the table's own writes past that (GSI back pressure), about 500 completions a second.

Why 32: one tenant at 10,000 one-time jobs a second writes, per second, 10,000 entries into
"<tenant>#ACTIVE#n" keys (creates) and 10,000 out of them (completions), and 10,000 into
"<tenant>#COMPLETED#n" keys (completions) and, once their retention ends, 10,000 out of them (TTL
deletes): 20,000 one-unit writes a second on each state's keys. Over 32 keys that is 625 WCU a second
per key, 62% of the 1,000 (the completions alone: 313); a crc32 spread of 10,000 ids a second over
32 keys varies by about 2% second to second, and the rest is the headroom for a second in which
more jobs than the average end (a herd due at :00). 64 would halve it and double the queries of
every list (one per shard); 16 would be 125% of the limit.

Why the state is in the partition key (not the sort key): a list by state reads its entries in job
id order from every shard and merges them, so its cursor is one job id (all 32 queries resume after
it: `jobId > :after`), and stays small and opaque (a per-shard position would be 32 of them).

The move (CloudFormation adds or deletes one index of a table per update): this release adds the
index, writes `stateShard` with every job and lists through the old index (Settings.jobs_state_index);
`jobsched upgrade state-shards` (backfill_state_shards) gives the jobs written before it their
shard; then a deployment with `-c stateIndex=JobsByStateShard` lists through this index and deletes
the old one."""
from __future__ import annotations

import heapq
import json
import zlib
from typing import Any, Callable, Iterator

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from jobsched.domain.jobs import tenant_of
from jobsched.store.dynamo import _condition_lost, plain

JOBS_BY_STATE_SHARD_INDEX = "JobsByStateShard"

STATE_SHARD_ATTRIBUTE = "stateShard"

STATE_SHARDS = 32

# The upgrade's record, beside the tenants' items: a tenant id never holds "#" (is_taggable).
UPGRADE_KEY = {"tenantId": "#upgrade", "jobId": "stateShard"}


def state_shard(tenant_id: str, state: str, job_id: str) -> str:
    """The job's key in JobsByStateShard: its tenant, its state and its shard (stable per job)."""
    return f"{tenant_id}#{state}#{zlib.crc32(job_id.encode('utf-8')) % STATE_SHARDS}"


def merged_items(query_part: Callable[[Any, dict | None], dict], parts, map_parts: Callable) -> Iterator[dict]:
    """The items of several queries (one a part: a shard of an index, a key of the table), each in
    job id order, merged in job id order: each part's first page in parallel (`map_parts`), then a
    part's next page when its last item is next."""
    parts = list(parts)
    firsts = list(map_parts(lambda part: query_part(part, None), parts))
    heads: list[tuple[str, int]] = []
    buffers: dict[int, list[dict]] = {}
    more: dict[int, dict | None] = {}
    for i, answer in enumerate(firsts):
        buffers[i] = list(reversed(answer.get("Items", [])))
        more[i] = answer.get("LastEvaluatedKey")
        if buffers[i]:
            heapq.heappush(heads, (str(buffers[i][-1]["jobId"]), i))
    while heads:
        _, i = heapq.heappop(heads)
        yield buffers[i].pop()
        if not buffers[i] and more[i]:
            answer = query_part(parts[i], more[i])
            buffers[i] = list(reversed(answer.get("Items", [])))
            more[i] = answer.get("LastEvaluatedKey")
        if buffers[i]:
            heapq.heappush(heads, (str(buffers[i][-1]["jobId"]), i))


def shard_query(table, tenant_id: str, state: str, after: str | None, page: int) -> Callable[[int, dict | None], dict]:
    """One shard's page of entries after the job id `after` (a cursor's), in job id order."""
    def query(shard: int, start: dict | None) -> dict:
        condition = Key(STATE_SHARD_ATTRIBUTE).eq(f"{tenant_id}#{state}#{shard}")
        if after is not None:
            condition = condition & Key("jobId").gt(after)
        kwargs: dict[str, Any] = {"IndexName": JOBS_BY_STATE_SHARD_INDEX, "KeyConditionExpression": condition,
                                  "Limit": page}
        if start:
            kwargs["ExclusiveStartKey"] = start
        return table.query(**kwargs)
    return query


# --- the upgrade: every job item gets its stateShard (resumable, repeatable) -----------------

def backfill_state_shards(table, pages: int | None = None, page_size: int = 500,
                          progress: Callable[[dict], None] = lambda counts: None) -> dict:
    """Give every job item the `stateShard` of its state as it is now, page by page of a Scan whose
    position is recorded after each page (UPGRADE_KEY), so a run stopped anywhere resumes there;
    the last page records it done (then `-c stateIndex=JobsByStateShard` may be deployed). Each write is
    conditional on the state it read (a job whose state changed meanwhile is read again: a change
    made by this release's code already wrote the right shard). Safe to run again (a job already
    right is not written). `pages`: stop after that many (None: to the end). Returns the counts."""
    record = table.get_item(Key=UPGRADE_KEY, ConsistentRead=True).get("Item") or {}
    start = json.loads(record["position"]) if record.get("position") and not record.get("done") else None
    counts = {"read": 0, "written": 0, "pages": 0, "done": False}
    while pages is None or counts["pages"] < pages:
        kwargs: dict[str, Any] = {"ProjectionExpression": "tenantId, jobId, #state, #shard", "Limit": page_size,
                                  "ExpressionAttributeNames": {"#state": "state", "#shard": STATE_SHARD_ATTRIBUTE},
                                  "FilterExpression": Attr("state").exists(),
                                  "ConsistentRead": True}  # a state written just before is read as it is
        if start:
            kwargs["ExclusiveStartKey"] = start
        answer = table.scan(**kwargs)
        for raw in answer.get("Items", []):
            counts["read"] += 1
            counts["written"] += _give_shard(table, plain(raw))
        start = answer.get("LastEvaluatedKey")
        counts["pages"] += 1
        counts["done"] = start is None
        table.put_item(Item={**UPGRADE_KEY, "done": counts["done"],
                             "position": json.dumps(plain(start)) if start else ""})
        progress(counts)
        if start is None:
            break
    return counts


def _give_shard(table, item: dict) -> int:
    """1 when this wrote the item's stateShard, 0 when it was right (or the job is gone)."""
    for _ in range(5):
        want = state_shard(tenant_of(item["tenantId"]), item["state"], item["jobId"])  # its key may be a shard
        if item.get(STATE_SHARD_ATTRIBUTE) == want:
            return 0
        try:
            table.update_item(Key={"tenantId": item["tenantId"], "jobId": item["jobId"]},
                              UpdateExpression="SET #shard = :want",
                              ConditionExpression="#state = :seen",
                              ExpressionAttributeNames={"#state": "state", "#shard": STATE_SHARD_ATTRIBUTE},
                              ExpressionAttributeValues={":want": want, ":seen": item["state"]})
            return 1
        except ClientError as exc:
            if not _condition_lost(exc, "state changed"):
                raise
        current = table.get_item(Key={"tenantId": item["tenantId"], "jobId": item["jobId"]},
                                 ConsistentRead=True).get("Item")
        if current is None or "state" not in current:
            return 0
        item = plain(current)
    raise RuntimeError(f"job {item['jobId']} changed state five times while its stateShard was written; run again")
