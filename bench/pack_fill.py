"""The pack fill a rate gives: entries per lane message, from how the tick cuts its sends.

A tick hands one (minute, segment) bucket off slice after slice, a page of timers at a time
(store/timers.py: `page_size` timers, due order), and Lanes.send packs the FIRE dispatches of one
page by (segment, lane, due second) into packs of at most MAX_PACK_ENTRIES (domain/packs.py). So a
pack holds the fires of one page that share a due second: at a rate r a second, a (segment, slice)
bucket holds r / (segments x slices) fires a second, and a page boundary cuts a second's fires in
two. This counts that cut for the fires of one minute due on whole seconds (as `bench e2e`'s jobs
are: `* * * * *` with up to 59 s of jitter), one lane, tenant fairness off (the default: a fire is
visible at its due instant), and no entry over the pack's byte limit.

`bench e2e` runs a sample of the load (1/50 of the tenants at 10,000 a second) with the tick's page
cut to the same fraction (e2e_model.py), and measures the fill of what its worker receives; the
same count at the sample's rate and page gives the figure it measured, and at the full rate and
the code's page, the fill of a deployment running that rate."""
from __future__ import annotations

import math
import random
from collections import Counter

from jobsched.domain.packs import MAX_PACK_ENTRIES
from jobsched.domain.timers import TIMER_SLICES

PAGE_SIZE = 500  # store/timers.py's TimersStore page_size (tests/bench asserts they agree)


def pack_fill(rate_per_s: float, segments: int, sample: float = 1.0, seed: int = 7) -> float:
    """Mean entries a pack when `rate_per_s` fires a second (whole seconds, uniform over the minute)
    are handed off by `segments` segments; `sample` < 1 runs as `bench e2e` does (that fraction of
    the fires, the page cut to the same fraction)."""
    page = max(1, round(PAGE_SIZE * sample))
    per_bucket = rate_per_s * sample * 60 / (segments * TIMER_SLICES)  # fires of one slice's minute
    rng = random.Random(seed)
    entries = packs = 0
    for _ in range(segments):
        for fires in _pages(rng, per_bucket, page):
            for count in Counter(fires).values():
                entries += count
                packs += math.ceil(count / MAX_PACK_ENTRIES)
    return entries / max(packs, 1)


def _pages(rng: random.Random, per_bucket: float, page: int):
    """One segment's pages (each a list of due seconds), as Ticker._pages yields them: each slice
    read `page` timers at a time, consecutive slices' last pages merged up to `page`."""
    merged: list[int] = []
    for _ in range(TIMER_SLICES):
        n = int(per_bucket) + (rng.random() < per_bucket - int(per_bucket))
        seconds = sorted(rng.randrange(60) for _ in range(n))
        for start in range(0, n, page):
            part = seconds[start:start + page]
            if merged and len(merged) + len(part) > page:
                yield merged
                merged = []
            merged = merged + part
            if start + page < n:  # more follow in this slice
                yield merged
                merged = []
    if merged:
        yield merged
