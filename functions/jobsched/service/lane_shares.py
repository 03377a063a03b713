"""Lane shares (issue 26, item 4; domain/lane_shares.py): a slow or hung target of one tenant, or
one host, must delay only its own jobs, not stall a lane for everyone.

A worker invocation holds one unit of its lane's concurrency for as long as its slowest record
runs, so the bound is on worker containers (one invocation at a time each): at most
`share_of(lane cap, percent)` containers of a lane may hold a slot of one tenant, and as many a
slot of one HTTP host. A container takes one slot per tenant and per host for all its attempts of
it at once.

A slot is held for a short time, not for the attempt's whole lease (round 13): a take writes a
hold of SLOT_HOLD_MS from its attempt's start, most attempts end within it, and the slot then
lapses by itself, with no give-back write; the container's later attempts of the same tenant or
host while SLOT_RENEW_MS of the hold remain write nothing, and one that finds less takes it again
(one write). An attempt still running when its hold nears its end is a slow one: `keep_alive`,
which the worker's invocation calls about once a second while its attempts run, extends the hold
to the container's longest attempt's lease (rounded up to the minute), and such a slot is given
back when the container's last attempt on it ends. So a fast attempt costs at most one write per
bound and container every few seconds, a slow one a take, an extension and a give-back. A
container therefore counts toward a share until its hold lapses, up to SLOT_HOLD_MS after its
latest attempt of that tenant or host started.

Slots are flow control's bounded slot maps (store/flow.py), keyed by container id instead of
execution id: a container that dies holding one leaves a lease that the next taker finding the map
full reclaims. The excess is held back by the caller (service/flow.py FlowGate.hold_back: sent
again with a growing delay, its message deleted, no attempt used), so a saturated tenant's records
leave their invocation at once instead of waiting in it."""
from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field

from jobsched.domain.clock import Clock
from jobsched.domain.flow import SLOTS_PER_ITEM, shard_count, shard_limit, slot_shard
from jobsched.domain.jobs import Job, Priority
from jobsched.domain.lane_shares import share_of, target_host
from jobsched.store.flow import LANE_HOST_SPACE, LANE_TENANT_SPACE

logger = logging.getLogger(__name__)

# A container that found a slot map full (no expired lease in it) takes it for full this long:
# a crowd arriving at once costs each map one failed write per container, not one per record.
FULL_MEMO_MS = 1_000
MEMO_LIMIT = 10_000  # entries; cleared when passed
# A take holds the slot this long from the attempt's start. It covers the wait of an attempt that
# is not slow (a batch's records start within a second of each other, and calls that answer in
# milliseconds), and keep_alive, called about once a second, finds a slow attempt's hold with more
# than a second left to extend it.
SLOT_HOLD_MS = 5_000
# An attempt starting with less than this left of its container's hold takes the slot again, and
# keep_alive extends a hold with attempts still running once less than this is left.
SLOT_RENEW_MS = 2_000
# A slow attempt's hold is extended to its lease rounded up to this grid: the container's later
# attempts of the same tenant or host seldom outlast it, so it is written at most once a minute; a
# dead container's slot comes back at most this much later than its longest attempt's lease.
SLOT_LEASE_GRID_MS = 60_000


def slot_lease(lease_until_ms: int) -> int:
    """The hold a slow attempt's slot is extended to, for an attempt leased until `lease_until_ms`."""
    return -(-lease_until_ms // SLOT_LEASE_GRID_MS) * SLOT_LEASE_GRID_MS


LOCK_STRIPES = 64  # above a batch's ten threads: records of different bounds seldom wait


@dataclass(frozen=True)
class Bound:
    space: str  # LANE_TENANT_SPACE or LANE_HOST_SPACE
    lane: str
    owner: str  # the tenant id, or "host:port"
    limit: int


@dataclass
class _Held:
    count: int  # the container's attempts in flight on the bound
    hold_until_ms: int  # what the slot map holds for this container
    need_until_ms: int  # the slot lease of the longest of those attempts (slot_lease)


@dataclass
class Admission:
    """What one attempt holds: given back by LaneGate.release when the attempt ends."""
    bounds: list[Bound] = field(default_factory=list)


class LaneGate:
    def __init__(self, flow_store, clock: Clock, caps: dict[Priority, int], tenant_percent: int,
                 host_percent: int, container_id: str | None = None) -> None:
        self._flow = flow_store
        self._clock = clock
        self._tenant_limits = {lane: share_of(cap, tenant_percent) for lane, cap in caps.items()}
        self._host_limits = {lane: share_of(cap, host_percent) for lane, cap in caps.items()}
        # One id per container (per handler built): its slots are found again without a read.
        self.container_id = container_id or uuid.uuid4().hex
        self._stripes = [threading.Lock() for _ in range(LOCK_STRIPES)]
        self._held: dict[Bound, _Held] = {}
        self._full_until: dict[Bound, int] = {}
        self.faults = 0  # slot writes that failed (throttled, denied): attempts that ran unbounded

    def bounds(self, job: Job) -> list[Bound]:
        lane = job.spec.priority
        found = []
        tenant_limit = self._tenant_limits.get(lane, 0)
        if tenant_limit:
            found.append(Bound(LANE_TENANT_SPACE, lane.value, job.tenant_id, tenant_limit))
        host = target_host(job)
        host_limit = self._host_limits.get(lane, 0)
        if host is not None and host_limit:
            found.append(Bound(LANE_HOST_SPACE, lane.value, host, host_limit))
        return found

    def admit(self, job: Job, lease_until_ms: int) -> Admission | None:
        """The slots this attempt needs (its tenant's, its host's), or None when one of them is
        saturated (what it took meanwhile is given back to the container's count)."""
        need_until_ms = slot_lease(lease_until_ms)
        admission = Admission()
        for bound in self.bounds(job):
            try:
                taken = self._take(bound, need_until_ms)
            except Exception:  # noqa: BLE001 - see below
                # A throttled or denied slot write loses the bound for this attempt, never the
                # attempt: the bound is fairness, not safety (claims and fences are untouched).
                logger.warning("a lane slot could not be taken; the attempt runs unbounded", exc_info=True)
                self.faults += 1
                continue
            if not taken:
                self.release(admission)
                return None
            admission.bounds.append(bound)
        return admission

    def release(self, admission: Admission | None) -> None:
        """The attempt ended (or never started). A short hold lapses by itself; a hold extended for a
        slow attempt goes back with the container's last attempt on it (a failed give-back, throttled,
        is left to the lease)."""
        for bound in reversed(admission.bounds if admission else []):
            with self._key_lock(bound):
                held = self._held.get(bound)
                if held is None or held.count <= 0:
                    continue
                held.count -= 1
                if held.count > 0:
                    continue
                held.need_until_ms = 0
                if held.hold_until_ms - self._clock.now_ms() <= SLOT_HOLD_MS:
                    continue  # lapses within the hold, no write; the memo serves the next attempts
                del self._held[bound]
                shard = slot_shard(self.container_id, bound.limit)
                try:
                    self._flow.give_back(bound.lane, bound.owner, shard, self.container_id, space=bound.space)
                except Exception:  # noqa: BLE001 - the lease frees it; the attempt's result stands
                    logger.warning("a lane slot could not be given back; its lease frees it", exc_info=True)
        if admission is not None:
            admission.bounds.clear()

    def keep_alive(self, leaving: bool = False) -> int:
        """Extend the hold of every slot with attempts still running whose hold ends within
        SLOT_RENEW_MS (all of them when `leaving`: the invocation returns without waiting for them,
        and the container may be frozen until their calls end) to its longest attempt's lease. The
        worker's invocation calls this about once a second while its attempts run. Returns the
        holds extended; a refused write (throttled, denied) leaves the attempt unbounded."""
        extended = 0
        for bound, held in list(self._held.items()):
            with self._key_lock(bound):
                now = self._clock.now_ms()
                if held.count <= 0:
                    continue
                if held.hold_until_ms >= held.need_until_ms:
                    continue  # extended already (or an attempt that needs no more than its hold)
                if not leaving and held.hold_until_ms - now >= SLOT_RENEW_MS:
                    continue
                try:
                    taken = self._write(bound, held.need_until_ms)
                except Exception:  # noqa: BLE001 - as in admit: fairness, not safety
                    logger.warning("a lane slot could not be extended; its attempts run unbounded", exc_info=True)
                    self.faults += 1
                    continue
                if taken:
                    held.hold_until_ms = held.need_until_ms
                    extended += 1
                else:  # lapsed and reclaimed by a full map meanwhile: its attempts run unbounded
                    logger.warning("a lane slot lapsed before it was extended; its attempts run unbounded")
                    self.faults += 1
        return extended

    def _key_lock(self, bound: Bound) -> threading.Lock:
        # Striped: a fixed set of locks (never grown or cleared, so two threads can never hold
        # different locks for one bound); bounds sharing a stripe only wait for each other's write.
        return self._stripes[hash(bound) % LOCK_STRIPES]

    def _take(self, bound: Bound, need_until_ms: int) -> bool:
        with self._key_lock(bound):
            now = self._clock.now_ms()
            held = self._held.get(bound)
            if held is not None and held.hold_until_ms - now >= SLOT_RENEW_MS:
                # Held, with enough of the hold left for keep_alive to extend it if this attempt
                # runs long: no write.
                held.count += 1
                held.need_until_ms = max(held.need_until_ms, need_until_ms)
                return True
            if (held is None or held.count <= 0) and self._full_until.get(bound, 0) > now:
                return False
            hold_until_ms = now + SLOT_HOLD_MS
            if held is not None and held.count > 0:
                # Attempts of this container run on it: the hold keeps covering them.
                hold_until_ms = max(hold_until_ms, held.need_until_ms)
            if not self._write(bound, hold_until_ms):
                return False
            if held is None:
                if len(self._held) > MEMO_LIMIT:
                    self._forget_lapsed(now)
                held = _Held(0, hold_until_ms, 0)
            self._held[bound] = held  # (again, if _forget_lapsed dropped it meanwhile)
            held.hold_until_ms = hold_until_ms
            held.count += 1
            held.need_until_ms = max(held.need_until_ms, need_until_ms)
            return True

    def _write(self, bound: Bound, hold_until_ms: int) -> bool:
        """Take (or renew) this container's slot until `hold_until_ms`, reclaiming expired slots
        of other containers when the map is full; False when it is full of live ones."""
        now = self._clock.now_ms()
        shards = shard_count(bound.limit, SLOTS_PER_ITEM)
        shard = slot_shard(self.container_id, bound.limit)
        limit = shard_limit(bound.limit, shards, shard)
        for _ in range(2):
            taken = self._flow.take_slot(bound.lane, bound.owner, shard, self.container_id, limit,
                                         hold_until_ms, space=bound.space, renew=True)
            if taken.outcome != "full":
                return True
            expired = {owner: lease for owner, lease in taken.held.items() if lease < now}
            if not expired:
                if len(self._full_until) > MEMO_LIMIT:
                    self._full_until.clear()
                self._full_until[bound] = now + FULL_MEMO_MS
                return False
            for container, lease in expired.items():  # lapsed holds and dead containers' slots
                self._flow.give_back(bound.lane, bound.owner, shard, container, if_lease=lease, space=bound.space)
        return False

    def _forget_lapsed(self, now: int) -> None:
        for bound, held in list(self._held.items()):
            if held.count <= 0 and held.hold_until_ms < now:
                self._held.pop(bound, None)
