"""Timer packs: the next FIRE timers of many recurring jobs in one Timers item.

A hand-off (the tick's page, a writer's direct dispatch) writes its next FIRE timers grouped by
the bucket they fall in (minute, segment, slice) and their due second, a run of consecutive sparse
seconds (each with a single timer of the bucket in this hand-off) grouped together
(`second_runs`): each group of two or more becomes one or more pack items of at most
PACK_MAX_TIMERS timers, instead of an item (and a write unit) per timer. A group of one stays a
single timer item, as every other timer (RETRY, LEASE, CHECK, ...) does.

The pack lives in its timers' bucket, so the tick's query of a bucket reads single timers and packs
alike and expands a pack into its timers. Its sort key is `<earliest due-ms>#PACK#<digest>`: it
sorts among the bucket's timers by its earliest one, and the digest of its members makes the key a
function of its contents. The same page handed off twice (a crash before the tick saved its
position) therefore writes the same items again: idempotent, as single timers are. Should a page
be handed off again with other boundaries, a timer may sit in two packs: the tick drops the
repeat when it reads the slice (TimerExpander), and a repeat the tick cannot see (the two copies
read in two runs) is a duplicate send, which the worker's claim absorbs, as for any re-sent page.

The tick's saved position is the sort key of the last ITEM it handed off, never of a packed
timer: a pack holds timers of several due instants, and single timers may sort between them.
"""
from __future__ import annotations

import hashlib
import json
import zlib
from typing import Iterable, Iterator

from jobsched.domain.timers import TIMER_TTL_SECONDS, Timer, TimerKind

# A pack holds at most this many timers, and at most PACK_MAX_BYTES of their encoding before
# compression (an entry is about 60-70 bytes with a short tenant id): about 2-4 KB compressed,
# far under DynamoDB's 400 KB item, a few write units in one request on one key.
PACK_MAX_TIMERS = 100
PACK_MAX_BYTES = 32_000
PACK_KIND = "PACK"
COMPRESS_WINDOW_BITS = 12
COMPRESS_MEM_LEVEL = 4
# A due second holding fewer timers than this (of one bucket, in one hand-off) is sparse: a run of
# consecutive sparse seconds (no denser second between them in the bucket's due order) makes one
# group. One timer a second: a quiet deployment's page (one fire a second spread over 8 slices) is
# all sparse seconds, one group a slice as before packs of one second; a page of 500 timers at
# 10,000 a second holds about 39 a slice and second, and its sparse seconds are a page's cut ends
# (never two in a row), so its packs stay of one second (docs/architecture.md, "Timer packs").
SPARSE_SECOND_TIMERS = 2
_SEPARATORS = (",", ":")


def packable(timer: Timer) -> bool:
    """A recurring job's next occurrence: a FIRE timer with nothing but its job to say."""
    return timer.kind is TimerKind.FIRE and timer.execution_id is None and timer.attempt == 1


def _entry(timer: Timer, base_ms: int) -> list:
    return [timer.due_ms - base_ms, timer.tenant_id, timer.job_id, timer.generation, timer.runs]


def _chunks(group: list[Timer]) -> Iterator[list[Timer]]:
    """Due-ordered runs of at most PACK_MAX_TIMERS timers (balanced: 101 timers are 51 + 50, not
    100 + 1) and PACK_MAX_BYTES of entries."""
    count = -(-len(group) // PACK_MAX_TIMERS)
    size = -(-len(group) // count)
    chunk: list[Timer] = []
    used = 0
    for timer in group:
        # Each entry's encoded length, with a generous base offset (the real one is smaller).
        cost = len(json.dumps(_entry(timer, 0), separators=_SEPARATORS)) + 1
        if chunk and (len(chunk) >= size or used + cost > PACK_MAX_BYTES):
            yield chunk
            chunk, used = [], 0
        chunk.append(timer)
        used += cost
    if chunk:
        yield chunk


def pack_timers(timers: Iterable[Timer], sparse_below: int | None = None) -> tuple[list[dict], list[Timer]]:
    """(pack items in DynamoDB's wire format, timers to write as single items). The FIRE timers of a
    bucket are deduplicated by key and packed in due order, grouped by `second_runs`; a group of
    one of them, and every other kind of timer, stay single. `sparse_below`: second_runs'."""
    buckets: dict[tuple[str, bool], dict[str, Timer]] = {}
    singles: list[Timer] = []
    for timer in timers:
        if packable(timer):
            # Sole timers (Timer.sole) apart: a pack says it of all its timers.
            buckets.setdefault((timer.bucket, timer.sole), {})[timer.sort_key] = timer
        else:
            singles.append(timer)
    packs: list[dict] = []
    for (bucket, _), members in buckets.items():
        ordered = [members[k] for k in sorted(members)]  # due order: a sort key starts with its due-ms
        for start, end in second_runs([t.due_ms for t in ordered], sparse_below):
            if end - start == 1:
                singles.append(ordered[start])
                continue
            for chunk in _chunks(ordered[start:end]):
                if len(chunk) == 1:
                    singles.append(chunk[0])
                else:
                    packs.append(pack_item(bucket, chunk))
    return packs, singles


def second_runs(dues_ms: list[int], sparse_below: int | None = None) -> list[tuple[int, int]]:
    """The groups of a bucket's due-ordered instants, as index ranges [start, end): each due second
    holding `sparse_below` (SPARSE_SECOND_TIMERS) or more alone, each run of consecutive sparse
    seconds together (`sparse_below` 1: every second alone, as `bench cost` prices the rule).

    A dense second alone keeps the tick's pages of the next minute (a slice's items in order of
    their earliest timer) in due order, and the fires of a second in one page (one lane message):
    packs spanning their page's whole due range made the next minute's pages wider, minute after
    minute, until each page sampled the whole minute (9 entries a lane message instead of 78 at
    10,000 a second). A run of sparse seconds spans only seconds with a single timer here, between
    two dense ones: where seconds are that sparse, a page spans many of them anyway."""
    seconds: list[tuple[int, int]] = []  # (start, end) of each due second
    for index, due in enumerate(dues_ms):
        if seconds and dues_ms[seconds[-1][0]] // 1000 == due // 1000:
            seconds[-1] = (seconds[-1][0], index + 1)
        else:
            seconds.append((index, index + 1))
    below = SPARSE_SECOND_TIMERS if sparse_below is None else sparse_below
    runs: list[tuple[int, int]] = []
    sparse_run = False
    for start, end in seconds:
        sparse = end - start < below
        if sparse and sparse_run:
            runs[-1] = (runs[-1][0], end)
        else:
            runs.append((start, end))
        sparse_run = sparse
    return runs


def pack_item(bucket: str, chunk: list[Timer]) -> dict:
    """One pack item (wire format) of due-ordered timers of one bucket."""
    base = chunk[0].due_ms
    digest = hashlib.sha256("\n".join(t.sort_key for t in chunk).encode()).hexdigest()[:16]
    body = json.dumps([_entry(t, base) for t in chunk], separators=_SEPARATORS).encode()
    item = {
        "bucket": {"S": bucket},
        "sk": {"S": f"{base:013d}#{PACK_KIND}#{digest}"},
        "kind": {"S": PACK_KIND},
        "dueMs": {"N": str(base)},
        "segment": {"N": str(chunk[0].segment)},
        "count": {"N": str(len(chunk))},
        "timers": {"B": compressed(body)},
        "expiresAt": {"N": str(chunk[-1].due_ms // 1000 + TIMER_TTL_SECONDS)},
    }
    # The write instant, once for the pack: its timers are written by one put, at one instant (the
    # latest, should they differ: a later instant only sends more of them per execution).
    written = [t.written_ms for t in chunk]
    if None not in written:
        item["writtenMs"] = {"N": str(max(written))}
    if chunk[0].sole:
        item["sole"] = {"N": "1"}
    return item


def compressed(body: bytes) -> bytes:
    """zlib's format at level 6 with a 4 KB window and a small hash table: what a pack's entries
    compress to is within a few bytes of the defaults' (each repeats its neighbours' tenant and id
    prefixes, not text from kilobytes back), and a small pack compresses ten times faster (zlib
    clears its default 256 KB of state on every call: 0.1 ms, more than the rest of a timer's
    hand-off). Any zlib reader takes it (the window is in the stream's header)."""
    packer = zlib.compressobj(6, zlib.DEFLATED, COMPRESS_WINDOW_BITS, COMPRESS_MEM_LEVEL)
    return packer.compress(body) + packer.flush()


def is_pack(item: dict) -> bool:
    return item.get("kind", {}).get("S") == PACK_KIND


def unpack(item: dict) -> list[Timer]:
    """The timers of a pack item (wire format), in due order."""
    base = int(item["dueMs"]["N"])
    segment = int(item["segment"]["N"])
    written = int(item["writtenMs"]["N"]) if "writtenMs" in item else None
    sole = "sole" in item
    return [Timer(base + offset, TimerKind.FIRE, tenant, job, generation, segment, runs=runs, written_ms=written,
                  sole=sole)
            for offset, tenant, job, generation, runs in json.loads(zlib.decompress(item["timers"]["B"]))]


class TimerExpander:
    """Reads the items of one slice of a bucket into timers: single timers as they are, packs
    expanded; a timer already read in this slice (the same occurrence in two packs) is dropped."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self.repeats = 0

    def expand(self, items: Iterable[dict]) -> list[Timer]:
        timers: list[Timer] = []
        for item in items:
            for timer in (unpack(item) if is_pack(item) else (Timer.from_wire(item),)):
                key = timer.sort_key
                if key in self._seen:
                    self.repeats += 1
                    continue
                self._seen.add(key)
                timers.append(timer)
        return timers
