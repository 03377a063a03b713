"""This region's standing on each segment (issue 25; domain/ownership.py for the rules).

- The tick of a segment (once a minute, in every region) renews the lease when this region holds
  it, gives it back when this region holds it for a home region that is live again, and takes it
  when it has ended (by more than the clock bound, and after this region's stagger in the
  takeover order). A take returns the bucket the tick must hand off again from (the rewind).
- The worker and the API ask `epoch_for` (a cached view, read again at most every CACHE_MS and
  whenever it would say no): the epoch under which this region may act on a segment now, or None.
- Every lane message carries the epoch it was sent under; the worker refuses one of an older epoch
  than the segment's current one (it was handed off again by the taker), and puts back one for a
  segment this region does not hold now (its lease lapsed and nobody took it yet: it runs when the
  lease is renewed, or is refused once another region has taken it).

A single-region deployment has no store: every segment is held under epoch 0, no call is made."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from enum import Enum

from jobsched.domain.clock import Clock
from jobsched.domain.ownership import MS_PER_MINUTE, Lease, LeaseRules, take_wait_ms

logger = logging.getLogger(__name__)

# The worker's and the API's view of the leases is read again after this long (a lease is renewed
# each minute to end 90 s later, so a view this old still ends well after the read).
CACHE_MS = 15_000
# ... and at most this often when it would refuse (a lease just taken by this region).
RECHECK_MS = 1_000
# A tick container writes this region's heartbeat at most this often (LeaseRules.live_within_ms).
BEAT_EVERY_MS = 20_000


class Verdict(str, Enum):
    ACT = "ACT"  # this region holds the segment under the message's epoch
    STALE = "STALE"  # a later epoch exists: the message was handed off again by its taker
    WAIT = "WAIT"  # not held by this region now, no later epoch known: later


@dataclass(frozen=True)
class TickGrant:
    epoch: int
    rewind_minute: int | None = None  # set when this run took the segment: hand off again from here


class Ownership:
    def __init__(self, store, rules: LeaseRules, regions: tuple[str, ...], region: str, segments: int,
                 clock: Clock) -> None:
        self._store = store
        self._rules = rules
        self._regions = regions
        self._region = region
        self._index = regions.index(region) if region in regions else 0
        self._segments = segments
        self._clock = clock
        self._lock = threading.Lock()
        self._leases: dict[int, Lease] = {}
        self._read_ms: int | None = None
        self._beat_ms: int | None = None

    @classmethod
    def single_region(cls, segments: int = 1) -> "Ownership":
        return cls(None, LeaseRules(1, 0), (), "", segments, None)  # type: ignore[arg-type]

    @property
    def multi_region(self) -> bool:
        return self._store is not None

    @property
    def regions(self) -> tuple[str, ...]:
        return self._regions

    @property
    def region_index(self) -> int:
        return self._index

    # ---- the worker's and the API's side -------------------------------------------------------
    def epoch_for(self, segment: int) -> int | None:
        if self._store is None:
            return 0
        now = self._clock.now_ms()
        lease = self._view(segment, now, fresh=False)
        if not self._rules.holds(lease, self._region, now):
            lease = self._view(segment, now, fresh=True)
        return lease.epoch if self._rules.holds(lease, self._region, now) else None

    def holder(self, segment: int) -> str | None:
        """The region that holds `segment` now, by this region's view (read again when older than
        RECHECK_MS): where a change this region does not schedule is forwarded. None: no region
        holds it now (its lease ended and nobody took it yet)."""
        if self._store is None:
            return self._region
        now = self._clock.now_ms()
        lease = self._view(segment, now, fresh=True)
        return lease.region if lease is not None and self._rules.holds(lease, lease.region, now) else None

    def verdict(self, segment: int, epoch: int, margin_ms: int = 0) -> Verdict:
        """ACT when this region holds the segment now (with `margin_ms` to spare before it must
        stop), whatever epoch the message was sent under: it is the one region acting on the
        segment, and claims dedupe (a message of its own older epoch, or one sent before leases:
        epoch 0, is work the holder may need: a take's rewind reaches back only so far). STALE
        when another region holds it under a later epoch than the message's (that region handed
        it off again). WAIT otherwise (this region's lease lapsed and nobody took it yet)."""
        if self._store is None:
            return Verdict.ACT
        now = self._clock.now_ms()
        for fresh in (False, True):
            lease = self._view(segment, now, fresh)
            if self._rules.holds(lease, self._region, now + margin_ms):
                return Verdict.ACT
            if lease is not None and lease.region != self._region and lease.epoch > epoch:
                return Verdict.STALE
        return Verdict.WAIT

    def held(self) -> list[int]:
        """The segments this region may act on now (GET /v1/health)."""
        if self._store is None:
            return list(range(self._segments))
        now = self._clock.now_ms()
        self._view(None, now, fresh=False)
        return sorted(s for s, lease in self._leases.items() if self._rules.holds(lease, self._region, now))

    def _view(self, segment: int | None, now: int, fresh: bool) -> Lease | None:
        with self._lock:
            stale = self._read_ms is None or now - self._read_ms >= CACHE_MS
            if stale or (fresh and now - self._read_ms >= RECHECK_MS):
                try:
                    self._leases, _ = self._store.all()
                    self._read_ms = now
                except Exception:  # noqa: BLE001 - the store unreachable: keep the last view
                    # A lease's end is in the view: unreachable for long, every lease lapses by
                    # this region's clock and it acts on nothing (it stops before its leases end).
                    logger.warning("the ownership table could not be read; acting on the last view", exc_info=True)
            return self._leases.get(segment) if segment is not None else None

    # ---- the tick's side ----------------------------------------------------------------------
    def for_tick(self, segment: int) -> TickGrant | None:
        """Renew, give back or take the segment's lease; the grant under which this run may hand
        off, or None (another region holds it, or this one gave it back or cannot reach the store)."""
        if self._store is None:
            return TickGrant(0)
        now = self._clock.now_ms()
        try:
            return self._for_tick(segment, now)
        except Exception:  # noqa: BLE001 - unreachable store: act on nothing new
            logger.warning("the ownership table could not be reached; the segment is not ticked here",
                           extra={"segment": segment}, exc_info=True)
            return None

    def _for_tick(self, segment: int, now: int) -> TickGrant | None:
        if self._beat_ms is None or now - self._beat_ms >= BEAT_EVERY_MS:
            # This region is live (its ticks reach the store): at most one write per tick
            # container and BEAT_EVERY_MS, from whichever segment's tick runs first. A failed beat
            # does not keep the lease from being renewed below.
            try:
                self._store.beat(self._index, now)
                self._beat_ms = now
            except Exception:  # noqa: BLE001
                logger.warning("the heartbeat could not be written", exc_info=True)
        lease = self._store.get(segment)
        home = self._regions[segment // self._segments % len(self._regions)]
        if (lease is not None and lease.region == self._region and not self._rules.holds(lease, self._region, now)
                and now < self._rules.takeable_from_ms(lease)):
            # A late or failed tick let this region's own lease run out by its clock, but nobody
            # may have taken it yet: renewed under the same epoch (the store refuses it if a take
            # came first), its messages stay valid and nothing is handed off again.
            renewed = self._store.renew(lease, now, self._rules.lease_ms)
            if renewed is None:
                self._forget(segment)
                return None
            self._remember(renewed)
            return TickGrant(renewed.epoch)
        if self._rules.holds(lease, self._region, now):
            if home != self._region and self._home_live(home, now):
                # The home region is back: give the segment back. The lease is shortened, which the
                # views of this region's workers (read up to CACHE_MS ago) do not know yet: it ends
                # no sooner than CACHE_MS and the clock bound from now, so each of them has read
                # the new end before the old one could mislead it. And it ends just before a
                # minute's ticks (by the clock bound), so the home's tick then takes it at once
                # instead of a minute later. Until then this region still holds it and hands off
                # as before (its workers stop by the new end; the home's take hands off again from
                # this lease's last renewal, so what they leave is not lost).
                ends = min(lease.ends_ms, self._release_end(now))
                if ends < lease.ends_ms and not self._store.release(lease, ends):
                    self._forget(segment)
                    return None
                lease = Lease(lease.segment, lease.region, lease.epoch, ends, lease.renewed_ms, lease.taken_ms,
                              lease.rewind_from_ms)
                self._remember(lease)
                logger.info("lease given back to its home region", extra={"segment": segment, "home": home})
                return TickGrant(lease.epoch) if self._rules.holds(lease, self._region, now) else None
            if self._rules.renewal_due(lease, now):
                renewed = self._store.renew(lease, now, self._rules.lease_ms)
                if renewed is None:
                    self._forget(segment)
                    return None
                lease = renewed
            self._remember(lease)
            return TickGrant(lease.epoch)
        if now < self._rules.takeable_from_ms(lease):
            return None
        if lease is None and home != self._region:
            # A segment never held is its home region's to start: its jobs are made there (a
            # region that never started has none), and a stranger taking it first would race it.
            return None
        _, beats = self._store.all()
        live = {self._regions[i] for i, at in beats.items() if i < len(self._regions) and now - at <= self._rules.live_within_ms}
        live.add(self._region)  # this region just reached the store
        wait = take_wait_ms(segment, self._segments, self._regions, self._region, live)
        if wait is None or now < self._rules.takeable_from_ms(lease) + wait:
            return None
        taken = self._store.take(segment, lease, self._region, now, self._rules.lease_ms, self._rules.clock_bound_ms,
                                 self._rules.rewind_from_ms(lease, now))
        if taken is None:
            return None
        self._remember(taken)
        logger.warning("segment taken", extra={"segment": segment, "epoch": taken.epoch,
                                               "from": lease.region if lease else None})
        # The first lease of a segment rewinds nothing: no region held it, so no region's queues
        # hold messages of it that only a lease could refuse (one sent before leases carries epoch
        # 0, which the holder runs).
        return TickGrant(taken.epoch, self._rules.rewind_minute(lease, now) if lease is not None else None)

    def _release_end(self, now: int) -> int:
        bound = self._rules.clock_bound_ms
        end = (now // MS_PER_MINUTE + 1) * MS_PER_MINUTE - bound
        while end < now + CACHE_MS + bound:
            end += MS_PER_MINUTE
        return end

    def _home_live(self, home: str, now: int) -> bool:
        _, beats = self._store.all()
        at = beats.get(self._regions.index(home))
        return at is not None and now - at <= self._rules.live_within_ms

    def _remember(self, lease: Lease) -> None:
        with self._lock:
            self._leases[lease.segment] = lease

    def _forget(self, segment: int) -> None:
        with self._lock:
            self._leases.pop(segment, None)
