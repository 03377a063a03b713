"""Flow control against DynamoDB's per-partition limits: per partition key and second, the write
and read units its items take, computed from item sizes as DynamoDB bills them (1 KB write units
on the larger of the item before and after an update, a failed condition billed as if written,
4 KB read units, a consistent read a whole unit), beside the 1,000 WU / 3,000 RU a partition
takes.

The flow-control service (service/flow.py: shard choice, reclaim, hold-back) runs for real on a
fake clock; its store is a model of store/flow.py's items and conditions that keeps each item's
size (the wire-format size formula of tests/integration/aws_doubles.py) instead of calling AWS,
so crowds of tens of thousands run in seconds. Each execution, once admitted, holds its slot for
`--run-ms` and gives it back; one held back is sent again with its delay (SQS whole seconds).
The one-item design this replaced (one slot map and one counter per key, a consistent read of the
map when full, a resend every second) is modelled beside it for comparison.

`python -m bench flow [--quick]`"""
from __future__ import annotations

import heapq
import random
from collections import defaultdict

from bench.common import machine, print_table

ITEM_LIMIT = 400 * 1024
# Worker containers the messages reach, each with its own FlowGate (and its memory of used-up
# counters, so each container costs a used-up counter at most one failed write a second).
CONTAINERS = 50
PARTITION_WU = 1_000
PARTITION_RU = 3_000


class ItemTooLarge(RuntimeError):
    pass


class BilledFlowItems:
    """store/flow.py's items and conditions in memory, each write and read billed to its
    partition key and second."""

    def __init__(self, clock) -> None:
        from tests.integration.aws_doubles import wire_size

        self._clock = clock
        self._wire_size = wire_size
        self.maps: dict[str, dict[str, int]] = {}
        self.map_size: dict[str, int] = {}
        self.counters: dict[str, int] = {}
        self.wu: dict[tuple[str, int], float] = defaultdict(float)
        self.ru: dict[tuple[str, int], float] = defaultdict(float)
        self.failed = 0

    def _bill_write(self, pk: str, size: int) -> None:
        if size > ITEM_LIMIT:
            raise ItemTooLarge(f"{pk}: {size} bytes")
        self.wu[(pk, self._clock.now_ms() // 1000)] += max(1, -(-size // 1024))

    def _entry(self, execution_id: str, lease: int) -> int:
        return self._wire_size(execution_id, {"N": str(lease)}) + 1

    def _base(self, pk: str, sk: str) -> int:
        return self._wire_size("tenantId", {"S": pk}) + self._wire_size("jobId", {"S": sk})

    def take_slot(self, tenant_id, key, shard, execution_id, limit, lease_until_ms):
        from jobsched.store.flow import SlotTaken, slots_key

        pk = slots_key(tenant_id, key, shard)["tenantId"]
        slots = self.maps.get(pk)
        before = self.map_size.get(pk, self._base(pk, "~slots"))
        entry = self._entry(execution_id, lease_until_ms)
        if slots is None:
            self._bill_write(pk, before)  # the failed condition, then the map made
            self.failed += 1
            self.maps[pk] = {execution_id: lease_until_ms}
            self.map_size[pk] = before + self._wire_size("slots", {"M": {}}) + entry
            self._bill_write(pk, self.map_size[pk])
            return SlotTaken("new")
        if execution_id in slots:
            self._bill_write(pk, before)
            return SlotTaken("held")
        if len(slots) >= limit:
            self._bill_write(pk, before + entry)  # billed as if written
            self.failed += 1
            return SlotTaken("full", dict(slots))
        slots[execution_id] = lease_until_ms
        self.map_size[pk] = before + entry
        self._bill_write(pk, self.map_size[pk])
        return SlotTaken("new")

    def give_back(self, tenant_id, key, shard, execution_id, if_lease=None):
        from jobsched.store.flow import slots_key

        pk = slots_key(tenant_id, key, shard)["tenantId"]
        slots = self.maps.get(pk, {})
        self._bill_write(pk, self.map_size.get(pk, 0))
        if execution_id not in slots or (if_lease is not None and slots[execution_id] != if_lease):
            self.failed += 1
            return False
        self.map_size[pk] -= self._entry(execution_id, slots.pop(execution_id))
        return True

    def extend(self, *args) -> None:
        raise AssertionError("not in this bench: no long-running attempts")

    def take_rate(self, tenant_id, key, second, shard, limit, expires_at):
        from jobsched.store.flow import rate_key

        pk = rate_key(tenant_id, key, second, shard)["tenantId"]
        self._bill_write(pk, self._base(pk, "~rate") + 2 * 8)
        used = self.counters.get(pk, 0)
        if used >= limit:
            self.failed += 1
            return False
        self.counters[pk] = used + 1
        return True

    def read_map(self, pk: str) -> dict[str, int]:
        """The one-item design's consistent read of a full map."""
        self.ru[(pk, self._clock.now_ms() // 1000)] += max(1, -(-self.map_size.get(pk, 0) // 4096))
        return dict(self.maps.get(pk, {}))


class OneItemGate:
    """The design this replaced: one slot map and one counter per key (no shards), the map read
    (consistent) when full, a held execution resent after 1 s plus up to 250 ms."""

    def __init__(self, items: BilledFlowItems, lanes, clock, unit_random) -> None:
        self._items, self._lanes, self._clock, self._random = items, lanes, clock, unit_random

    def admit(self, job, dispatch, lease_until_ms):
        from jobsched.store.flow import slots_key

        control, now = job.spec.flow_control, self._clock.now_ms()
        if control.rate_per_second and not self._items.take_rate(job.tenant_id, control.key, now // 1000, 0,
                                                                  control.rate_per_second, 0):
            return False, False
        if not control.max_concurrency:
            return True, False
        for _ in range(2):
            taken = self._items.take_slot(job.tenant_id, control.key, 0, dispatch.execution_id,
                                          control.max_concurrency, lease_until_ms)
            if taken.outcome != "full":
                return True, taken.outcome == "new"
            held = self._items.read_map(slots_key(job.tenant_id, control.key, 0)["tenantId"])
            expired = {e: lease for e, lease in held.items() if lease < now}
            if not expired:
                return False, False
            for execution, lease in expired.items():
                self._items.give_back(job.tenant_id, control.key, 0, execution, if_lease=lease)
        return False, False

    def hold_back(self, job, dispatch):
        from dataclasses import replace

        from jobsched.store.queues import Outgoing

        now = self._clock.now_ms()
        later = replace(dispatch, throttled_from_ms=dispatch.throttled_from_ms or now)
        self._lanes.send([Outgoing(job.spec.priority, later, now + 1_000 + int(self._random() * 250))])

    def give_back(self, job, execution_id):
        self._items.give_back(job.tenant_id, job.spec.flow_control.key, 0, execution_id)


class Lane:
    """SQS as the gate sees it: a message becomes visible after its whole-second delay."""

    def __init__(self, clock, events: list) -> None:
        self._clock, self._events = clock, events

    def send(self, outgoing) -> int:
        from jobsched.store.queues import delay_seconds

        now = self._clock.now_ms()
        for o in outgoing:
            heapq.heappush(self._events, (now + delay_seconds(o.visible_at_ms, now) * 1000, 1, o.dispatch.execution_id,
                                          o.dispatch))
        return 1


def run(design: str, count: int, max_concurrency: int | None, rate: int | None, run_ms: int,
        spread_ms: int = 0, horizon_ms: int = 3_600_000) -> dict:
    from jobsched.domain.clock import FakeClock
    from jobsched.domain.executions import Dispatch, DispatchKind
    from jobsched.domain.jobs import FlowControl, Job, JobSpec, JobState, Target, TargetType
    from jobsched.domain.schedule import one_time_schedule
    from jobsched.service.flow import FlowGate

    start = 1_800_000_000_000
    clock = FakeClock(start)
    events: list = []
    items = BilledFlowItems(clock)
    lanes = Lane(clock, events)
    unit_random = random.Random(11).random
    if design == "sharded":
        from types import SimpleNamespace

        gates = [FlowGate(SimpleNamespace(flow=items, lanes=lanes), clock, unit_random) for _ in range(CONTAINERS)]
    else:
        gates = [OneItemGate(items, lanes, clock, unit_random)]
    spec = JobSpec(name="b", schedule=one_time_schedule(start), target=Target(TargetType.HTTP, {"url": "https://x/"}),
                   flow_control=FlowControl("partner", max_concurrency, rate))
    job = Job("tenant-a", "job_00000000000a" + "0" * 20, spec, JobState.ACTIVE, 1, 1, start, start)
    for n in range(count):
        dispatch = Dispatch(DispatchKind.BACKFILL, job.tenant_id, job.job_id, f"{job.job_id}.{start - n:013d}", start, 1)
        heapq.heappush(events, (start + (n * spread_ms // count if spread_ms else 0), 1, dispatch.execution_id, dispatch))
    started, rounds, failure = 0, 0, None
    done_at = start
    while events:
        at, kind, execution_id, dispatch = heapq.heappop(events)
        if at - start > horizon_ms:
            break
        clock.set_ms(at)
        gate = gates[int(unit_random() * len(gates))]  # the worker container this message reaches
        try:
            if kind == 0:  # a run ends: its slot goes back
                gate.give_back(job, execution_id)
                continue
            rounds += 1
            allowed, _ = gate.admit(job, dispatch, at + 300_000)
            if allowed:
                started += 1
                done_at = at
                if max_concurrency:
                    heapq.heappush(events, (at + run_ms, 0, execution_id, dispatch))
            else:
                gate.hold_back(job, dispatch)
        except ItemTooLarge as exc:
            failure = f"item over 400 KB ({exc})"
            break
    peak_wu, hot = max(((u, pk) for (pk, _), u in items.wu.items()), default=(0, ""))
    peak_ru = max(items.ru.values(), default=0)
    return {"started": started, "rounds": rounds, "peak_wu": peak_wu, "peak_ru": peak_ru,
            "keys": len({pk for pk, _ in items.wu}), "failed": items.failed,
            "total_wu": sum(items.wu.values()), "drain_s": (done_at - start) / 1000, "failure": failure}


SCENARIOS = [
    # name, executions, maxConcurrency, ratePerSecond, run ms
    ("1,000 slots, 5,000 due at once, 2 s runs", 5_000, 1_000, None, 2_000),
    ("10,000 slots, 20,000 due at once, 2 s runs", 20_000, 10_000, None, 2_000),
    ("5,000 a second, 20,000 due at once", 20_000, None, 5_000, 0),
    ("10 slots, 1,500 held (poll storm), 2 s runs", 1_500, 10, None, 2_000),
]
QUICK = [
    ("1,000 slots, 3,000 due at once, 2 s runs", 3_000, 1_000, None, 2_000),
    ("5,000 a second, 8,000 due at once", 8_000, None, 5_000, 0),
    ("10 slots, 500 held (poll storm), 5 s runs", 500, 10, None, 5_000),
]


def main(flags: list[str]) -> None:
    print(f"machine: {machine()}")
    rows = []
    for name, count, slots, rate, run_ms in (QUICK if "--quick" in flags else SCENARIOS):
        for design in ("one item", "sharded"):
            r = run(design, count, slots, rate, run_ms)
            rows.append((name, design, r["started"], r["rounds"], f"{r['peak_wu']:,.0f}",
                         "THROTTLED" if r["peak_wu"] > PARTITION_WU else "ok", f"{r['peak_ru']:,.0f}",
                         r["keys"], f"{r['total_wu']:,.0f}", f"{r['drain_s']:,.0f}", r["failure"] or ""))
    print_table("Flow control: peak units per partition key per second (limits 1,000 WU, 3,000 RU)", rows,
                ("scenario", "design", "started", "admit calls", "peak WU/key/s", "vs 1,000", "peak RU/key/s",
                 "keys", "WU total", "last start s", "failure"))
    print("A peak over 1,000 WU is a key DynamoDB throttles (the model does not throttle: it shows what would be "
          "asked). 'one item' is the design before issue 28; 'sharded' is service/flow.py as it is.")
