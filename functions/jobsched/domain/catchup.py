"""Catch-up that does not flood: what a RUN_ALL job with maxCatchUp / catchUpPerMinute does with
the occurrences it missed at once (an outage of the ticks, a long pause). Plain Python, time in."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from jobsched.domain.jobs import Job

# The walk over missed occurrences reads at most this far back: a week of a once-a-minute job is
# 10,080 steps of the schedule (about 0.5 s of CPU at 0.05 ms a step). Older ones are skipped
# within the same record, outside its count (the record says so).
CATCH_UP_LOOKBACK_MS = 7 * 86_400_000
# Releases this close are sent at once with an SQS delay (its cap is 900 s; the margin covers the
# time between the plan and the send); later ones wait in the timer wheel as CATCHUP timers.
CATCH_UP_SQS_REACH_MS = 840_000


@dataclass(frozen=True)
class CatchUpPlan:
    releases: tuple[tuple[int, int], ...]  # (occurrence's fire instant, when it is released), oldest first
    skipped_count: int  # skipped occurrences counted (within the lookback)
    skipped_from_ms: int | None  # fire instant of the oldest skipped occurrence
    skipped_through_ms: int | None  # fire instant of the newest skipped occurrence
    uncounted_before_ms: int | None  # occurrences before this instant were skipped without being counted
    resume_nominal: int | None  # the first occurrence not missed (nominal), None when the schedule ended


# SQS delays are whole seconds, rounded down from the time of the send, which follows the plan by
# a few milliseconds: a release just short of the next second keeps each one in its own second.
SEND_ROUNDING_MS = 999


# A "minute" of releases is 61 s: the whole-second rounding of SQS delays and a message picked up
# a second late (a delay of 0) cannot bring per_minute + 1 of them within 60 s of each other.
RELEASE_MINUTE_S = 61


def release_offset_ms(index: int, per_minute: int) -> int:
    """The index-th catch-up (0 = the oldest kept) goes out this long after the plan: in whole
    seconds (what an SQS delay can say), rounded up, the index-th and the (index + per_minute)-th
    61 s apart, so no 60-second window holds more than per_minute of them."""
    return -(-index * RELEASE_MINUTE_S // per_minute) * 1000


def plan_catch_up(job: Job, first_nominal: int, now_ms: int, grace_ms: int) -> CatchUpPlan:
    """The occurrences from first_nominal that are late (fire instant before now - grace): the
    newest max_catch_up of them run, spread at per_minute from now; the older ones are skipped."""
    catch_up = job.spec.catch_up
    assert catch_up is not None
    schedule = job.spec.schedule
    late_before = now_ms - grace_ms
    nominal: int | None = first_nominal
    uncounted_before = None
    skipped_from = None
    if job.fire_at(first_nominal) < now_ms - CATCH_UP_LOOKBACK_MS:
        uncounted_before = now_ms - CATCH_UP_LOOKBACK_MS
        skipped_from = job.fire_at(first_nominal)
        nominal = schedule.next_fire_after(job.nominal_of(uncounted_before) - 1)
    kept: deque[int] = deque()
    skipped = 0
    skipped_through = skipped_from
    while nominal is not None and job.fire_at(nominal) < late_before:
        kept.append(job.fire_at(nominal))
        if len(kept) > catch_up.max_catch_up:
            oldest = kept.popleft()
            skipped += 1
            skipped_from = oldest if skipped_from is None else skipped_from
            skipped_through = oldest
        nominal = schedule.next_fire_after(nominal)
    if uncounted_before is not None and skipped == 0:
        # Only the uncounted ones were skipped: the range ends before the lookback.
        skipped_through = uncounted_before - 1
    releases = tuple((occurrence, now_ms + offset + SEND_ROUNDING_MS if offset else now_ms)
                     for i, occurrence in enumerate(kept)
                     for offset in (release_offset_ms(i, catch_up.per_minute),))
    return CatchUpPlan(releases, skipped, skipped_from, skipped_through, uncounted_before, nominal)
