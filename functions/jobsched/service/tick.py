"""The tick: once a minute per segment, hand off every timer of the next minute's bucket,
catching up any bucket that earlier ticks missed, oldest first."""
from __future__ import annotations

from dataclasses import dataclass, field

from jobsched.domain.clock import Clock
from jobsched.domain.timers import bucket_key, minute_of
from jobsched.service.handoff import HandOff, HandOffReport

# Look-ahead: the tick of minute m hands off bucket m + 1, so SQS delays make each message
# visible at its due second although the tick itself runs once a minute.
LOOK_AHEAD_MINUTES = 1
# A segment never ticked before starts this far back (a job created just before the first
# tick may sit in a recent bucket).
FIRST_RUN_CATCH_UP_MINUTES = 10
# Bounded work per run; a segment further behind continues on the next run.
MAX_BUCKETS_PER_RUN = 15


@dataclass
class TickReport:
    segment: int
    buckets: list[int] = field(default_factory=list)
    behind_minutes: int = 0
    handoff: HandOffReport = field(default_factory=HandOffReport)

    @property
    def caught_up_buckets(self) -> int:
        return max(0, len(self.buckets) - 1)


class Ticker:
    def __init__(self, stores, handoff: HandOff, clock: Clock) -> None:
        self._stores = stores
        self._handoff = handoff
        self._clock = clock

    def run(self, segment: int) -> TickReport:
        target = minute_of(self._clock.now_ms()) + LOOK_AHEAD_MINUTES
        watermark = self._stores.watermarks.get(segment)
        if watermark is None or watermark.done_through is None:
            done_through = target - 1 - FIRST_RUN_CATCH_UP_MINUTES
        else:
            done_through = watermark.done_through
        report = TickReport(segment)
        last = min(target, done_through + MAX_BUCKETS_PER_RUN)
        for minute in range(done_through + 1, last + 1):
            # Claim before reading: a writer that reads this claim dispatches directly; one that
            # wrote before it is seen by the consistent query below.
            self._stores.watermarks.claim(segment, minute)
            for page in self._stores.timers.pages(bucket_key(minute, segment)):
                jobs = self._stores.jobs.get_many([(t.tenant_id, t.job_id) for t in page])
                report.handoff.add(self._handoff.hand_off(page, jobs, claimed_through=minute))
            # Crash before this write: the next tick hands the bucket off again (idempotent).
            self._stores.watermarks.mark_done(segment, minute)
            report.buckets.append(minute)
        report.behind_minutes = target - last
        return report
