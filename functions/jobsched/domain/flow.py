"""Flow control's shards: how a key's concurrency slots and per-second rate are spread over items
of bounded size and write rate (docs/architecture.md, "Flow control", has the figures).

A single item per key fails both of DynamoDB's limits: a slot map of 10,000 entries passes the
400 KB item size, and long before that every start is billed on the whole map (an update is billed
on the larger of the item before and after), so one key tops out at a few starts a second; one
counter item per second takes at most 1,000 writes a second, failed conditions included."""
from __future__ import annotations

import zlib

# A slot-map item holds at most this many slots. An entry is the execution id (about 50 bytes,
# up to about 130 for a step of a run) and a 13-digit lease: 8 entries keep the item near 1 KB,
# so each take or give-back is billed 1 write unit (2 at worst).
SLOTS_PER_ITEM = 8
# A rate counter item admits at most this many starts a second: with the failed conditions of the
# executions it turns away (each billed 1 write unit) it stays below 1,000 write units a second.
RATE_PER_ITEM = 500
# What validation accepts (api/models.py): 1,250 slot items and 20 counter items a key.
MAX_CONCURRENCY = 10_000
MAX_RATE_PER_SECOND = 10_000


def shard_count(limit: int, per_item: int) -> int:
    return max(1, -(-limit // per_item))


def shard_limit(limit: int, shards: int, shard: int) -> int:
    """Shard `shard`'s part of `limit`: the parts differ by at most one and sum to `limit`."""
    return limit // shards + (1 if shard < limit % shards else 0)


def slot_shard(execution_id: str, max_concurrency: int) -> int:
    """The slot item an execution always uses (take, extend, give back): fixed by its id, so a
    give-back finds the slot without a read."""
    return zlib.crc32(execution_id.encode()) % shard_count(max_concurrency, SLOTS_PER_ITEM)


# SQS's longest delay: a backfill's sends are spread over at most this.
MAX_SPREAD_MS = 900_000


def backfill_spread_ms(index: int, count: int, max_concurrency: int | None, rate_per_second: int | None) -> int:
    """When occurrence `index` of a backfill of `count` should become visible, after the first: at
    about the pace the key admits (ratePerSecond, or maxConcurrency starts a second), so that a
    backfill does not send all its executions at once to be held back together; squeezed into
    SQS's 15-minute delay when that pace would take longer (the rest are held back as usual)."""
    per_second = min(x for x in (max_concurrency, rate_per_second) if x is not None)
    if count * 1000 // per_second > MAX_SPREAD_MS:
        return index * MAX_SPREAD_MS // count
    return index * 1000 // per_second
