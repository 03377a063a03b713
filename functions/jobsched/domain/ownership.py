"""Regions (issue 25; DESIGN.md "Regions"): home regions, global segments, and segment leases.

- **Home region.** A job created in a multi-region deployment carries its home region's number in
  its id: `job_<12 hex: created ms><18 hex>r<digit>`. Hex never holds an `r`, so an id without the
  mark (every id of a single-region deployment, and every id made before regions) is read as
  region 0. Execution ids begin with the job id, so they carry it too and stay unique across
  regions.
- **Global segments.** Region i owns, at rest, segments `i * SEGMENTS .. i * SEGMENTS + SEGMENTS-1`:
  a job's segment is its home's block plus the usual hash. With one region nothing changes.
- **Leases.** Who may hand off and claim a segment's work is a lease in a strongly consistent store
  (the ownership table: DynamoDB multi-Region strong consistency): the holding region, an epoch,
  and the instant it ends. The holder acts only while `now < ends - clock bound` by its own clock;
  another region may take the segment only once `now >= ends + clock bound` by its own, with the
  epoch raised by one. With the two clocks within the bound of each other, the holder has stopped
  before the taker starts: no instant exists at which two regions act on one segment.
- **Takeover order.** The segment's home region, alone while it is live; otherwise the other live
  regions in the deployment's order from the home on, each waiting one more stagger than the one
  before it, so that they seldom race (when they do, the conditional write picks one).
- **Rewind.** The taker hands off again every timer due from the previous holder's last renewal
  minus REWIND_MS: what the previous holder had handed to its own queues may never run there
  (its workers refuse a segment they no longer hold). The claims dedupe what had run."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass


MS_PER_MINUTE = 60_000
REGION_MARK = "r"
_MARKED = re.compile(r"job_[0-9a-f]{12}(?:k[0-9a-z]{17}|[0-9a-f]{18})r[0-9]")  # new_job_id's, either form
# A later region in the takeover order waits this much longer than the one before it: two tick
# periods, as a tick runs anywhere within its minute.
TAKEOVER_STAGGER_MS = 2 * MS_PER_MINUTE
# Re-hand-off window before the previous holder's last renewal: the longest delay a message of
# the holder's may carry with no timer behind it (SQS's 15 minutes: a tenant's fair-share spread,
# a catch-up release), its tick's look-ahead (one minute), and a minute's margin.
REWIND_MS = 17 * MS_PER_MINUTE
# Heartbeats sit in the ownership table beside the leases, under negative numbers.
HEARTBEAT_BASE = -1000


# Where each region's data centres are, roughly (latitude, longitude): a function calls the ownership
# table's replicas nearest first (`nearest_first`). Distance stands in for latency, which AWS does
# not publish as a table; regions not listed keep the deployment's order, after the listed ones.
REGION_PLACES = {
    "us-east-1": (38.9, -77.4), "us-east-2": (40.0, -83.0), "us-west-1": (37.4, -122.0),
    "us-west-2": (45.8, -119.7), "ca-central-1": (45.5, -73.6), "sa-east-1": (-23.5, -46.6),
    "eu-west-1": (53.3, -6.3), "eu-west-2": (51.5, -0.1), "eu-west-3": (48.9, 2.4),
    "eu-central-1": (50.1, 8.7), "eu-north-1": (59.3, 18.1), "eu-south-1": (45.5, 9.2),
    "ap-northeast-1": (35.7, 139.7), "ap-northeast-2": (37.6, 127.0), "ap-northeast-3": (34.7, 135.5),
    "ap-southeast-1": (1.35, 103.8), "ap-southeast-2": (-33.9, 151.2), "ap-south-1": (19.1, 72.9),
    "me-south-1": (26.1, 50.6), "af-south-1": (-33.9, 18.4),
}


def nearest_first(region: str, replicas: tuple[str, ...]) -> tuple[str, ...]:
    """The ownership table's replica regions in the order a function in `region` calls them: its own
    region's replica first, then by great-circle distance (ties and unplaced regions: `replicas`'
    order)."""
    here = REGION_PLACES.get(region)

    def distance(replica: str) -> float:
        if replica == region:
            return -1.0
        there = REGION_PLACES.get(replica)
        if here is None or there is None:
            return math.inf
        (lat1, lon1), (lat2, lon2) = (tuple(map(math.radians, p)) for p in (here, there))
        cos = math.sin(lat1) * math.sin(lat2) + math.cos(lat1) * math.cos(lat2) * math.cos(lon1 - lon2)
        return math.acos(max(-1.0, min(1.0, cos)))
    return tuple(sorted(replicas, key=lambda r: (distance(r), replicas.index(r))))


def marked_job_id(job_id: str, region_index: int) -> str:
    """A fresh job id (domain/jobs.new_job_id's 36 characters) marked with its home region."""
    if not 0 <= region_index <= 9:
        raise ValueError("a region's number is 0..9")
    return f"{job_id[:34]}{REGION_MARK}{region_index}"


def is_marked(job_id: str) -> bool:
    return _MARKED.fullmatch(job_id) is not None


def home_index(job_id: str) -> int:
    """The home region's number of a job id (0 for an id without the mark)."""
    return int(job_id[-1]) if _MARKED.fullmatch(job_id) else 0


def global_segment(region_index: int, local_segment: int, segments: int) -> int:
    return region_index * segments + local_segment


def home_of_segment(segment: int, segments: int) -> int:
    return segment // segments


def heartbeat_key(region_index: int) -> int:
    return HEARTBEAT_BASE - region_index


@dataclass(frozen=True)
class Lease:
    segment: int
    region: str
    epoch: int
    ends_ms: int
    renewed_ms: int  # the holder's last renewal (or its take)
    taken_ms: int | None = None  # when the holder took it
    rewind_from_ms: int | None = None  # the instant its take handed off again from (plus REWIND_MS)


@dataclass(frozen=True)
class LeaseRules:
    lease_ms: int
    clock_bound_ms: int

    def holds(self, lease: Lease | None, region: str, now_ms: int) -> bool:
        """May `region` act on the lease's segment now, by its own clock?"""
        return lease is not None and lease.region == region and now_ms < lease.ends_ms - self.clock_bound_ms

    def takeable_from_ms(self, lease: Lease | None) -> int:
        """The first instant (by the taker's clock) at which the lease may be taken."""
        return 0 if lease is None else lease.ends_ms + self.clock_bound_ms

    def renewal_due(self, lease: Lease, now_ms: int) -> bool:
        """The segment's tick renews its lease (once a minute); a second run in the same minute
        (a catch-up) writes nothing."""
        return now_ms - lease.renewed_ms >= 20_000

    @property
    def live_within_ms(self) -> int:
        """A region counts as live while its heartbeat (written by its tick once a minute) is
        this recent: shorter than a lease, so that a region whose leases have ended (it stopped
        renewing) no longer counts as live when they become takeable, and its successors do not
        wait on it."""
        return self.lease_ms - 10_000

    def rewind_from_ms(self, lease: Lease | None, now_ms: int) -> int:
        """What a taker of `lease` hands off again from (minus REWIND_MS): the previous holder's
        last renewal; and when that holder took it itself less than REWIND_MS before (a chain of
        takes), what it handed off again from, which may be in its queues only."""
        if lease is None:
            return now_ms
        since = lease.renewed_ms
        if lease.rewind_from_ms is not None and lease.taken_ms is not None and \
                lease.renewed_ms - lease.taken_ms < REWIND_MS:
            since = min(since, lease.rewind_from_ms)
        return since

    def rewind_minute(self, lease: Lease | None, now_ms: int) -> int:
        """The bucket a taker restarts the segment's hand-off from."""
        return (self.rewind_from_ms(lease, now_ms) - REWIND_MS) // MS_PER_MINUTE


def takeover_order(segment: int, segments: int, regions: tuple[str, ...]) -> list[str]:
    """The segment's home region first, then the others in the deployment's order after it."""
    home = home_of_segment(segment, segments) % len(regions)
    return [regions[(home + k) % len(regions)] for k in range(len(regions))]


def take_wait_ms(segment: int, segments: int, regions: tuple[str, ...], region: str, live: set[str]) -> int | None:
    """How long after the lease becomes takeable `region` waits before taking it: its place among
    the live regions of the takeover order, times the stagger (the home, when live, waits 0).
    None: `region` is not live itself (it must not take while unsure of its own standing)."""
    if region not in live:
        return None
    home = takeover_order(segment, segments, regions)[0]
    if home in live and region != home:
        return None  # a live home takes its own segment back: nobody else races it
    ahead = 0
    for candidate in takeover_order(segment, segments, regions):
        if candidate == region:
            return ahead * TAKEOVER_STAGGER_MS
        if candidate in live:
            ahead += 1
    return None
