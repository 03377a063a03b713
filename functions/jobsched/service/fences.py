"""Fences for job snapshots (docs/architecture.md, "The worker reads no job").

The tick's hand-off puts a job's item in its pack entries; the worker runs them without reading
the job. A change that stops or replaces a job's fires (pause, update, delete, a creation taken
back) therefore writes, before the API answers, a fence in each pack partition where an entry of
the job may be waiting: every occurrence of the job as it was, from FENCE_BACK_MS before the change
to the end of its segment's claimed buckets. The fences of the buckets claimed so far and the next
are written before the job's write (a fence only sends the worker to read the job: one the change
then does not follow costs a read, never a fire), those of any bucket claimed beyond after it (a
tick claims a bucket before it reads the bucket's jobs: one claimed after the job's write read the
change). The worker reads its
pack partition's fences after the due instant and reads again the jobs they name, as it read every
job before."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from jobsched.domain.jobs import Job, JobState
from jobsched.domain.packs import FENCE_BACK_MS, may_carry
from jobsched.domain.schedule import MS_PER_MINUTE

# A schedule fires at most once a second: 60 s back and the claimed buckets ahead (at most a few
# minutes) are a few hundred occurrences at the most. Past this, something is wrong: stop.
MAX_FENCES = 1_000
FENCE_PARALLELISM = 8
# A pause or delete repeated this soon after the change it repeats writes that change's fences again.
REFENCE_MS = 300_000


class Fences:
    def __init__(self, stores, handoff) -> None:
        self._packs = stores.packs
        self._watermarks = stores.watermarks
        self._handoff = handoff  # its segments, and whether regions share them
        self._pool: ThreadPoolExecutor | None = None

    def before_change(self, before: Job, changed_from_ms: int) -> int | None:
        """Before `before` (the job as it is) is written changed at `changed_from_ms` (the clock
        before the write): fence its occurrences in the buckets its segment's ticks have claimed,
        and the next one (a tick may claim it before the job's write; should after_change never run,
        a crash or a time-out, its fences are written already). A fence only makes the worker read
        the job again (it never drops a fire by itself), so a change that then fails costs a read,
        never a fire; and a fence write that fails fails the change before it is made. Returns the
        last minute fenced (-1: none claimed yet; None: nothing to fence)."""
        if not self._carries(before):
            return None
        claimed = self._claimed(before)
        if claimed is None:
            return -1  # no bucket claimed yet: after_change fences what a tick claims meanwhile
        self._write(before, changed_from_ms - FENCE_BACK_MS, claimed + 1)
        return claimed + 1

    def after_change(self, before: Job, changed_from_ms: int, fenced: int | None) -> None:
        """After the job's write: fence the occurrences of buckets a tick claimed beyond `fenced`
        (before_change's answer): a tick that claimed one meanwhile may have read the job before the
        write. Usually none: one consistent GetItem on the segment's watermark."""
        if fenced is None:
            return
        claimed = self._claimed(before)
        if claimed is None or claimed <= fenced:
            return
        start = (fenced + 1) * MS_PER_MINUTE if fenced >= 0 else 0
        self._write(before, max(start, changed_from_ms - FENCE_BACK_MS), claimed)

    def again(self, job: Job, now_ms: int) -> None:
        """A pause or delete repeated on a job already PAUSED or CANCELLED by a change at most
        REFENCE_MS ago: that change's fences again (they may have failed after its job write, or
        been answered by a version that wrote none). Idempotent: the same items."""
        if job.state not in (JobState.PAUSED, JobState.CANCELLED) or now_ms - job.updated_ms > REFENCE_MS:
            return
        was = replace(job, state=JobState.ACTIVE, generation=job.generation - 1)
        if self._carries(was) and (claimed := self._claimed(was)) is not None:
            self._write(was, job.updated_ms - FENCE_BACK_MS, claimed + 1)

    def _claimed(self, job: Job) -> int | None:
        """The last bucket minute the job's segment's ticks have claimed (consistent), None if none."""
        watermark = self._watermarks.get(self._handoff.segment_of(job.job_id))
        return None if watermark is None else watermark.claimed_through

    def _carries(self, job: Job) -> bool:
        """Whether a tick may have handed off fires of this job with its snapshot (regions: never,
        every entry reads its job)."""
        return not self._handoff.multi_region and job.state is JobState.ACTIVE and may_carry(job)

    def _write(self, before: Job, from_ms: int, through_minute: int) -> int:
        """Fence the job's occurrences from `from_ms` to the end of bucket `through_minute`."""
        segment = self._handoff.segment_of(before.job_id)
        generation = before.generation + 1  # its entries of an older generation are read again
        seconds = sorted({at // 1000 for at in occurrences(before, from_ms, (through_minute + 1) * MS_PER_MINUTE - 1)})
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
