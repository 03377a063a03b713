"""Tenant fairness at hand-off: one tenant's herd must not make another tenant's jobs late.

In AWS the contention is at the workers, not at the tick: the tick hands a bucket off two minutes
ahead, and every message of a due second becomes visible in its lane at that second. A tenant
with 20,000 jobs due at midnight puts 20,000 messages in the lane at once; SQS delivers a standard
queue's visible messages in no particular order, so another tenant's 100 jobs of that second wait
behind a random share of the herd: up to the herd's whole drain time.

So the hand-off spreads each tenant's fires in time: per segment, at most `per_second` FIRE
dispatches of one tenant become visible in any one second (the rest with a longer SQS delay, in
due order). A herd then enters the lane at the rate the workers drain it, and every other
tenant's messages of that second are among few: they start on time. The herd is late by what it
would have been late anyway (it cannot all run in its second: the lane's capacity is the limit),
and its own executions say so (`lateMs`, FireLatenessMs). Costs nothing: the delay is the one
each message carries anyway. The budget is per segment (each segment's tick sees its share of a
tenant's jobs); the stack's `tenant_fires_per_second` divided by the segments. 0 turns it off.
Measured by `bench fairness` (docs/performance.md)."""
from __future__ import annotations

import math
import threading
from collections import defaultdict

PRUNE_AFTER_SECONDS = 900  # SQS's longest delay: nothing older can still be placed


class FairShare:
    def __init__(self, fires_per_second: int, segments: int) -> None:
        self.per_second = math.ceil(fires_per_second / max(1, segments)) if fires_per_second > 0 else 0
        self._used: dict[tuple[str, int], int] = defaultdict(int)
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()
        self._pruned_at = 0

    def visible_at(self, tenant_id: str, due_ms: int) -> int:
        """When this tenant's fire due at `due_ms` may become visible: its due instant while the
        tenant has room in that second, else the same offset in its first second with room."""
        if not self.per_second:
            return due_ms
        second = due_ms // 1000
        with self._lock:
            self._prune(second)
            if self._used[(tenant_id, second)] < self.per_second:
                self._used[(tenant_id, second)] += 1
                return due_ms
            later = max(self._next.get(tenant_id, second + 1), second + 1)
            while self._used[(tenant_id, later)] >= self.per_second:
                later += 1
            self._used[(tenant_id, later)] += 1
            self._next[tenant_id] = later
            return later * 1000 + due_ms % 1000

    def _prune(self, second: int) -> None:
        if second - self._pruned_at < PRUNE_AFTER_SECONDS:
            return
        self._pruned_at = second
        for key in [k for k in self._used if k[1] < second - PRUNE_AFTER_SECONDS]:
            del self._used[key]
