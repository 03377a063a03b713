"""Job use cases behind the API. Every read and write is scoped to the caller's tenant: another
tenant's job or execution answers exactly like a missing one."""
from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import replace as replaced_with

from jobsched.domain.clock import Clock
from jobsched.domain.errors import ChangedConcurrently, ConditionLost, Conflict, NotFound, UnprocessableRequest
from jobsched.domain.executions import (
    Dispatch,
    DispatchKind,
    Execution,
    ExecutionStatus,
    execution_id_for,
    job_id_of,
    manual_execution_id,
)
from jobsched.domain.flow import backfill_spread_ms
from jobsched.domain.jobs import Job, JobSpec, JobState
from jobsched.domain.stats import MAX_RECORDS, WINDOWS_MS, job_stats
from jobsched.domain.occurrences import (MAX_WINDOW_MS, MISSED_WINDOW_REACH_MS, Occurrence, ledger,
                                         occurrence_times, record_row)
from jobsched.domain.jobs import MisfirePolicy  # catch-up that does not flood
from jobsched.domain.timers import Timer, TimerKind
from jobsched.service.creation import (IDEMPOTENCY_TTL_SECONDS, Created, JobCreation, NewJob, Quotas,
                                       body_hash)
from jobsched.service.calendars import CalendarCache
from jobsched.service.fences import Fences
from jobsched.service.handoff import HandOff
from jobsched.store.jobs import name_prefix as name_prefix_of
from jobsched.store.jobs import tag_prefix
from jobsched.service.outcomes import Outcomes
from jobsched.service.pack_reads import PackReads
from jobsched.store.dynamo import Page, decode_cursor, encode_cursor
from jobsched.store.jobs import active_counter
from jobsched.store.queues import Outgoing

# A bulk action changes at most this many matching jobs per request (about 100 conditional job
# writes and their index entries: a few seconds, far inside the API's 20 s); the rest is done by
# the same request repeated with the answer's bulkId. Its record is kept a week.
BULK_PAGE_MATCHES = 100
BULK_RETENTION_S = 7 * 86_400
# Regions: a bulk action's change of one job in the region that holds it (job id, action, reason)
# -> None: this region holds it (change it here); True: changed there; False: its region answered
# that it changed meanwhile or does not apply. Raises WrongRegion when no region can take it now.
ChangeElsewhere = Callable[[str, str, "str | None"], "bool | None"]
# A trigger's or redrive's PENDING execution that no worker has claimed after this long lost its
# message (or waited behind a backlog): the SWEEP timer armed with it runs it then.
SWEEP_AFTER_MS = 5 * 60_000


MAX_BACKFILL = 1000
# A plain pause, resume, cancel or replace (no If-Match) that loses its job's optimistic lock to a
# concurrent change reads the job again and makes its change again, this many times in all.
CHANGE_TRIES = 5


def retried_without_if_match(method):
    """The change made again on a fresh read when another change was written between its read and
    its write (ChangedConcurrently): a client that did not ask for optimistic locking does not see
    it. Bounded (CHANGE_TRIES). With If-Match the lock is the client's: the fresh read's version
    no longer matches it, and the answer is 409 as before (JobsService.replace)."""
    @functools.wraps(method)
    def change(self, *args, **kwargs):
        for attempt in range(1, CHANGE_TRIES + 1):
            try:
                return method(self, *args, **kwargs)
            except ChangedConcurrently:
                if attempt == CHANGE_TRIES:
                    raise
    return change


def _can(action: str, job: Job) -> bool:
    """Whether the action applies to the job at all (a bulk action passes over the rest)."""
    if action == "PAUSE":
        return job.state is JobState.ACTIVE and job.spec.schedule.recurring
    if action == "RESUME":
        return job.state is JobState.PAUSED
    return job.state in (JobState.ACTIVE, JobState.PAUSED)


class JobsService:
    def __init__(self, stores, handoff: HandOff, clock: Clock, quotas: Quotas = Quotas()) -> None:
        self._quotas = quotas
        self._jobs = stores.jobs
        self._executions = stores.executions
        self._lanes = stores.lanes
        self._handoff = handoff
        self._clock = clock
        self._outcomes = Outcomes(stores, handoff, clock)
        self._stores_calendars = stores.calendars
        self._runs = self._outcomes.runs
        # Job snapshots: a change to an ACTIVE job fences what a tick handed off with its snapshot.
        self._fences = Fences(stores, handoff)
        self._creation = JobCreation(stores.jobs, handoff, clock, quotas, self._place_first_timer, self._fences)
        self._packs = PackReads(stores, handoff.segment_of, clock)  # executions recorded in their packs

    # --- jobs ------------------------------------------------------------------------------
    def create(self, tenant_id: str, spec: JobSpec, request_hash: str,
               idempotency_key: str | None = None) -> tuple[Job, bool]:
        """Returns the job and whether this call created it (False: an idempotent repeat).
        `request_hash`: the request's body_hash, which an Idempotency-Key's repeat must match."""
        return self._creation.create(tenant_id, NewJob(spec, request_hash, idempotency_key))

    def create_many(self, tenant_id: str, entries: list[NewJob], batch_key: str | None = None,
                    batch_hash: str = "") -> list[Created]:
        """A batch create: a result per entry, in order (service/creation.py). `batch_key`: the
        request's Idempotency-Key, remembered with `batch_hash`."""
        if batch_key:
            self._creation.check_batch_key(tenant_id, batch_key, batch_hash)
        return self._creation.create_many(tenant_id, entries)

    def get(self, tenant_id: str, job_id: str) -> Job:
        job = self._jobs.get(tenant_id, job_id, consistent=True) if job_id.startswith("job_") else None
        if job is None:
            raise NotFound(f"no job {job_id}")
        return job

    # --- schedule bounds: the fires counted ---------------------------------------------------
    def counted(self, job: Job) -> Job:
        """The job with its runCount as of now: the item's count (recorded by each write of the
        job) or, for a recurring job still firing, the newest fire's number its claim recorded
        (one small query; the hand-off counts in its timers and writes no job item per fire)."""
        if not job.spec.schedule.recurring or job.state not in (JobState.ACTIVE, JobState.PAUSED):
            return job
        latest = self._executions.latest_run(job.job_id)
        return replaced_with(job, run_count=latest) if latest is not None and latest > job.run_count else job

    def get_counted(self, tenant_id: str, job_id: str) -> Job:
        return self.counted(self.get(tenant_id, job_id))

    def list(self, tenant_id: str, state: JobState | None, limit: int, cursor: str | None,
             tags: list[tuple[str, str]] = (), name_prefix: str | None = None) -> Page:
        """The tenant's jobs; with tags (all must match) or a name prefix, read through the index
        of the first one (store/jobs.py), each job checked against all the filters."""
        if not tags and not name_prefix:
            if state is not None:  # the state index: the cost follows the matches, not the history
                return self._jobs.list_in_state(tenant_id, state, limit, cursor)
            return self._jobs.list_for_tenant(tenant_id, None, limit, cursor)
        prefix = tag_prefix(*tags[0]) if tags else name_prefix_of(name_prefix)

        def keep(job: Job) -> bool:
            return (all(job.spec.tags.get(k) == v for k, v in tags)
                    and (name_prefix is None or job.spec.name.startswith(name_prefix))
                    and (state is None or job.state is state))

        return self._jobs.list_indexed(tenant_id, prefix, keep, limit, cursor)

    def bulk(self, tenant_id: str, action: str, tags: list[tuple[str, str]], state: JobState | None,
             name_prefix: str | None, dry_run: bool, reason: str | None = None,
             bulk_id: str | None = None, all_jobs: bool = False,
             elsewhere: "ChangeElsewhere | None" = None) -> tuple[dict, bool]:
        """One action on every matching job, a bounded page per request (BULK_PAGE_MATCHES): the
        API's reserved concurrency, which heartbeats and completions share, is never held for a
        tenant's whole job list. Returns the answer and whether the operation is done. A bulk that
        does not end in its first page is recorded (conditional put) with its position and counts;
        the same request repeated with its `bulkId` does the next page, from that position (never
        from the first match again), and a repeat of a done one only answers its totals.

        Each job's change is the single-job route's own conditional write, and a job already in
        the asked state is passed over: a page done twice (two requests at once, a crash before
        the position moved) changes nothing twice, and only the request whose conditional write
        moves the position counts it. A dry run's `applied` counts the jobs the action would change
        (a pause does not change a COMPLETED job). An empty filter acts on every job of the tenant:
        only when asked for explicitly (`all_jobs`).

        Regions (`elsewhere`): a job whose segment another region holds is changed there, as its
        single-job route is (handlers/forwarding.py); one that no region can change now raises WrongRegion
        (503): the same request repeated does the page again, passing over what it changed."""
        if not tags and state is None and not name_prefix and not all_jobs:
            raise UnprocessableRequest.for_field(
                "filter", 'is empty: it would match every job of the tenant; give a filter, or "all": true')
        request = {"action": action, "tags": [list(t) for t in tags], "state": state.value if state else None,
                   "namePrefix": name_prefix, "dryRun": dry_run, "reason": reason, "all": all_jobs}
        digest = body_hash(request)
        if bulk_id is None:
            progress = {"matched": 0, "applied": 0, "jobIds": [], "cursor": None, "pages": 0}
        else:
            progress = self._jobs.get_bulk(tenant_id, bulk_id)
            if progress is None:
                raise NotFound(f"no bulk operation {bulk_id}")
            if progress["requestHash"] != digest:
                raise Conflict(f"bulk operation {bulk_id} was made with another action or filter")
            if progress["done"]:
                return self._bulk_answer(progress, bulk_id), True
        matched, applied, ids = self._bulk_page(tenant_id, action, tags, state, name_prefix, dry_run, reason,
                                                progress["cursor"], elsewhere)
        cursor = matched.next_cursor
        fields = {"matched": progress["matched"] + len(matched.items), "applied": progress["applied"] + applied,
                  "jobIds": (progress["jobIds"] + ids)[:100], "cursor": cursor, "done": cursor is None,
                  "updatedMs": self._clock.now_ms()}
        if bulk_id is None:
            if cursor is None:  # small: done in one request, the answer as it always was
                return self._bulk_answer(fields, None), True
            bulk_id = f"bulk_{self._clock.now_ms():012x}{uuid.uuid4().hex[:20]}"
            self._jobs.put_bulk(tenant_id, bulk_id, {**fields, "pages": 1, "requestHash": digest,
                                                     "expiresAt": self._clock.now_ms() // 1000 + BULK_RETENTION_S})
            return self._bulk_answer(fields, bulk_id), False
        if not self._jobs.advance_bulk(tenant_id, bulk_id, progress["pages"], fields):
            fields = self._jobs.get_bulk(tenant_id, bulk_id) or fields  # another request did this page
        return self._bulk_answer(fields, bulk_id), bool(fields["done"])

    def _bulk_page(self, tenant_id, action, tags, state, name_prefix, dry_run, reason, cursor, elsewhere=None):
        change = {"PAUSE": lambda job_id: self.pause(tenant_id, job_id, reason),
                  "RESUME": lambda job_id: self.resume(tenant_id, job_id),
                  "CANCEL": lambda job_id: self.cancel(tenant_id, job_id)}[action]
        wanted = {"PAUSE": JobState.PAUSED, "RESUME": JobState.ACTIVE, "CANCEL": JobState.CANCELLED}[action]
        page = self.list(tenant_id, state, BULK_PAGE_MATCHES, cursor, tags, name_prefix)
        applied, ids = 0, []
        for job in page.items:
            if not dry_run:
                ids.append(job.job_id)
            if job.state is wanted or not _can(action, job):
                continue
            if dry_run:
                applied += 1  # what the same request without dryRun would change now
                ids.append(job.job_id)  # and which: not every match
                continue
            try:
                decided = elsewhere(job.job_id, action, reason) if elsewhere is not None else None
                if decided is None:  # this region holds the job: changed here
                    change(job.job_id)
                elif not decided:  # its region answered that it changed meanwhile (or not applicable)
                    continue
                applied += 1
            except Conflict:
                pass  # changed meanwhile (or not applicable): left as it is
        return page, applied, ids

    @staticmethod
    def _bulk_answer(progress: dict, bulk_id: str | None) -> dict:
        return {"matched": progress["matched"], "applied": progress["applied"], "jobIds": progress["jobIds"],
                "bulkId": bulk_id, "done": bool(progress["done"])}

    def backfill(self, tenant_id: str, job_id: str, from_ms: int, to_ms: int) -> list[str]:
        """Run the schedule's occurrences in [from, to) now, one execution each, with the ids
        they had when fired on time: an occurrence that already ran (or a repeated backfill) is a
        duplicate that its claim absorbs, never a second run."""
        job = self.get(tenant_id, job_id)
        if job.state is JobState.CANCELLED:
            raise Conflict("job is CANCELLED; a cancelled job does not run")
        if to_ms <= from_ms:
            raise UnprocessableRequest.for_field("to", "must be after from")
        if to_ms > self._clock.now_ms():
            # A future occurrence run now would take its on-time id: it would not run on time.
            raise UnprocessableRequest.for_field("to", "must not be in the future")
        occurrences = []
        nominal = job.spec.schedule.next_fire_after(job.nominal_of(from_ms) - 1)
        while nominal is not None and job.fire_at(nominal) < to_ms:
            if len(occurrences) == MAX_BACKFILL:
                raise UnprocessableRequest.for_field("to", f"the window holds more than {MAX_BACKFILL} occurrences")
            occurrences.append(job.fire_at(nominal))
            nominal = job.spec.schedule.next_fire_after(nominal)
        control = job.spec.flow_control
        now = self._clock.now_ms()
        # A flow-controlled job's backfill is sent at the pace its key admits: all at once, every
        # execution but a few would be held back together, each costing the key's items writes.
        outgoing = [Outgoing(job.spec.priority, Dispatch(DispatchKind.BACKFILL, tenant_id, job_id,
                                                         execution_id_for(job_id, at), at, job.generation),
                             0 if control is None or n == 0 else now + backfill_spread_ms(
                                 n, len(occurrences), control.max_concurrency, control.rate_per_second))
                    for n, at in enumerate(occurrences)]
        if outgoing:
            self._lanes.send(outgoing)
        return [o.dispatch.execution_id for o in outgoing]

    @retried_without_if_match
    def replace(self, tenant_id: str, job_id: str, spec: JobSpec, if_match: int | None) -> Job:
        """New schedule, target, payload and policies. The generation moves on, so the old
        schedule's timers and in-flight messages are dropped; the new one starts from now."""
        job = self.get(tenant_id, job_id)
        if if_match is not None and if_match != job.version:
            raise Conflict(f"If-Match {if_match} does not match the job's version {job.version}")
        now = self._clock.now_ms()
        job = self.counted(job)
        if spec.max_runs is not None and spec.schedule.recurring and job.run_count >= spec.max_runs:
            # A job stays in its state through an update: one that would have no run left is refused.
            raise UnprocessableRequest.for_field("maxRuns", f"the job has already fired {job.run_count} times")
        updated = job.replaced(spec, now)
        claimed = self._fences.before_change(job, now)
        self._jobs.save(job, updated)
        self._fences.after_change(job, now, claimed)
        if updated.state is JobState.ACTIVE:
            self._place_first_timer(updated, updated.spec.schedule.first_fire())
        return updated

    @retried_without_if_match
    def cancel(self, tenant_id: str, job_id: str) -> Job:
        job = self.get(tenant_id, job_id)
        now = self._clock.now_ms()
        cancelled = job.cancelled(now)
        if cancelled is job:
            self._fences.again(job, now)  # a repeat: its fences again (they may have failed)
            return job
        claimed = self._fences.before_change(job, now)
        self._jobs.save(job, cancelled)
        self._fences.after_change(job, now, claimed)
        if cancelled is not job and job.state in (JobState.ACTIVE, JobState.PAUSED):
            self._jobs.give_back_quota(tenant_id, active_counter(job.quota_shard))
        return cancelled

    @retried_without_if_match
    def pause(self, tenant_id: str, job_id: str, reason: str | None = None) -> Job:
        job = self.counted(self.get(tenant_id, job_id))
        now = self._clock.now_ms()
        paused = job.paused(now, reason)
        if paused is job:
            self._fences.again(job, now)  # a repeat: its fences again (they may have failed)
            return job
        claimed = self._fences.before_change(job, now)
        self._jobs.save(job, paused)
        self._fences.after_change(job, now, claimed)
        return paused

    @retried_without_if_match
    def resume(self, tenant_id: str, job_id: str) -> Job:
        """The next fire is computed from now, not from the pause: missed ones are not run, except
        under a catch-up policy (below)."""
        job = self.get(tenant_id, job_id)
        now = self._clock.now_ms()
        counted = self.counted(job)
        resumed = job.resumed(now, counted.run_count)
        if resumed is job:
            return job
        self._jobs.save(job, resumed)
        if resumed.state is JobState.COMPLETED:  # no run left (maxRuns, endAt): it ends here
            self._jobs.give_back_quota(tenant_id, active_counter(job.quota_shard))
            return resumed
        self._place_first_timer(resumed, resumed.spec.schedule.next_fire_after(now))
        if resumed.spec.catch_up is not None and resumed.spec.misfire_policy is MisfirePolicy.RUN_ALL:
            # Catch-up that does not flood: what the pause missed (from the pause, or the last
            # change while paused) is caught up, bounded and spread, by the hand-off. Placed after
            # the next timer: if this fails, the job still fires from now on (the catch-up's own
            # chain reaches that same timer, one item, and its same execution ids).
            self._place_first_timer(resumed, resumed.spec.schedule.next_fire_after(job.updated_ms))
        return resumed

    def _arm_sweep(self, job: Job, execution_id: str, attempt: int, now_ms: int) -> None:
        timer = Timer(now_ms + SWEEP_AFTER_MS, TimerKind.SWEEP, job.tenant_id, job.job_id, job.generation,
                      self._handoff.segment_of(job.job_id), execution_id, attempt)
        self._handoff.place(timer, job)

    def _place_first_timer(self, job: Job, nominal_ms: int | None) -> None:
        if nominal_ms is None or job.state is not JobState.ACTIVE:
            return
        # The new chain of timers counts on from the fires counted so far (schedule bounds).
        timer = Timer(job.fire_at(nominal_ms), TimerKind.FIRE, job.tenant_id, job.job_id, job.generation,
                      self._handoff.segment_of(job.job_id), runs=job.run_count)
        self._handoff.place(timer, job)

    # --- executions ------------------------------------------------------------------------
    def trigger(self, tenant_id: str, job_id: str, idempotency_key: str | None = None) -> Execution:
        """One run now, outside the schedule, with its own execution id."""
        job = self.get(tenant_id, job_id)
        if job.state is JobState.CANCELLED:
            raise Conflict("job is CANCELLED; a cancelled job does not run")
        now = self._clock.now_ms()
        execution_id = manual_execution_id(job_id, now)
        if idempotency_key:
            earlier = self._jobs.remember_request(tenant_id, f"trigger#{job_id}", idempotency_key, execution_id,
                                                  body_hash({"jobId": job_id}), now // 1000, IDEMPOTENCY_TTL_SECONDS)
            if earlier is not None:
                existing = self._executions.get(job_id, earlier[0])
                if existing is not None:
                    return existing
                execution_id = earlier[0]
        # The sweep is armed before the record: a crash between the record and the send leaves a
        # PENDING execution that the sweep runs; a crash before the record leaves a sweep that
        # finds nothing to do.
        self._arm_sweep(job, execution_id, 1, now)
        try:
            execution = self._executions.put_pending(tenant_id, job_id, execution_id, now, job.generation)
        except ConditionLost:
            return self.execution(tenant_id, execution_id)
        # Crash before the send: the execution stays PENDING until its sweep runs it; the client's
        # retry with the same Idempotency-Key returns it (the send itself is not repeated).
        dispatch = Dispatch(DispatchKind.MANUAL, tenant_id, job_id, execution_id, now, job.generation)
        self._lanes.send([Outgoing(job.spec.priority, dispatch, 0)])
        return execution

    def executions(self, tenant_id: str, job_id: str, limit: int, cursor: str | None) -> Page:
        return self._packs.page(self.get(tenant_id, job_id), limit, cursor)

    def stats(self, tenant_id: str, job_id: str, window: str) -> dict:
        """Outcomes and lateness of the job's executions scheduled in the last `window`."""
        job = self.get(tenant_id, job_id)
        now = self._clock.now_ms()
        records, complete = self._executions.summaries_between(job_id, now - WINDOWS_MS[window], now + 1, MAX_RECORDS)
        own = {r.scheduled_ms for r in records if not r.manual}
        records += [r for r in self._packs.summaries(job, now - WINDOWS_MS[window], now + 1, MAX_RECORDS)
                    if r.scheduled_ms not in own]
        if len(records) > MAX_RECORDS:  # the bound holds over both: the newest are kept
            records, complete = sorted(records, key=lambda r: r.scheduled_ms, reverse=True)[:MAX_RECORDS], False
        return job_stats(records, window, now, complete)

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def occurrences(self, tenant_id: str, job_id: str, from_ms: int, to_ms: int, limit: int,
                    cursor: str | None) -> tuple[list[Occurrence], str | None]:
        """The occurrence ledger of [from_ms, to_ms), oldest first, `limit` a page: each nominal
        occurrence of the job's schedule and what became of it (domain/occurrences.py), and the
        cursor of the next page (None: the window is done). Reads: the job, then per page one
        Query of the records in the page's span and one of the few just before it."""
        job = self.get(tenant_id, job_id)
        position = decode_cursor(cursor, {"after": int})
        after_ms = position["after"] if position else None
        if to_ms <= from_ms:
            raise UnprocessableRequest.for_field("to", "must be after from")
        if to_ms - from_ms > MAX_WINDOW_MS:
            raise UnprocessableRequest.for_field("to", "the window is at most 31 days")
        start = from_ms if after_ms is None else max(from_ms, after_ms + 1)
        if start >= to_ms:
            return [], None  # a cursor at the window's end (or beyond it): nothing is left
        now = self._clock.now_ms()
        # Occurrences of today's schedule before its creation or last replacement never existed;
        # the records of that time (the schedule as it was, or a backfill) are listed as they are.
        since = max(job.created_ms, job.schedule_since_ms)
        rows: list[Occurrence] = []
        if start < since:
            rows = [record_row(r) for r in self._executions.scheduled_between(job_id, start, min(to_ms, since) - 1,
                                                                             limit + 1)]
        times = occurrence_times(job, max(start, since), to_ms, limit + 1 - len(rows)) if len(rows) <= limit else []
        if times:
            records = self._executions.scheduled_between(job_id, times[0], times[-1], 10 * len(times) + 100)
            own = {r.execution_id for r in records}
            records += [e for i, e in self._packs.recorded(job, times).items() if i not in own]
            records.sort(key=lambda e: e.execution_id)
            # The few records just before: a MISSED_WINDOW record or a late RUN_ONCE run there may
            # explain the page's first occurrences.
            before = self._executions.scheduled_between(job_id, max(0, times[0] - MISSED_WINDOW_REACH_MS),
                                                        times[0] - 1, 5, newest_first=True)
            # Exclusion calendars: an occurrence to come on an excluded date shows what it will be.
            rows += ledger(job, times, records, before, now, CalendarCache(self._stores_calendars).excludes)
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (encode_cursor({"after": rows[-1].scheduled_ms}) if more and rows else None)

    def _owned(self, tenant_id: str, execution_id: str) -> tuple[Execution, Job]:
        """The execution and its job, read once; another tenant's execution answers 404 exactly
        like a missing one."""
        job_id = job_id_of(execution_id)
        job = self._jobs.get(tenant_id, job_id) if job_id is not None else None
        execution = self._executions.get(job_id, execution_id) if job is not None else None
        if execution is None and job is not None:
            execution = self._packs.execution(job, execution_id)
        if execution is None or execution.tenant_id != tenant_id:
            raise NotFound(f"no execution {execution_id}")
        return execution, job

    def execution(self, tenant_id: str, execution_id: str) -> Execution:
        return self._owned(tenant_id, execution_id)[0]

    def execution_view(self, tenant_id: str, execution_id: str) -> tuple[Execution, tuple | None]:
        """An execution and, for a run, its steps and the job's step order (one job read)."""
        execution, job = self._owned(tenant_id, execution_id)
        return execution, self._steps_of(job, execution)

    def run_of(self, tenant_id: str, execution: Execution) -> tuple[list[Execution], list[str]] | None:
        """A run's steps (and the job's step order), or None for any other execution."""
        return self._steps_of(self._jobs.get(tenant_id, execution.job_id), execution)

    def _steps_of(self, job: Job | None, execution: Execution) -> tuple[list[Execution], list[str]] | None:
        if execution.run_id is not None or job is None or job.spec.steps is None:
            return None
        return self._executions.run_steps(execution.job_id, execution.execution_id), job.spec.steps.names

    def cancel_execution(self, tenant_id: str, execution_id: str) -> Execution:
        """A waiting execution (PENDING, or FAILED until its retry) never starts again; a running
        one is asked to stop: its next heartbeat answers "cancelled" and it ends CANCELLED, and
        it is not retried. A run: what has not ended is cancelled (service/runs.py). Safe to
        repeat and to race."""
        execution, job = self._owned(tenant_id, execution_id)  # another tenant's answers 404 here
        job_of = job
        job = job if job.spec.steps is not None else None  # a job with steps: a run, or one of its steps
        if job is not None and execution.run_id is None:
            if execution.status is not ExecutionStatus.CANCELLED:
                self._runs.cancel(job, execution)
            return self._executions.get(execution.job_id, execution_id) or execution
        for attempt in range(3):
            if attempt:  # it moved on meanwhile: look again
                execution = self._executions.get(execution.job_id, execution_id) or execution
            try:
                if execution.status in (ExecutionStatus.PENDING, ExecutionStatus.FAILED):
                    cancelled = self._executions.cancel_waiting(execution.job_id, execution_id, self._clock.now_ms())
                    if job is not None:  # a step: what is below it never runs, and its run may end
                        self._runs.step_ended(job, execution_id, ExecutionStatus.CANCELLED)
                    else:  # it has ended: a one-off job's occurrence completes its job
                        self._outcomes.after_cancel(job_of, cancelled)
                    return cancelled
                if execution.status is ExecutionStatus.RUNNING:
                    if execution.cancel_requested:
                        return execution
                    requested = self._executions.request_cancel(execution.job_id, execution_id, execution.attempt)
                    if requested.task is not None:
                        # A container task reports no heartbeat to answer: the worker stops it now
                        # (service/container_tasks.py). Crash before the send: its next look at the
                        # task (RECONCILE_MS at most) sees the request and stops it then.
                        self._lanes.send([Outgoing(job_of.spec.priority, Dispatch(
                            DispatchKind.LEASE, tenant_id, execution.job_id, execution_id, self._clock.now_ms(),
                            job_of.generation, execution.attempt), 0)])
                    return requested
            except ConditionLost:
                continue
            if execution.status is ExecutionStatus.CANCELLED:
                return execution
            raise Conflict(f"execution is {execution.status.value}; only a pending or running one can be cancelled")
        raise Conflict("the execution kept changing; try again")

    def dead_letters(self, tenant_id: str, limit: int, cursor: str | None) -> Page:
        return self._executions.list_dead_letters(tenant_id, limit, cursor)

    def redrive(self, tenant_id: str, execution_id: str) -> Execution:
        """Run a DEAD execution again, as a new attempt of the same execution. A DEAD run runs its
        DEAD and UPSTREAM_FAILED steps again and keeps what succeeded."""
        execution, job = self._owned(tenant_id, execution_id)
        if job.state is JobState.CANCELLED:
            raise Conflict("job is CANCELLED; a cancelled job does not run")
        if job.spec.steps is not None:
            if execution.run_id is not None:
                raise Conflict(f"this is a step of run {execution.run_id}: redrive the run")
            return self._runs.redrive(job, execution)
        if execution.status is not ExecutionStatus.DEAD:
            raise Conflict(f"execution is {execution.status.value}; only a DEAD execution can be redriven")
        # Armed before the reopen, as for a trigger: whatever the crash point, the PENDING
        # execution is run by its sweep or was never written.
        self._arm_sweep(job, execution_id, execution.attempt + 1, self._clock.now_ms())
        try:
            reopened = self._executions.reopen_dead(execution.job_id, execution_id)
        except ConditionLost:
            raise Conflict(f"execution is {execution.status.value}; only a DEAD execution can be redriven") from None
        # Crash before the send: the execution is PENDING with no message until its sweep runs it
        # (a second redrive answers 409 meanwhile).
        dispatch = Dispatch(DispatchKind.RETRY, tenant_id, execution.job_id, execution_id, execution.scheduled_ms,
                            job.generation, reopened.attempt + 1)
        self._lanes.send([Outgoing(job.spec.priority, dispatch, 0)])
        return reopened
