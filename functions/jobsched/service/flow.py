"""Flow control (shared/API.md, "Flow control"): a tenant's executions sharing a key never run
more than maxConcurrency at once nor start more than ratePerSecond in any second. The excess is
not failed, not dropped and uses no attempt: before its claim, an execution that may not start
is sent again with a delay (its dispatch carries when it was first held back; the execution shows
`throttledMs`), and its message is deleted.

Every item is bounded in size and write rate (domain/flow.py, store/flow.py):
- Rate: per second, ceil(ratePerSecond / RATE_PER_ITEM) counter items, each admitting its share
  (a conditional ADD below it, expiring by TTL); a start tries a random counter, then one other.
- Concurrency: ceil(maxConcurrency / SLOTS_PER_ITEM) slot maps, each holding its share of the
  slots (execution id → the attempt's lease). An execution always uses the same map (by its id),
  so the slot is given back, extended and found again without a read. A worker that dies holding
  a slot leaves its lease; an execution that finds its map full gets the map back with the failed
  condition and reclaims the expired leases (a conditional remove on the lease it saw), so a
  crash never holds a slot past its lease. A long-running attempt's heartbeats extend its lease.
Held back, an execution tries again after a delay that grows with how long it has been held
(HOLD_FIRST_MS up to HOLD_MAX_MS, with jitter): a crowd of held executions costs the key's items
a few writes each, not one a second each."""
from __future__ import annotations

import random
from dataclasses import replace

from jobsched.domain.clock import Clock
from jobsched.domain.executions import Dispatch
from jobsched.domain.flow import (RATE_PER_ITEM, SLOTS_PER_ITEM, shard_count, shard_limit, slot_shard)
from jobsched.domain.jobs import Job
from jobsched.store.queues import Outgoing

# A held execution's first wait, and the longest: the wait is about the time it has been held so
# far, plus up to half again (jitter), so a crowd held together spreads out. The bound is short
# enough that a slot given back is soon found by one of the few still waiting (bench flow: a
# longer bound leaves slots idle while the last of a crowd drain), and the cost of the polls is
# bounded per container, not per execution (_full_slots, _used_up).
HOLD_FIRST_MS = 1_000
HOLD_MAX_MS = 30_000
RATE_COUNTER_TTL_S = 120
FULL_SLOTS_MEMO_MS = 1_000
USED_UP_MEMO_LIMIT = 10_000  # entries; cleared when passed (they matter for one second only)


def hold_delay_ms(held_for_ms: int, unit_random: float) -> int:
    span = min(HOLD_MAX_MS, max(HOLD_FIRST_MS, held_for_ms))
    if span == HOLD_MAX_MS:  # at the bound: jitter below it, so the crowd stays spread
        return HOLD_MAX_MS - int(unit_random * HOLD_MAX_MS / 4)
    return min(HOLD_MAX_MS, span + int(unit_random * span / 2))


class FlowGate:
    def __init__(self, stores, clock: Clock, unit_random=random.random) -> None:
        self._flow = stores.flow
        self._lanes = stores.lanes
        self._clock = clock
        self._random = unit_random
        # (tenant, key, counter shard) → the second in which this container found it used up.
        self._used_up: dict[tuple[str, str, int], int] = {}
        # (tenant, key, slot shard) → until when this container takes it for full (no expired
        # lease in it either): a crowd arriving at once costs each map one failed write per
        # container, not one per execution. A slot given back meanwhile waits that long at most.
        self._full_slots: dict[tuple[str, str, int], int] = {}

    def admit(self, job: Job, dispatch: Dispatch, lease_until_ms: int) -> tuple[bool, bool]:
        """(may start now, took a new slot). Rate first (a token used by one that then finds no
        slot is wasted: the limit errs toward fewer starts, never more)."""
        control = job.spec.flow_control
        if control is None:
            return True, False
        now = self._clock.now_ms()
        if control.rate_per_second is not None and not self._take_rate(job.tenant_id, control.key,
                                                                         control.rate_per_second, now):
            return False, False
        if control.max_concurrency is None:
            return True, False
        shards = shard_count(control.max_concurrency, SLOTS_PER_ITEM)
        shard = slot_shard(dispatch.execution_id, control.max_concurrency)
        limit = shard_limit(control.max_concurrency, shards, shard)
        memo = (job.tenant_id, control.key, shard)
        if self._full_slots.get(memo, 0) > now:
            return False, False  # this container found the map full a moment ago: no write
        for _ in range(2):
            taken = self._flow.take_slot(job.tenant_id, control.key, shard, dispatch.execution_id, limit,
                                         lease_until_ms)
            if taken.outcome != "full":
                # "held": another delivery of this execution holds it; the claim decides which runs.
                return True, taken.outcome == "new"
            expired = {execution: lease for execution, lease in taken.held.items() if lease < now}
            if not expired:
                if len(self._full_slots) > USED_UP_MEMO_LIMIT:
                    self._full_slots.clear()
                self._full_slots[memo] = now + FULL_SLOTS_MEMO_MS
                return False, False
            for execution, lease in expired.items():  # a crashed worker's slots: reclaimed
                self._flow.give_back(job.tenant_id, control.key, shard, execution, if_lease=lease)
        return False, False

    def _take_rate(self, tenant_id: str, key: str, rate: int, now_ms: int) -> bool:
        """A start in this second on a random counter shard, or on one other if that one is used
        up (shards fill unevenly: a second try keeps the key near its rate). A shard this
        container found used up is not written again in the same second: a crowd arriving in one
        second costs each counter at most one failed write per container, not one per execution."""
        second = now_ms // 1000
        shards = shard_count(rate, RATE_PER_ITEM)
        if len(self._used_up) > USED_UP_MEMO_LIMIT:
            self._used_up.clear()
        open_shards = [s for s in range(shards) if self._used_up.get((tenant_id, key, s)) != second]
        for _ in range(min(2, len(open_shards))):
            shard = open_shards.pop(int(self._random() * len(open_shards)) % len(open_shards))
            if self._flow.take_rate(tenant_id, key, second, shard, shard_limit(rate, shards, shard),
                                    expires_at=second + RATE_COUNTER_TTL_S):
                return True
            self._used_up[(tenant_id, key, shard)] = second
        return False

    def hold_back(self, job: Job, dispatch: Dispatch) -> None:
        """Send the dispatch again for later; the caller then lets its message be deleted (a crash
        in between: the message comes back, and its claim absorbs a duplicate)."""
        now = self._clock.now_ms()
        since = dispatch.throttled_from_ms or now
        later = replace(dispatch, throttled_from_ms=since, holds=dispatch.holds + 1)
        self._lanes.send([Outgoing(job.spec.priority, later, now + hold_delay_ms(now - since, self._random()))])

    def give_back(self, job: Job | None, execution_id: str) -> None:
        control = job.spec.flow_control if job is not None else None
        if control is not None and control.max_concurrency:
            self._flow.give_back(job.tenant_id, control.key, slot_shard(execution_id, control.max_concurrency),
                                 execution_id)

    def extend(self, job: Job | None, execution_id: str, lease_until_ms: int) -> None:
        control = job.spec.flow_control if job is not None else None
        if control is not None and control.max_concurrency:
            self._flow.extend(job.tenant_id, control.key, slot_shard(execution_id, control.max_concurrency),
                              execution_id, lease_until_ms)
