"""Lane shares (issue 26, item 4; domain/lane_shares.py): a slow or hung target of one tenant, or
one host, must delay only its own jobs, not stall a lane for everyone.

A worker invocation holds one unit of its lane's concurrency for as long as its slowest record
runs, so the bound is on worker containers (one invocation at a time each): at most
`share_of(lane cap, percent)` containers of a lane may have an attempt of one tenant in flight,
and as many may have an attempt towards one HTTP host. A container takes one slot per tenant and
per host, on the first of its attempts for it, and gives it back when its last one ends; the
attempts in between cost no write. A container that runs one tenant's attempts towards one host
and nothing else keeps its slots between its batches instead (a quiet deployment's container runs
a record a second: a take and a give-back per bound per second were most of its writes), and gives
them back as soon as it admits an attempt that does not need them, or finds them idle more than
LINGER_MS.

Slots are flow control's bounded slot maps (store/flow.py), keyed by container id instead of
execution id, with the lease of the container's longest attempt in flight (rounded up to the
minute, so that later attempts seldom write it again): a container that dies
holding one leaves a lease that the next taker finding the map full reclaims. The excess is held
back by the caller (service/flow.py FlowGate.hold_back: sent again with a growing delay, its
message deleted, no attempt used), so a saturated tenant's records leave their invocation at once
instead of waiting in it."""
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
# A slot's lease is its container's longest attempt in flight rounded up to this grid: the records
# of a batch (and of the batches after it) start at different instants, and an exact lease grew with
# each of them, one write per record. On the grid a held slot is extended at most once a minute; a
# dead container's slot comes back at most this much later.
SLOT_LEASE_GRID_MS = 60_000


def slot_lease(lease_until_ms: int) -> int:
    """The lease a slot is taken or extended with for an attempt leased until `lease_until_ms`."""
    return -(-lease_until_ms // SLOT_LEASE_GRID_MS) * SLOT_LEASE_GRID_MS


LOCK_STRIPES = 64  # above a batch's ten threads: records of different bounds seldom wait
# A slot a container holds with no attempt in flight ("lingering": it ran only this tenant, or this
# host, since its last other one) is given back at its next admission when it has been idle longer
# than this; a container that gets no batch meanwhile keeps it until its lease (the longest attempt's
# lease rounded up to the minute), and another container finding the map full reclaims it then.
LINGER_MS = 5_000


@dataclass(frozen=True)
class Bound:
    space: str  # LANE_TENANT_SPACE or LANE_HOST_SPACE
    lane: str
    owner: str  # the tenant id, or "host:port"
    limit: int


@dataclass
class _Held:
    count: int
    lease_until_ms: int
    idle_since_ms: int | None = None  # lingering (count 0) since


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
        saturated (what it took meanwhile is given back)."""
        lease_until_ms = slot_lease(lease_until_ms)
        admission = Admission()
        needed = self.bounds(job)
        self._give_back_lingering(needed)
        for bound in needed:
            try:
                taken = self._take(bound, lease_until_ms)
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
        """The attempt ended (or never started): the container's slot goes back with its last
        attempt. A failed give-back (throttled) is left to the slot's lease."""
        for bound in reversed(admission.bounds if admission else []):
            with self._key_lock(bound):
                held = self._held.get(bound)
                if held is None:
                    continue
                held.count -= 1
                if held.count > 0:
                    continue
                if self._alone(bound):  # the container's only tenant (host): kept for its next batch
                    held.idle_since_ms = self._clock.now_ms()
                    continue
                del self._held[bound]
                self._give_back(bound)
        if admission is not None:
            admission.bounds.clear()

    def _alone(self, bound: Bound) -> bool:
        """Whether `bound` is the only one of its space (tenants, hosts) this container holds."""
        return not any(other.space == bound.space and other != bound for other, _ in list(self._held.items()))

    def _give_back_lingering(self, needed: list[Bound]) -> None:
        """Before an admission: the lingering slots this attempt does not need (the container no
        longer runs only their tenant or host), and those idle longer than LINGER_MS."""
        now = self._clock.now_ms()
        for bound, _ in list(self._held.items()):
            with self._key_lock(bound):
                held = self._held.get(bound)
                if held is None or held.count > 0:
                    continue
                if bound in needed and now - (held.idle_since_ms or now) <= LINGER_MS:
                    continue
                del self._held[bound]
                self._give_back(bound)

    def _give_back(self, bound: Bound) -> None:
        try:
            self._flow.give_back(bound.lane, bound.owner, slot_shard(self.container_id, bound.limit),
                                 self.container_id, space=bound.space)
        except Exception:  # noqa: BLE001 - the lease frees it; the attempt's result stands
            logger.warning("a lane slot could not be given back; its lease frees it", exc_info=True)

    def _key_lock(self, bound: Bound) -> threading.Lock:
        # Striped: a fixed set of locks (never grown or cleared, so two threads can never hold
        # different locks for one bound); bounds sharing a stripe only wait for each other's write.
        return self._stripes[hash(bound) % LOCK_STRIPES]

    def _take(self, bound: Bound, lease_until_ms: int) -> bool:
        with self._key_lock(bound):
            held = self._held.get(bound)
            if held is not None and held.count == 0 and held.lease_until_ms <= self._clock.now_ms():
                del self._held[bound]  # lingered past its lease: another container may have reclaimed it
                held = None
            if held is not None:  # this container holds it already: no write, unless the lease grows
                if lease_until_ms > held.lease_until_ms:
                    self._extend(bound, lease_until_ms)
                    held.lease_until_ms = lease_until_ms
                held.count += 1
                held.idle_since_ms = None
                return True
            now = self._clock.now_ms()
            if self._full_until.get(bound, 0) > now:
                return False
            shards = shard_count(bound.limit, SLOTS_PER_ITEM)
            shard = slot_shard(self.container_id, bound.limit)
            limit = shard_limit(bound.limit, shards, shard)
            for _ in range(2):
                taken = self._flow.take_slot(bound.lane, bound.owner, shard, self.container_id, limit,
                                             lease_until_ms, space=bound.space)
                if taken.outcome != "full":
                    if taken.outcome == "held":  # left by a give-back that failed: ours, with its old lease
                        self._extend(bound, lease_until_ms)
                    self._held[bound] = _Held(1, lease_until_ms)
                    return True
                expired = {owner: lease for owner, lease in taken.held.items() if lease < now}
                if not expired:
                    if len(self._full_until) > MEMO_LIMIT:
                        self._full_until.clear()
                    self._full_until[bound] = now + FULL_MEMO_MS
                    return False
                for container, lease in expired.items():  # a dead container's slots: reclaimed
                    self._flow.give_back(bound.lane, bound.owner, shard, container, if_lease=lease, space=bound.space)
            return False

    def _extend(self, bound: Bound, lease_until_ms: int) -> None:
        self._flow.extend(bound.lane, bound.owner, slot_shard(self.container_id, bound.limit), self.container_id,
                          lease_until_ms, space=bound.space)
