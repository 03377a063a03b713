"""The pack fill a rate gives: entries per lane message, from how the tick cuts its sends.

A tick hands one (minute, segment) bucket off slice after slice, a page at a time (store/timers.py:
a page ends at an item's end once it holds `page_size` timers; service/tick.py merges consecutive
slices' last pages up to `page_size`), and Lanes.send packs the FIRE dispatches of one page by
(segment, lane, due second) into packs of at most MAX_PACK_ENTRIES (domain/packs.py). So a pack
holds the fires of one page that share a due second, and a page boundary cuts a second's fires in
two.

Where the page boundaries fall depends on what the bucket holds:
- a job's first timers (written by its create, or `bench e2e`'s load) are single items, read in
  due order: a page covers a due span of its own, and only the seconds at its two ends are cut;
- every later timer of a recurring job is written by the hand-off of the page before, in a timer
  pack (domain/timer_packs.py): a page's next timers grouped by the bucket slice they fall in, one
  item per slice, sorted by its earliest timer. A slice of the next minute then holds a pack from
  every page of the minute before, their due spans overlapping, and its pages (a few packs each)
  cover wider, overlapping spans: more of a second's fires fall on either side of a boundary.
  This is what a deployment running a rate steadily sees (`steady_pack_fill`).

This counts that for fires spread uniformly over the minute at millisecond instants (as `bench
e2e`'s jobs are: `* * * * *` with up to 59 s of jitter, the same offset every minute), one lane,
tenant fairness off (the default: a fire is visible at its due instant), and no entry over the
pack's byte limit. The next minute's slice of a timer is drawn at random (domain/timers.py
slice_of: sha256 of the job and minute).

`bench e2e` runs whole segments (`pack_fill(rate, segments, minutes=3)` gives its sustained
scenario's run from idle: the first minute of single timers, then two of timer packs), or a sample
of the tenants with the tick's page cut to the same fraction (`sample`); `bench cost` prices the
fill of a minute of timer packs at the deployed template's segments."""
from __future__ import annotations

import math
import random
from collections import Counter

from jobsched.domain.packs import MAX_PACK_ENTRIES
from jobsched.domain.timer_packs import PACK_MAX_TIMERS, second_runs
from jobsched.domain.timers import TIMER_SLICES

PAGE_SIZE = 500  # store/timers.py's TimersStore page_size (tests/bench asserts they agree)
JITTER_MS = 59_000  # bench e2e's jobs: jitterSec 59, an offset in [0, 59,000] ms
# Segments simulated at most: each runs the same process, so more only average more samples.
SIMULATED_SEGMENTS = 2


def pack_fill(rate_per_s: float, segments: int, sample: float = 1.0, seed: int = 7, minutes: int = 1) -> float:
    """Mean entries a pack over a run of `minutes` from idle (the first minute's timers single
    items, the later ones timer packs written by the hand-offs before), when `rate_per_s` fires a
    second are handed off by `segments` segments; `sample` < 1 runs as `bench e2e`'s tenant sample
    did (that fraction of the fires, the page cut to the same fraction)."""
    entries = packs = 0
    for e, p in minute_fills(rate_per_s, segments, sample, seed, minutes):
        entries, packs = entries + e, packs + p
    return entries / max(packs, 1)


# Minutes a run from the widest start takes to settle: from pages that each sampled their whole
# minute, timer packs of dense seconds bring a slice's pages back to due order within 4 minutes at
# 10,000 a second (28.6, 46.1, 64.8, 77.2, 78.3, 78.2 entries a pack), 2 at 1,000.
SETTLE_MINUTES = 6


def steady_pack_fill(rate_per_s: float, segments: int, seed: int = 7) -> float:
    """Mean entries a pack of a deployment that has run `rate_per_s` recurring fires a second for
    hours: every timer a timer pack written by a hand-off. Whatever the start, the pages settle
    where the timer packs' rule (domain/timer_packs.py second_runs) holds them; this starts from
    the widest (every page a sample of its whole minute, as packs spanning their page's due range
    left them) and gives the fill of the SETTLE_MINUTES-th minute."""
    e, p = minute_fills(rate_per_s, segments, 1.0, seed, SETTLE_MINUTES, mixed=True)[-1]
    return e / max(p, 1)


def minute_fills(rate_per_s: float, segments: int, sample: float = 1.0, seed: int = 7,
                 minutes: int = 1, mixed: bool = False) -> list[tuple[int, int]]:
    """(entries, packs) of each minute of a run from idle: the first minute's timers single items
    in due order; with `mixed`, timer packs written by pages that each held a random sample of
    the minute's fires (the limit a long run approaches)."""
    page = max(1, round(PAGE_SIZE * sample))
    per_slice = rate_per_s * sample * 60 / (segments * TIMER_SLICES)  # fires of one slice's minute
    rng = random.Random(seed)
    out = [[0, 0] for _ in range(minutes)]
    for _ in range(min(segments, SIMULATED_SEGMENTS)):
        slices = []
        for _ in range(TIMER_SLICES):
            n = int(per_slice) + (rng.random() < per_slice - int(per_slice))
            slices.append([[d] for d in sorted(rng.randint(0, JITTER_MS) for _ in range(n))])
        if mixed:
            fires = [d for items in slices for (d,) in items]
            rng.shuffle(fires)
            slices = _next_minute((fires[start:start + page] for start in range(0, len(fires), page)), rng)
        for minute in range(minutes):
            counted = []
            for timers in _tick_pages(slices, page):
                for count in Counter(d // 1000 for d in timers).values():
                    out[minute][0] += count
                    out[minute][1] += math.ceil(count / MAX_PACK_ENTRIES)
                counted.append(timers)
            slices = _next_minute(counted, rng)
    return [(e, p) for e, p in out]


def _next_minute(pages, rng: random.Random) -> list[list[list[int]]]:
    """The next minute's slices (items sorted by their earliest timer, as the Timers table's sort
    key orders them) from the next timers the pages' hand-offs write."""
    following: list[list[list[int]]] = [[] for _ in range(TIMER_SLICES)]
    for timers in pages:
        _write_next(timers, following, rng)
    return [sorted(items, key=lambda item: item[0]) for items in following]


def _write_next(timers: list[int], following: list[list[list[int]]], rng: random.Random) -> None:
    """A page's next timers (a minute later: due offsets in the minute stay the same), grouped by
    the slice they fall in and, in it, by domain/timer_packs.py's `second_runs` (a dense due second
    alone, a run of sparse ones together), each group in timer packs as pack_timers cuts them: due
    order, balanced chunks of at most PACK_MAX_TIMERS (a group of one a single item)."""
    by_slice: dict[int, list[int]] = {}
    for due in timers:
        by_slice.setdefault(rng.randrange(TIMER_SLICES), []).append(due)
    for slice_, dues in by_slice.items():
        dues.sort()
        for first, end in second_runs(dues):
            group = dues[first:end]
            count = -(-len(group) // PACK_MAX_TIMERS)
            size = -(-len(group) // count)
            for start in range(0, len(group), size):
                following[slice_].append(group[start:start + size])


def _store_pages(items: list[list[int]], page: int):
    """One slice's pages as TimersStore.pages reads them (a query answer of `page` items; a page
    ends at an item's end once it holds `page` timers): (timers, last)."""
    for first in range(0, max(len(items), 1), page):
        answer = items[first:first + page]
        more = first + page < len(items)
        timers: list[int] = []
        for index, item in enumerate(answer):
            timers.extend(item)
            if len(timers) >= page and index + 1 < len(answer):
                yield timers, False
                timers = []
        if timers or (answer and not more):
            yield timers, not more


def _tick_pages(slices: list[list[list[int]]], page: int):
    """One segment's pages (each a list of due offsets), as Ticker._pages yields them: each
    slice's store pages, a slice's last page merged with the next slices' while they fit in `page`."""
    merged: list[int] = []
    for items in slices:
        for timers, last in _store_pages(items, page):
            if merged and len(merged) + len(timers) > page:
                yield merged
                merged = []
            merged = merged + timers
            if not last:  # more follow in this slice
                yield merged
                merged = []
    if merged:
        yield merged
