"""The tick: once a minute per segment, hand off every timer of the bucket LOOK_AHEAD_MINUTES
ahead (its TIMER_SLICES partitions one after another), catching up any bucket that earlier ticks
missed, oldest first."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

from jobsched.domain.clock import Clock
from jobsched.domain.timers import TimerKind, TIMER_SLICES, Watermark, bucket_key, minute_of, parse_position, position_key
from jobsched.service.handoff import LOOK_AHEAD_MINUTES, HandOff, HandOffReport
from jobsched.sizing import QUIET_WORKER_MEMORY_MB, TICK_MEMORY_MB

# Look-ahead (service/handoff.py): the tick of minute m hands off bucket m + LOOK_AHEAD_MINUTES,
# so SQS delays make each message visible at its due second although the tick runs once a minute.
# A segment never ticked before starts this far back (a job created just before the first
# tick may sit in a recent bucket).
FIRST_RUN_CATCH_UP_MINUTES = 10
# Bounded work per run; a segment further behind continues on the next run.
MAX_BUCKETS_PER_RUN = 15


# Time budget: a tick stops starting pages when the function's remaining time falls below this
# reserve plus twice its slowest page so far, saves its position, and the next run resumes there.
# A run killed at its time limit would instead restart the bucket every minute: the segment stalls.
TIME_RESERVE_MS = 3_000

# Aligned sends (docs/architecture.md, "Aligned sends"): a bucket handed off whole in one page (at
# most a page of timers, read at once) by the run it is due in (not a catch-up) sends its messages
# just before whole seconds ahead of their instants (store/queues.py `aligned_plan`: a quiet
# bucket's, at most 30 messages, within the second), when the worker's wait that saves outweighs
# the tick's: a second of the tick's memory costs ALIGN_COST seconds of the worker's as the default
# template deploys them. A bucket of several pages or more messages (a herd, 20 or 10,000 a second)
# is sent as it comes, as before.
ALIGN_COST = TICK_MEMORY_MB / QUIET_WORKER_MEMORY_MB
ALIGN_MAX_WAIT_MS = 1_000


@dataclass
class TickReport:
    segment: int
    buckets: list[int] = field(default_factory=list)
    behind_minutes: int = 0
    out_of_time: bool = False  # stopped inside or before a bucket to stay within the time limit
    held: bool = True  # regions: False when another region holds the segment (nothing done)
    epoch: int = 0
    rewound_to: int | None = None  # regions: this run took the segment and hands off again from here
    handoff: HandOffReport = field(default_factory=HandOffReport)

    @property
    def caught_up_buckets(self) -> int:
        return max(0, len(self.buckets) - 1)


class Ticker:
    def __init__(self, stores, handoff: HandOff, clock: Clock) -> None:
        self._stores = stores
        self._handoff = handoff
        self._clock = clock

    def run(self, segment: int, remaining_ms: Callable[[], int] | None = None) -> TickReport:
        """Hand off the segment's due buckets. `remaining_ms` is the Lambda context's remaining
        time; without it (tests, tools) the run has no time limit."""
        grant = self._handoff.ownership.for_tick(segment)
        if grant is None:  # regions: another region holds it, or the lease store is out of reach
            return TickReport(segment, held=False)
        if grant.rewind_minute is not None:
            # Taken from another region (or after a lapse): what the previous holder handed to its
            # queues may never run; every timer from its last renewal on is handed off again here
            # (the claims dedupe what had run).
            self._stores.watermarks.rewind(segment, grant.rewind_minute, grant.epoch)
        target = minute_of(self._clock.now_ms()) + LOOK_AHEAD_MINUTES
        watermark = self._stores.watermarks.get(segment) or Watermark(segment, None, None)
        if watermark.done_through is None:
            done_through = target - 1 - FIRST_RUN_CATCH_UP_MINUTES
        else:
            done_through = watermark.done_through
        report = TickReport(segment, epoch=grant.epoch, rewound_to=grant.rewind_minute)
        slowest_page_ms = 0
        calendars = self._handoff.calendar_cache()  # exclusion calendars: each read once per run

        def time_left(more_ms: int = 0) -> bool:
            """Time for another page (and `more_ms` besides) before the reserve."""
            return remaining_ms is None or remaining_ms() >= TIME_RESERVE_MS + 2 * slowest_page_ms + more_ms
        # A run that took the segment hands off its whole rewind and the buckets due now at once
        # (its time budget still stops it): a capped run would leave the bucket due now to the
        # next minute's run behind a quarter of an hour already handed off once.
        reach = MAX_BUCKETS_PER_RUN + (target - grant.rewind_minute if grant.rewind_minute is not None else 0)
        last = min(target, done_through + reach)
        for minute in range(done_through + 1, last + 1):
            # Claim before reading: a writer that reads this claim dispatches directly; one that
            # wrote before it is seen by the consistent query below. (Timers written into the
            # bucket after the claim are therefore never needed from the query: resuming after
            # a saved position skips nothing.)
            # The claim keeps its instant: with each timer's write instant it decides which fires
            # two senders may send (service/handoff.py).
            claimed_at = self._stores.watermarks.claim(segment, minute, self._clock.now_ms())
            pages = self._pages(segment, minute, watermark, time_left)
            unsaved: str | None = None  # the position after a slice's end, saved only if the run stops
            first_page = True
            while True:
                if not time_left():
                    if unsaved is not None:
                        self._stores.watermarks.save_position(segment, minute, unsaved)
                    report.out_of_time = True
                    report.behind_minutes = target - (minute - 1)
                    return report
                started = self._clock.now_ms()
                page = next(pages, None)
                if page is None:
                    break
                # A CHECK (absence alerts) needs no job here (its lane's priority at most): not read for it.
                # Whole items (the same read units: DynamoDB counts an item's size, not the projection's):
                # the fires' pack entries carry them, and the worker reads no job (job snapshots).
                snapshots = None if self._handoff.multi_region else {}
                jobs = self._stores.jobs.get_many([(t.tenant_id, t.job_id) for t in page.timers
                                                   if t.kind is not TimerKind.CHECK], whole=snapshots is not None,
                                                  items=snapshots)
                whole = (first_page and page.ends_bucket and minute == target and time_left(ALIGN_MAX_WAIT_MS)
                         and watermark.resume_after(minute) is None)
                first_page = False
                report.handoff.add(self._handoff.hand_off(page.timers, jobs, claimed_through=minute,
                                                          calendars=calendars, claimed_at=claimed_at,
                                                          snapshots=snapshots,
                                                          align_cost=ALIGN_COST if whole else None))
                # Crash before this write: the next run hands this page off again (idempotent).
                slowest_page_ms = max(slowest_page_ms, self._clock.now_ms() - started)
                if page.ends_slice:
                    # No position written at a slice's end unless the run stops before the next
                    # one (above): one write fewer per slice. A run killed without warning hands
                    # off again what followed the last saved position (duplicate sends, not reruns).
                    unsaved = page.position
                    continue
                self._stores.watermarks.save_position(segment, minute, page.position)
                unsaved = None
            # Crash before this write: the next tick resumes after the saved position.
            self._stores.watermarks.mark_done(segment, minute)
            report.buckets.append(minute)
        report.behind_minutes = target - last
        return report

    def _pages(self, segment: int, minute: int, watermark: Watermark,
               time_left: Callable[[int], bool]) -> Iterator["SlicePage"]:
        """The bucket's timers in hand-off order, slice after slice from the saved position on,
        read lazily in pages. Consecutive slices' small pages are merged up to the page size (while
        the run has time for another read), so that a quiet bucket's sends still fill their
        batches of ten."""
        first_slice, after = parse_position(watermark.resume_after(minute))
        limit = self._stores.timers.page_size
        merged: list = []
        merged_position = ""
        slowest_read_ms = 0
        for slice_ in range(first_slice, TIMER_SLICES):
            store_pages = self._stores.timers.pages(bucket_key(minute, segment, slice_),
                                                    after if slice_ == first_slice else None)
            while True:
                if merged and not time_left(2 * slowest_read_ms):
                    yield SlicePage(merged, merged_position, ends_slice=True)
                    merged = []
                started = self._clock.now_ms()
                page = next(store_pages, None)
                slowest_read_ms = max(slowest_read_ms, self._clock.now_ms() - started)
                if page is None:
                    break
                if merged and len(merged) + len(page) > limit:
                    yield SlicePage(merged, merged_position, ends_slice=True)
                    merged = []
                merged.extend(page)
                # The last ITEM's key (a timer pack's, not its last timer's: single timers may sort
                # between a pack's timers, and resuming after one of those would skip them).
                position = position_key(slice_, getattr(page, "last_sk", None) or page[-1].sort_key)
                if not getattr(page, "last", False):
                    yield SlicePage(merged, position, ends_slice=False)  # more follow in this slice
                    merged = []
                else:
                    merged_position = position
        if merged:
            yield SlicePage(merged, merged_position, ends_slice=True, ends_bucket=True)


@dataclass
class SlicePage:
    """Timers to hand off together, and the position after them. `ends_slice`: nothing of the
    position's slice follows (every slice before it is done too). `ends_bucket`: nothing of the
    bucket follows."""

    timers: list
    position: str
    ends_slice: bool
    ends_bucket: bool = False
