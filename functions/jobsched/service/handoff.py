"""Hand-off: turning due timers into SQS dispatches. One mechanism for the tick, the API's
direct dispatch and the worker's long retries, so every writer follows the same protocol."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from jobsched.domain.catchup import CATCH_UP_SQS_REACH_MS, CatchUpPlan, plan_catch_up
from jobsched.domain.clock import Clock
from jobsched.domain.executions import Dispatch, DispatchKind, execution_id_for, scheduled_ms_of
from jobsched.domain.jobs import Job, MisfirePolicy, Priority
from jobsched.domain.errors import WrongRegion
from jobsched.domain.ownership import marked_job_id
from jobsched.domain.packs import SNAPSHOT_TRUST_MS, snapshot_of
from jobsched.domain.timers import (Timer, TimerKind, Watermark, is_claimed, minute_of, segment_of, sent_alone,
                                    surely_read)
from jobsched.domain.calendars import EXCLUDED
from jobsched.service.calendars import CalendarCache
from jobsched.service.ownership import Ownership
from jobsched.service.fairness import FairShare
from jobsched.store.queues import Outgoing
from jobsched.service.expectations import check_timer

# An occurrence later than this is a misfire, handled by the job's misfirePolicy.
MISFIRE_GRACE_MS = 60_000
# Misfired occurrences recorded SKIPPED per hand-off at most; beyond that they are only counted.
MAX_SKIPPED_RECORDS = 100
# Exclusion calendars: SKIPPED (EXCLUDED) records written at once by a hand-off.
EXCLUDED_WRITES_IN_FLIGHT = 8
# The tick of minute m hands off bucket m + LOOK_AHEAD_MINUTES. EventBridge runs a scheduled rule
# at some second within its minute, not at :00, so with a look-ahead of one a tick at m:59 would
# have one second before the first timers of m + 1 are due. With two, bucket m + 2 is handed off
# at least a full minute before its first timer, wherever in minute m the tick runs (the
# reasoning and the bound: docs/architecture.md, "Look-ahead").
LOOK_AHEAD_MINUTES = 2
# Ticks claim at most LOOK_AHEAD_MINUTES ahead; a writer whose bucket lies beyond this skips the
# watermark read (clock skew between writer and tick is assumed below a minute).
DIRECT_DISPATCH_HORIZON_MINUTES = LOOK_AHEAD_MINUTES + 1


@dataclass
class HandOffReport:
    dispatched: int = 0
    stale: int = 0
    next_timers: int = 0
    misfires_skipped: int = 0
    sqs_batches: int = 0
    skipped: list = field(default_factory=list)  # (job, occurrence) recorded SKIPPED
    # Catch-up that does not flood: releases beyond SQS's delay reach, and the MISSED_WINDOW records.
    catch_up_timers: list = field(default_factory=list)
    missed_windows: list = field(default_factory=list)  # (job, CatchUpPlan)
    catch_ups: int = 0
    excluded: list = field(default_factory=list)  # (job, occurrence) on an exclusion calendar's date
    exclusions: int = 0  # occurrences recorded SKIPPED (EXCLUDED), over the reports added
    # Absence alerts: CHECK timers of this pass's occurrences (written with its next timers).
    checks: list = field(default_factory=list)
    # Two senders: fires this writer found claimed after a put slower than PUT_ALLOWANCE_MS, sent
    # alone although the tick may have read them as its own (docs/architecture.md, "Packs").
    uncertain: int = 0

    def add(self, other: "HandOffReport") -> None:
        self.dispatched += other.dispatched
        self.stale += other.stale
        self.next_timers += other.next_timers
        self.misfires_skipped += other.misfires_skipped
        self.sqs_batches += other.sqs_batches
        self.catch_ups += other.catch_ups
        self.exclusions += other.exclusions
        self.uncertain += other.uncertain


class HandOff:
    def __init__(self, stores, clock: Clock, segments: int, tenant_fires_per_second: int = 0,
                 ownership: Ownership | None = None) -> None:
        self._segments = segments
        self.ownership = ownership or Ownership.single_region(segments)
        self._fair = FairShare(tenant_fires_per_second, segments)
        self._executions = stores.executions
        self._timers = stores.timers
        self._watermarks = stores.watermarks
        self._lanes = stores.lanes
        self._clock = clock
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="handoff-send")
        self._calendars = stores.calendars
        self._recorder = ThreadPoolExecutor(max_workers=EXCLUDED_WRITES_IN_FLIGHT, thread_name_prefix="handoff-skip")

    def calendar_cache(self) -> CalendarCache:
        """Exclusion calendars: a cache for one tick run (or one writer's request)."""
        return CalendarCache(self._calendars)

    def segment_of(self, job_id: str) -> int:
        return segment_of(job_id, self._segments)

    @property
    def multi_region(self) -> bool:
        return self.ownership.multi_region

    def home_for(self, job_id: str) -> str:
        """A new job's id, marked with a home region whose segment for it this region holds now
        (its own first): its writes and direct dispatch then stay in the region that acts on
        them. Single-region: the id unchanged."""
        if not self.multi_region:
            return job_id
        this_index, count = self.ownership.region_index, len(self.ownership.regions)
        order = [this_index] + [i for i in range(count) if i != this_index]
        for index in order:
            marked = marked_job_id(job_id, index)
            if self.ownership.epoch_for(segment_of(marked, self._segments)) is not None:
                return marked
        raise WrongRegion("this region schedules no segment now (it is starting, or cut off from the lease "
                          "table); retry shortly (another region takes it)")

    def place(self, timer: Timer, job: Job | None) -> HandOffReport:
        """Write a new timer, then dispatch it directly if a tick already claimed its bucket.

        Both sides use strongly consistent reads (the tick claims before it queries), so either
        the tick's query sees this timer or this read sees the claim: never neither. A FIRE timer of a
        job with `expect` is written with its occurrence's CHECK timer (absence alerts)."""
        check = check_timer(job, timer.due_ms, timer.segment) if job and timer.kind is TimerKind.FIRE else None
        written = self._clock.now_ms()
        self._timers.put_many([timer] + ([check] if check else []), written_ms=written)
        put_ms = self._clock.now_ms() - written
        # Crash here: the timer is durable; if its bucket was claimed, the caller's retry
        # places it again (idempotent) and this time dispatches it.
        horizon = minute_of(self._clock.now_ms()) + DIRECT_DISPATCH_HORIZON_MINUTES
        near = [t for t in (timer, check) if t is not None and t.minute <= horizon]
        if not near:
            return HandOffReport()
        watermark = self._watermarks.get(timer.segment)
        report = HandOffReport()
        claimed = self._mine(near, watermark, written, put_ms, report)
        if not claimed:
            return report
        jobs = {(job.tenant_id, job.job_id): job} if job else {}
        report.add(self._hand_off(claimed, jobs, watermark.claimed_through))
        return report

    @staticmethod
    def _mine(timers: list[Timer], watermark: Watermark | None, written: int, put_ms: int,
              report: HandOffReport) -> list[tuple[Timer, bool | None]]:
        """Of the timers a writer just wrote (its clock `written` before the put, which took
        `put_ms`), those it hands off itself, each with its path (`Dispatch.solo`): those in a bucket
        claimed now, but not a FIRE the tick's query surely read (domain/timers.py `surely_read`):
        that one the tick sends, in a pack. A FIRE the tick sends alone, should its query have read
        it, goes alone from here too; one the tick would pack but may have missed goes alone, counted
        (`uncertain`: never lost, twice if the tick did read it). A claim instant not kept (claimed
        before the upgrade): sent undecided, as before, the worker deciding from the job's age. A sole
        timer (Timer.sole: the tick's own next timer of a fire it sent in a pack) is never sent here:
        a tick claims a bucket only after the bucket before it is done, every page of which some run
        handed off, its next timers written, before that mark, so the query after the claim read it."""
        mine: list[tuple[Timer, bool | None]] = []
        for timer in timers:
            if not is_claimed(timer.minute, watermark):
                continue
            assert watermark is not None
            if timer.sole:
                continue  # the claiming run's query read a copy: it rides that run's pack
            claimed_at = watermark.claimed_at(timer.minute)
            alone = sent_alone(written, claimed_at)
            if alone is False and timer.kind is TimerKind.FIRE:
                if surely_read(written, claimed_at, put_ms):
                    continue  # the tick's own: it rides its pack
                # Maybe the tick's too (then also in its pack), maybe missed by its query: sent alone.
                report.uncertain += 1
                alone = True
            mine.append((timer, alone))
        return mine

    def hand_off(self, timers: list[Timer], jobs: dict[tuple[str, str], Job], claimed_through: int,
                 calendars: CalendarCache | None = None, claimed_at: int | None = None,
                 snapshots: dict | None = None, align_cost: float | None = None) -> HandOffReport:
        """Dispatch these due timers. For recurring jobs, write the next FIRE timer (computed
        from the due instant, never from now); occurrences that fall in already-claimed buckets
        are dispatched here too, since no tick will read them. `calendars`: the run's cache of
        exclusion calendars (a new one, read only if a job names one, when not given).
        `claimed_at`: the instant of their bucket's claim (the tick's), which with each timer's
        write instant decides its fires' path (domain/timers.py `sent_alone`). `snapshots`: the
        jobs' plain items, read whole after the bucket's claim (the tick's): their pack entries may
        carry them to the worker (domain/packs.py `snapshot_of`; service/fences.py). `align_cost`: the
        tick's small hand-off (service/tick.py): its messages go out just before whole seconds ahead
        of their instants when that is worth the wait (store/queues.py `aligned_plan`)."""
        return self._hand_off([(t, sent_alone(t.written_ms, claimed_at, t.sole)) for t in timers], jobs,
                              claimed_through, calendars, None if self.multi_region else snapshots,
                              sole=not self.multi_region, align_cost=align_cost)

    def _hand_off(self, timers: list[tuple[Timer, bool | None]], jobs: dict[tuple[str, str], Job],
                  claimed_through: int, calendars: CalendarCache | None = None,
                  snapshots: dict | None = None, sole: bool = False,
                  align_cost: float | None = None) -> HandOffReport:
        """hand_off(), each timer with the path of its fires (`Dispatch.solo`). `sole`: the tick's
        query read these timers (single region): the next timer of a fire it sends in a pack is sole
        (Timer.sole): only its bucket's query sends it. Not for a writer's own hand-off (a fire it
        sends may be the tick's too, and so may its next timer: what a later pass hands off here was
        found claimed, and `_mine` never packs a FIRE), nor with regions (a take rewinds the
        watermarks, and what the former holder's query read may never run)."""
        report = HandOffReport()
        calendars = calendars if calendars is not None else self.calendar_cache()
        # Exclusion calendars: one read for the calendars this page's firing jobs name, if not read yet.
        calendars.load(jobs.get((t.tenant_id, t.job_id)) for t, _ in timers if t.kind is TimerKind.FIRE)
        now = self._clock.now_ms()
        outgoing: list[Outgoing] = []
        pending = timers
        claimed = claimed_through
        sending: Future | None = None  # the first pass's sends, beside the next-timer writes
        try:
            while pending:
                next_timers: list[Timer] = []
                for timer, alone in pending:
                    following = self._dispatch(timer, jobs.get((timer.tenant_id, timer.job_id)), claimed, now,
                                               outgoing, report, calendars, alone, snapshots)
                    if following is not None:
                        # Not of a misfire: its next timer depends on `now`, so another run's copy may differ.
                        next_timers.append(replace(following, sole=True) if sole and alone is False
                                           and timer.due_ms >= now - MISFIRE_GRACE_MS else following)
                pending = []
                # A later pass hands off timers of buckets another tick claimed after this one read
                # its jobs: a change between that read and that claim is fenced only for what the
                # change saw claimed, so those fires carry no snapshot (the worker reads their jobs).
                snapshots = None
                # Absence alerts: the CHECK timers of this pass, written with its next timers (and
                # dispatched the same way if a tick already claimed their bucket).
                checks, report.checks = report.checks, []
                if next_timers or checks:
                    if sending is None and outgoing:
                        # The sends go out while the next timers are written (neither needs the
                        # other; the bucket is marked done only after both).
                        report.dispatched += len(outgoing)
                        sending = self._sender.submit(self._send, outgoing, align_cost)
                        outgoing = []
                    align_cost = None  # the passes after the first: fires of buckets claimed meanwhile
                    # The next FIRE timers go in timer packs, one per bucket they fall in (CHECKs single).
                    written = self._clock.now_ms()
                    self._timers.put_many(next_timers + checks, pack=True, written_ms=written)
                    put_ms = self._clock.now_ms() - written
                    report.next_timers += len(next_timers)
                    # A next timer may land in a bucket that a tick claimed meanwhile: same
                    # protocol as place(), one consistent read per segment involved.
                    near = [t for t in next_timers + checks
                            if t.minute <= minute_of(now) + DIRECT_DISPATCH_HORIZON_MINUTES]
                    for segment in sorted({t.segment for t in near}):
                        watermark = self._watermarks.get(segment)
                        mine = self._mine([t for t in near if t.segment == segment], watermark, written, put_ms,
                                          report)
                        if mine:
                            claimed = max(claimed, watermark.claimed_through)
                            pending.extend(mine)
            if report.catch_up_timers:
                # Due more than 14 minutes ahead: far beyond any claimed bucket, so no watermark read.
                self._timers.put_many(report.catch_up_timers)
            # Crash before or during the send: the bucket is not marked done, so it is handed off
            # again; the deterministic execution ids make the repeat a duplicate send, not a rerun.
            if outgoing:
                report.sqs_batches += self._send(outgoing, align_cost)
            report.dispatched += len(outgoing)
        finally:
            if sending is not None:
                # Waited for whatever happened above; a failed send raises here (SendFailed).
                report.sqs_batches += sending.result()
        for job, occurrence in report.skipped[:MAX_SKIPPED_RECORDS]:
            self._executions.put_skipped(job.tenant_id, job.job_id, execution_id_for(job.job_id, occurrence),
                                         occurrence, job.generation, "skipped: missed while the scheduler was behind "
                                         "(misfirePolicy SKIP)", now, skip_reason="MISSED_WINDOW")
        for job, plan in report.missed_windows:
            # One record per catch-up, whatever the count: a job missing a minute's fire for a
            # year writes one item, not 525,600. Conditional on the id: a repeat writes nothing.
            self._executions.put_missed_window(job.tenant_id, job.job_id,
                                               execution_id_for(job.job_id, plan.skipped_from_ms),
                                               plan.skipped_from_ms, job.generation, plan.skipped_count,
                                               plan.skipped_through_ms, plan.uncounted_before_ms, now)
        self._record_excluded(report.excluded, now)
        report.exclusions = len(report.excluded)
        return report

    def _send(self, outgoing: list[Outgoing], align_cost: float | None) -> int:
        return self._lanes.send(outgoing) if align_cost is None else self._lanes.send(outgoing, align_cost=align_cost)

    def _record_excluded(self, excluded: list, now: int) -> None:
        """Exclusion calendars: one conditional put per occurrence on a date the tenant chose to skip
        (SKIPPED, reason EXCLUDED), a few in flight. Not capped: each replaces a fire, which would
        have cost more writes. A crash before them leaves the bucket not done: handed off again,
        they are written then (a put that finds its execution does nothing)."""
        def record(entry) -> None:
            job, occurrence = entry
            self._executions.put_skipped(job.tenant_id, job.job_id, execution_id_for(job.job_id, occurrence),
                                         occurrence, job.generation, "skipped: the date is in an exclusion calendar "
                                         f"({', '.join(job.spec.exclude_calendars)})", now, skip_reason=EXCLUDED)
        if len(excluded) == 1:
            record(excluded[0])
        elif excluded:
            list(self._recorder.map(record, excluded))

    def _dispatch(self, timer: Timer, job: Job | None, claimed: int, now: int, outgoing: list[Outgoing],
                  report: HandOffReport, calendars: CalendarCache | None = None,
                  alone: bool | None = None, snapshots: dict | None = None) -> Timer | None:
        """Add what this due timer asks for to `outgoing`; return the job's next timer, if any."""
        if timer.kind is TimerKind.CHECK:
            # Absence alerts: checked whatever became of the job (service/expectations.py decides);
            # the dispatch's due instant is the deadline, the occurrence is in the execution id.
            assert timer.execution_id is not None
            dispatch = Dispatch(DispatchKind.CHECK, timer.tenant_id, timer.job_id, timer.execution_id, timer.due_ms,
                                timer.generation)
            outgoing.append(Outgoing(job.spec.priority if job else Priority.NORMAL, dispatch, timer.due_ms))
            return None
        if timer.kind in (TimerKind.LEASE, TimerKind.SWEEP):
            # Checked whatever became of the job: a running attempt must always be resolved,
            # and a PENDING execution must always end.
            assert timer.execution_id is not None
            kind = DispatchKind.LEASE if timer.kind is TimerKind.LEASE else DispatchKind.SWEEP
            dispatch = Dispatch(kind, timer.tenant_id, timer.job_id, timer.execution_id,
                                scheduled_ms_of(timer.execution_id), timer.generation, timer.attempt)
            priority = job.spec.priority if job else Priority.NORMAL
            outgoing.append(Outgoing(priority, dispatch, timer.due_ms))
            return None
        if job is None or job.generation != timer.generation or not job.fires():
            report.stale += 1  # deleted, updated, paused or finished since: drop
            return None
        if timer.kind is TimerKind.CATCHUP:
            # A missed occurrence released at its turn (domain/catchup.py); the schedule goes on elsewhere.
            assert timer.execution_id is not None
            dispatch = Dispatch(DispatchKind.FIRE, job.tenant_id, job.job_id, timer.execution_id,
                                scheduled_ms_of(timer.execution_id), job.generation, catch_up=True)
            outgoing.append(Outgoing(job.spec.priority, dispatch, timer.due_ms))
            report.catch_ups += 1
            return None
        if timer.kind is TimerKind.RETRY:
            assert timer.execution_id is not None
            dispatch = Dispatch(DispatchKind.RETRY, job.tenant_id, job.job_id, timer.execution_id,
                                scheduled_ms_of(timer.execution_id), job.generation, timer.attempt,
                                run=timer.runs or None)
            outgoing.append(Outgoing(job.spec.priority, dispatch, timer.due_ms))
            return None
        return self._fire_chain(timer, job, claimed, now, outgoing, report, calendars, alone, snapshots)

    def _fire_chain(self, timer: Timer, job: Job, claimed: int, now: int,
                    outgoing: list[Outgoing], report: HandOffReport,
                    calendars: CalendarCache | None = None, alone: bool | None = None,
                    snapshots: dict | None = None) -> Timer | None:
        """Dispatch this occurrence and any later ones inside claimed buckets; return the timer
        of the first occurrence beyond them (None when the schedule has ended). `alone`: the
        path of these fires (`Dispatch.solo`), the timer's: whoever else reads it decides alike.
        `snapshots`: an occurrence of a claimed bucket, not long past, carries its job's snapshot
        (what a change fences: service/fences.py)."""
        # Not for a timer left in another segment by a change of the segment count: a change fences
        # the pack partitions of the job's segment as the API computes it now.
        snapshot = snapshot_of(job, snapshots.get((job.tenant_id, job.job_id))) if (
            snapshots is not None and alone is not True and timer.segment == self.segment_of(job.job_id)) else None
        schedule = job.spec.schedule
        policy = job.spec.misfire_policy
        nominal: int | None = job.nominal_of(timer.due_ms)
        # Schedule bounds: the fires counted so far ride the chain of FIRE timers (written here
        # anyway), so maxRuns costs no call; the chain ends with the maxRuns-th fire. (A job with
        # maxRuns has no catch-up policy: the API refuses the two together.)
        runs = timer.runs
        max_runs = job.spec.max_runs if schedule.recurring else None
        reach = claimed  # the last minute dispatched here rather than through a next timer
        while nominal is not None and minute_of(job.fire_at(nominal)) <= reach:
            if max_runs is not None and runs >= max_runs:
                return None
            occurrence = job.fire_at(nominal)
            if calendars is not None and calendars.excludes(job, nominal):
                # Exclusion calendars: on a date the tenant excluded, recorded SKIPPED (EXCLUDED), not run.
                report.excluded.append((job, occurrence))
                nominal = schedule.next_fire_after(nominal)
                continue
            late = occurrence < now - MISFIRE_GRACE_MS
            if late and schedule.recurring and policy is MisfirePolicy.RUN_ALL and job.spec.catch_up is not None:
                nominal = self._catch_up(job, timer.segment, nominal, now, outgoing, report, calendars)
                if claimed < minute_of(now):
                    # The tick is behind real time (an outage): a next timer now would be read
                    # late again and start a second catch-up beside this one. The occurrences
                    # of the next 14 minutes go out by SQS delay instead, on time.
                    reach = max(claimed, minute_of(now + CATCH_UP_SQS_REACH_MS) - 1)
                continue
            if late and schedule.recurring and policy is MisfirePolicy.SKIP:
                # Missed while the scheduler was behind: recorded SKIPPED, not run. (A one-off
                # job always runs, late: skipping it would lose it.)
                report.misfires_skipped += 1
                report.skipped.append((job, occurrence))
                nominal = schedule.next_fire_after(nominal)
                continue
            runs += 1
            dispatch = Dispatch(DispatchKind.FIRE, job.tenant_id, job.job_id,
                                execution_id_for(job.job_id, occurrence), occurrence, job.generation,
                                run=runs if schedule.recurring else None, solo=alone,
                                snapshot=snapshot if minute_of(occurrence) <= claimed
                                and occurrence >= now - SNAPSHOT_TRUST_MS else None)
            # A tenant's herd enters the lane at its fair share a second (service/fairness.py).
            outgoing.append(Outgoing(job.spec.priority, dispatch, self._fair.visible_at(job.tenant_id, occurrence)))
            if job.spec.expect is not None and not (timer.kind is TimerKind.FIRE and occurrence == timer.due_ms):
                # Absence alerts: an occurrence dispatched without a FIRE timer of its own gets its
                # CHECK here (a FIRE timer's was written with it).
                report.checks.append(check_timer(job, occurrence, timer.segment))
            # A one-off job's chain ends here too: its schedule has no occurrence after its one.
            # RUN_ONCE: this late occurrence was the one catch-up; the schedule resumes after now.
            # RUN_ALL (and any occurrence on time): the next one follows from this due instant.
            after = max(nominal, job.nominal_of(now)) if late and policy is MisfirePolicy.RUN_ONCE else nominal
            nominal = schedule.next_fire_after(after)
        if nominal is None or (max_runs is not None and runs >= max_runs):
            return None
        if job.spec.expect is not None:  # absence alerts: the next FIRE timer's CHECK, written with it
            report.checks.append(check_timer(job, job.fire_at(nominal), timer.segment))
        return Timer(job.fire_at(nominal), TimerKind.FIRE, job.tenant_id, job.job_id, job.generation, timer.segment,
                     runs=runs)

    @staticmethod
    def _catch_up(job: Job, segment: int, nominal: int, now: int, outgoing: list[Outgoing],
                  report: HandOffReport, calendars: CalendarCache | None = None) -> int | None:
        """Every occurrence missed from `nominal` on, at once: the newest maxCatchUp are released
        at catchUpPerMinute (by SQS delay within its reach, by CATCHUP timers beyond it), the
        older ones become one MISSED_WINDOW record. Returns the first occurrence not missed."""
        plan: CatchUpPlan = plan_catch_up(job, nominal, now, MISFIRE_GRACE_MS)
        for occurrence, release in plan.releases:
            if calendars is not None and calendars.excludes(job, job.nominal_of(occurrence)):
                report.excluded.append((job, occurrence))  # an excluded date is not caught up either
                continue
            execution_id = execution_id_for(job.job_id, occurrence)
            if release - now <= CATCH_UP_SQS_REACH_MS:
                dispatch = Dispatch(DispatchKind.FIRE, job.tenant_id, job.job_id, execution_id, occurrence,
                                    job.generation, catch_up=True)
                outgoing.append(Outgoing(job.spec.priority, dispatch, release))
            else:
                report.catch_up_timers.append(Timer(release, TimerKind.CATCHUP, job.tenant_id, job.job_id,
                                                    job.generation, segment, execution_id))
        report.catch_ups += len(plan.releases)
        if plan.skipped_from_ms is not None:
            report.missed_windows.append((job, plan))
            report.misfires_skipped += plan.skipped_count
        return plan.resume_nominal
