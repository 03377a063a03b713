"""Fences for job snapshots (docs/architecture.md, "The worker reads no job").

The tick's hand-off puts a job's item in its pack entries; the worker runs them without reading
the job. A change that stops or replaces a job's fires (pause, update, delete, a creation taken
back) therefore writes, after the job's own write and before the API answers, a fence in each pack
partition where an entry of the job may be waiting: every occurrence of the job as it was, from
FENCE_BACK_MS before the change to the end of its segment's claimed buckets (a tick claims a bucket
before it reads the bucket's jobs: a bucket claimed after the job's write was read with the change,
one claimed before it is under the watermark this reads). The worker reads its pack partition's
fences after the due instant and drops what they name, as it dropped what the job's read showed
stale."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from jobsched.domain.jobs import Job, JobState
from jobsched.domain.packs import FENCE_BACK_MS, snapshot_of
from jobsched.domain.schedule import MS_PER_MINUTE

# A schedule fires at most once a second: 60 s back and the claimed buckets ahead (at most a few
# minutes) are a few hundred occurrences at the most. Past this, something is wrong: stop.
MAX_FENCES = 1_000
FENCE_PARALLELISM = 8


class Fences:
    def __init__(self, stores, handoff) -> None:
        self._packs = stores.packs
        self._watermarks = stores.watermarks
        self._handoff = handoff  # its segments, and whether regions share them
        self._pool: ThreadPoolExecutor | None = None

    def after_change(self, before: Job, changed_from_ms: int, generation: int) -> int:
        """`before` (the job as it was, ACTIVE) changed at `changed_from_ms` (the clock before the
        job's write) to `generation`: fence its occurrences that a tick may have handed off with
        its snapshot. Returns how many fences were written."""
        if self._handoff.multi_region or before.state is not JobState.ACTIVE or snapshot_of(before) is None:
            return 0  # no entry of it carries a snapshot (regions: every entry reads its job)
        segment = self._handoff.segment_of(before.job_id)
        watermark = self._watermarks.get(segment)
        if watermark is None or watermark.claimed_through is None:
            return 0
        seconds = sorted({at // 1000 for at in occurrences(before, changed_from_ms - FENCE_BACK_MS,
                                                            (watermark.claimed_through + 1) * MS_PER_MINUTE - 1)})
        if len(seconds) <= 1:
            for second in seconds:
                self._packs.fence(segment, second, before.job_id, generation)
            return len(seconds)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=FENCE_PARALLELISM, thread_name_prefix="fence")
        list(self._pool.map(lambda s: self._packs.fence(segment, s, before.job_id, generation), seconds))
        return len(seconds)


def occurrences(job: Job, from_ms: int, through_ms: int) -> list[int]:
    """The job's fire instants (jitter included) in [from_ms, through_ms]."""
    schedule = job.spec.schedule
    found: list[int] = []
    nominal = schedule.next_fire_after(job.nominal_of(from_ms) - 1)
    while nominal is not None and len(found) < MAX_FENCES:
        at = job.fire_at(nominal)
        if at > through_ms:
            break
        if at >= from_ms:
            found.append(at)
        nominal = schedule.next_fire_after(nominal)
    return found
