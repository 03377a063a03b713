"""The timer wheel: every future action is a timer in a minute bucket of one segment."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum

from jobsched.domain.ownership import home_index, is_marked
from jobsched.domain.schedule import MS_PER_MINUTE

# Timers expire through DynamoDB TTL this long after their due instant, never deleted one by one.
TIMER_TTL_SECONDS = 7 * 86_400
# One segment's bucket is spread over this many partition keys ("slices"), so that the next timers
# of a herd (thousands of jobs of one schedule: all due in the same future bucket) are written to
# several partitions at once instead of one partition's ~1,000 writes a second (sizing.py). A
# timer's slice hashes its job id with its minute, so the next timers of one page of any slice
# spread over all slices of their bucket. Slice 0 keeps the unsliced key. Never lower this in a
# running stack: timers already written in the higher slices would not be read.
TIMER_SLICES = 8

# Two senders of one occurrence (docs/architecture.md, "Packs"): a timer written into a bucket
# whose claim came less than SOLO_BOUND_MS after the write may be sent by its writer (whose
# watermark read, after the write, saw the claim) as well as by the tick's query (after the claim):
# the tick sends such a timer on the per-execution path, as its writer does. The bound is the
# clocks' difference (CLOCK_BOUND_MS: the figure the regions' rules state, Lambda's clock following
# the Amazon Time Sync Service) plus the longest a writer's put may take for the writer to rely on
# the tick (PUT_ALLOWANCE_MS: a writer whose put took longer sends what it finds claimed anyway).
CLOCK_BOUND_MS = 2_000
PUT_ALLOWANCE_MS = 10_000
SOLO_BOUND_MS = CLOCK_BOUND_MS + PUT_ALLOWANCE_MS
# What a writer may rely on to send nothing of a bucket it finds claimed: the clocks' difference the
# writers' horizon already assumes for never losing a timer (under a minute; service/handoff.py).
ASSUMED_SKEW_MS = 60_000
# The Segments item keeps the claim instants of this many buckets (a ring, by minute): more than a
# tick run claims (MAX_BUCKETS_PER_RUN, 15), so every bucket a run or a writer still works on has its.
CLAIM_SLOTS = 16


class TimerKind(str, Enum):
    FIRE = "FIRE"  # a job's next occurrence
    RETRY = "RETRY"  # a backoff longer than SQS's 15-minute delay cap
    LEASE = "LEASE"  # the heartbeat deadline of a long-running attempt
    SWEEP = "SWEEP"  # armed with a trigger's or redrive's PENDING record, before its send
    CATCHUP = "CATCHUP"  # a missed occurrence's release beyond SQS's delay cap (domain/catchup.py)
    # Absence alerts: the deadline of an occurrence's success (expect.successWithinSec), written
    # with the occurrence's FIRE timer (or its dispatch, when it had none).
    CHECK = "CHECK"


def segment_of(job_id: str, segments: int) -> int:
    """Stable across processes and Python versions (unlike hash()). In a multi-region deployment
    the job's home region picks its block of segments (domain/ownership.py); a job id without a
    home mark is region 0's, so a single-region deployment's segments are unchanged."""
    home = home_index(job_id)
    # A marked id hashes without its mark: the segment within a block does not depend on the
    # home, so a region may choose the home among the blocks it holds (HandOff.home_for).
    digest = hashlib.sha256((job_id[:-2] if is_marked(job_id) else job_id).encode()).digest()
    return home * segments + int.from_bytes(digest[:8], "big") % segments


def minute_of(ms: int) -> int:
    return ms // MS_PER_MINUTE


def slice_of(job_id: str, minute: int) -> int:
    """Stable across processes (not hash()); varies with the minute, so one job's timers do not all
    share a partition. The hash must not be linear: with crc32 (the first version), for ids of one
    length the next minute's slice was this minute's XOR a constant, so all the jobs of one slice
    fell into one slice of the next minute, and a tick handing off slice after slice wrote each
    slice's next timers into a single partition at its full pace (about 2,750 WCU a second at
    10,000 jobs a second; `bench e2e`). sha256 scatters them over all slices. A timer written by the
    earlier version stays where it is (the tick reads every slice of a bucket; timers are never
    looked up by key), so changing it in a running stack loses none."""
    digest = hashlib.sha256(f"{job_id}#{minute}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % TIMER_SLICES


def bucket_key(minute: int, segment: int, slice_: int = 0) -> str:
    return f"{minute}#{segment}#{slice_}" if slice_ else f"{minute}#{segment}"


def position_key(slice_: int, sort_key: str) -> str:
    """A tick's saved position inside a bucket: the slice, then the last sort key handed off in
    it. Ordered as strings in hand-off order (the slices one after another), and after any
    position saved before slices existed (a bare sort key, which starts with a digit < ':')."""
    return f"{slice_:02d}:{sort_key}"


def parse_position(position: str | None) -> tuple[int, str | None]:
    """(slice, sort key after which to resume) from position_key(); a bare sort key saved before
    slices existed resumes in slice 0, where every timer of that time was written."""
    if position is None:
        return 0, None
    head, sep, rest = position.partition(":")
    if sep and head.isdigit() and len(head) == 2:
        return int(head), rest
    return 0, position


@dataclass(frozen=True)
class Timer:
    """One future action. Its key is unique per action and immutable: writing it twice is harmless.

    The generation is part of the key, so a timer of an older job version can never overwrite
    one of the newer version; stale ones are dropped when handed off."""

    due_ms: int
    kind: TimerKind
    tenant_id: str
    job_id: str
    generation: int
    segment: int
    execution_id: str | None = None  # RETRY: the execution to run again
    attempt: int = 1  # RETRY: the attempt it runs
    # Schedule bounds: FIRE: the job's fires counted before this occurrence (the hand-off counts
    # them here, in the timer it writes anyway); RETRY: the run number of the execution it retries.
    runs: int = 0
    # The writer's clock (ms) just before it wrote this timer (None: written before timers carried
    # it). Not part of the key: the same timer written again carries the later instant.
    written_ms: int | None = None
    # Two senders (docs/architecture.md, "Packs"): a next FIRE timer the tick's hand-off wrote for a
    # fire it sent in a pack. Its writers never send it themselves (HandOff._mine), so only the query
    # of its bucket does, and it rides a pack whenever it was written (`sent_alone`).
    sole: bool = False

    @property
    def minute(self) -> int:
        return minute_of(self.due_ms)

    @property
    def bucket(self) -> str:
        minute = self.minute
        return bucket_key(minute, self.segment, slice_of(self.job_id, minute))

    @property
    def sort_key(self) -> str:
        ref = self.job_id if self.kind is TimerKind.FIRE else f"{self.execution_id}#{self.attempt}"
        return f"{self.due_ms:013d}#{self.kind.value}#{ref}#{self.generation}"

    def to_item(self) -> dict:
        item = {
            "bucket": self.bucket,
            "sk": self.sort_key,
            "dueMs": self.due_ms,
            "kind": self.kind.value,
            "tenantId": self.tenant_id,
            "jobId": self.job_id,
            "generation": self.generation,
            "segment": self.segment,
            "attempt": self.attempt,
            "expiresAt": self.due_ms // 1000 + TIMER_TTL_SECONDS,
        }
        if self.execution_id:
            item["executionId"] = self.execution_id
        if self.runs:
            item["runs"] = self.runs
        if self.written_ms is not None:
            item["writtenMs"] = self.written_ms
        if self.sole:
            item["sole"] = 1
        return item

    def to_wire(self) -> dict:
        """to_item() in DynamoDB's wire format, built directly."""
        return {k: ({"N": str(v)} if isinstance(v, int) else {"S": v}) for k, v in self.to_item().items()}

    @classmethod
    def from_wire(cls, item: dict) -> "Timer":
        """From DynamoDB's wire format, directly: the tick reads thousands a minute."""
        execution = item.get("executionId")
        return cls(
            due_ms=int(item["dueMs"]["N"]),
            kind=TimerKind(item["kind"]["S"]),
            tenant_id=item["tenantId"]["S"],
            job_id=item["jobId"]["S"],
            generation=int(item["generation"]["N"]),
            segment=int(item["segment"]["N"]),
            execution_id=execution["S"] if execution else None,
            attempt=int(item["attempt"]["N"]) if "attempt" in item else 1,
            runs=int(item["runs"]["N"]) if "runs" in item else 0,
            written_ms=int(item["writtenMs"]["N"]) if "writtenMs" in item else None,
            sole="sole" in item,
        )

    @classmethod
    def from_item(cls, item: dict) -> "Timer":
        return cls(
            due_ms=int(item["dueMs"]),
            kind=TimerKind(item["kind"]),
            tenant_id=item["tenantId"],
            job_id=item["jobId"],
            generation=int(item["generation"]),
            segment=int(item["segment"]),
            execution_id=item.get("executionId"),
            attempt=int(item.get("attempt", 1)),
            runs=int(item.get("runs", 0)),
            written_ms=int(item["writtenMs"]) if item.get("writtenMs") is not None else None,
            sole=bool(item.get("sole")),
        )


@dataclass(frozen=True)
class Watermark:
    """Per segment: the newest bucket a tick has claimed, and the newest fully handed off."""

    segment: int
    claimed_through: int | None
    done_through: int | None
    # Inside the bucket after done_through: the sort key of the last timer handed off, so that a
    # tick that ran out of time resumes after it instead of resending the bucket from its start.
    position_minute: int | None = None
    position_sk: str | None = None
    # Bucket minute -> the instant (the claiming tick's clock, ms) of the claim that first raised
    # claimedThrough to it, for the last CLAIM_SLOTS buckets claimed.
    claims: dict[int, int] | None = None

    def resume_after(self, minute: int) -> str | None:
        return self.position_sk if self.position_minute == minute else None

    def claimed_at(self, minute: int) -> int | None:
        """The instant of the bucket's claim; None when not kept (claimed before claims carried
        it, or more than CLAIM_SLOTS buckets ago)."""
        return (self.claims or {}).get(minute)


def is_claimed(minute: int, watermark: Watermark | None) -> bool:
    return bool(watermark and watermark.claimed_through is not None and minute <= watermark.claimed_through)


def claim_slot(minute: int) -> str:
    """The Segments item's attribute that keeps the claim instant of bucket `minute`."""
    return f"claim{minute % CLAIM_SLOTS}"


def sent_alone(written_ms: int | None, claimed_at_ms: int | None, sole: bool = False) -> bool | None:
    """Whether a timer of a claimed bucket goes out on the per-execution path (a message of one,
    claimed per execution): True when it was written less than SOLO_BOUND_MS before its bucket's
    claim (its writer may have seen the claim and sent it too); False when written earlier (only
    the tick's query sends it: it rides a pack), or when `sole` (Timer.sole: its writers never send
    it, however close to the claim they wrote it); None when either instant is unknown (a timer or a
    claim of before the upgrade: the worker decides, as before, from the job's age)."""
    if sole:
        return False
    if written_ms is None or claimed_at_ms is None:
        return None
    return written_ms > claimed_at_ms - SOLO_BOUND_MS


def surely_read(written_ms: int, claimed_at_ms: int | None, put_ms: int) -> bool:
    """Whether a timer its writer finds in a claimed bucket was surely in the table before the claim
    (so the tick's query, after the claim, read it): written more than ASSUMED_SKEW_MS +
    PUT_ALLOWANCE_MS before the claim (the tick's clock), by a put of at most PUT_ALLOWANCE_MS (the
    writer's own clock: a duration, no skew in it)."""
    return (claimed_at_ms is not None and put_ms <= PUT_ALLOWANCE_MS
            and written_ms <= claimed_at_ms - ASSUMED_SKEW_MS - PUT_ALLOWANCE_MS)
