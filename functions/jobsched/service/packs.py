"""The pack path: one claim and one record per pack (docs/architecture.md, "Packs").

A pack's entries that need nothing but their record (a synchronous target's first attempt that
succeeds) are called concurrently and recorded in the pack item, a checkpoint at least once a second
while calls run and once at the end, each conditional on the pack's attempt. The others leave the
pack before anything of theirs happens elsewhere: MOVED (the per-execution path owns them) or BACK
(held back by lane shares, re-sent as a message of their own)."""
from __future__ import annotations

import json
import secrets
from concurrent.futures import ALL_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable

from jobsched.domain.clock import Clock
from jobsched.domain.errors import ConditionLost
from jobsched.domain.executions import AttemptOutcome, Dispatch, ExecutionStatus
from jobsched.domain.jobs import Job
from jobsched.domain.packs import (MAX_PACK_OUTPUT_BYTES, SNAPSHOT_TRUST_MS, Pack, PackKey, PackOutcome, PackStatus,
                                   entry_tag, job_of_snapshot, runs_in_pack)
from jobsched.service.outcomes import Outcome, Outcomes
from jobsched.service.worker import (LEASE_MARGIN_MS, MAX_PRECISION_WAIT_MS, UNREAD, ArrivedEarly, RedeliverLater,
                                     Worker, still_wanted)
from jobsched.store.packs import PackLeased
from jobsched.store.target_batches import MAX_BATCH_ENTRIES

# Target calls in flight at once per container, over all the packs of its batch (ten records of up
# to 100 entries). Each waits on its target's answer: threads, as the HTTP adapter's connection
# pools (one per host, kept by the container) are blocking.
PACK_CALLS = 64
# A checkpoint at least this often while calls run: a crash repeats at most this much of calls.
CHECKPOINT_SECONDS = 1.0

# Calls for one target due within this of each other share a batch request, made at the latest of
# their instants: never early, at most this much later than alone (store/target_batches.py).
BATCH_WINDOW_MS = 100

# What an entry's result is: (failed, metric, lateness), as the handler counts a record's.
EntryResult = tuple[bool, str, "int | None"]


@dataclass
class PackResult:
    entries: list[EntryResult] = field(default_factory=list)
    # (dispatch, outcome, attempt, lateness) of the entries recorded in the pack, for the attempt log.
    recorded: list[tuple[Dispatch, Outcome, int, int | None]] = field(default_factory=list)
    stale_checkpoints: int = 0


class PackRunner:
    def __init__(self, worker: Worker, stores, outcomes: Outcomes, clock: Clock, calls: int = PACK_CALLS,
                 pool=None) -> None:
        self._worker = worker
        self._packs = stores.packs
        self._jobs = stores.jobs
        self._executions = stores.executions
        self._outcomes = outcomes
        self._clock = clock
        # `pool`: an executor of the caller's (bench/e2e_model.py runs the calls on its simulated clock).
        self._pool = pool or ThreadPoolExecutor(max_workers=calls, thread_name_prefix="call")
        self.metric_of: Callable[[Outcome], str] = lambda outcome: outcome.value  # the handler's names

    def renew_pool(self, calls: int = PACK_CALLS) -> None:
        """After an invocation gave up on calls still running (its time limit): a fresh pool."""
        old, self._pool = self._pool, ThreadPoolExecutor(max_workers=calls, thread_name_prefix="call")
        old.shutdown(wait=False, cancel_futures=True)

    def run(self, pack: Pack, jobs: dict, read_at_ms: int | None,
            per_execution: Callable[[Dispatch, object], EntryResult], multi_region: bool = False) -> PackResult:
        """Run one pack. Raises ArrivedEarly (the whole message comes back at its due second) and
        RedeliverLater (another delivery holds the pack's lease); any other exception (a throttled
        claim) is the record's, which comes back with its transient backoff."""
        assert pack.pack_id is not None
        key = PackKey.parse(pack.pack_id)
        due = pack.due_ms
        now = self._clock.now_ms()
        if due - now > MAX_PRECISION_WAIT_MS:
            raise ArrivedEarly(due - now)
        if due > now:
            self._clock.sleep((due - now) / 1000)
        jobs = self._jobs_after_due(pack, jobs, read_at_ms, due, multi_region)
        started = self._clock.now_ms()
        longest = max((j.spec.timeout_sec for j in jobs.values() if isinstance(j, Job)), default=60)
        try:
            claim = self._packs.claim(key, started, started + longest * 1000 + LEASE_MARGIN_MS,
                                      "".join(entry_tag(d.execution_id) for d in pack.entries))
        except PackLeased as leased:
            if all(d.execution_id in leased.recorded for d in pack.entries):
                # A duplicate of a message whose holder has recorded every entry: nothing is left
                # to run (what each entry's hand-over still owes, the holder's own message does).
                return PackResult([(False, "DuplicatesDropped", None) for _ in pack.entries])
            raise RedeliverLater(pack.pack_id, leased.lease_until_ms) from leased
        result = PackResult()
        redelivery = claim.attempt > 1
        calls: list[tuple[Dispatch, Job]] = []
        moved: list[tuple[Dispatch, object]] = []
        held: list[tuple[Dispatch, Job]] = []
        first: dict[str, PackOutcome] = {}
        for dispatch in pack.entries:
            job = jobs.get((dispatch.tenant_id, dispatch.job_id))
            recorded = claim.outcomes.get(dispatch.execution_id)
            if recorded is not None:
                self._recorded_before(dispatch, job, recorded, redelivery, moved, held, result)
            elif not still_wanted(job, dispatch):
                # As a stale message: no execution; recorded so that reads never take it for running.
                first[dispatch.execution_id] = PackOutcome(PackStatus.STALE, dispatch.tenant_id)
                result.entries.append((False, "StaleMessages", None))
            elif multi_region or not runs_in_pack(job, dispatch):
                first[dispatch.execution_id] = PackOutcome(PackStatus.MOVED, dispatch.tenant_id)
                moved.append((dispatch, job))
            else:
                admission = self._worker.admit(job, started + job.spec.timeout_sec * 1000 + LEASE_MARGIN_MS)
                if admission is None:  # its tenant or host holds its lane share: later, on its own
                    first[dispatch.execution_id] = PackOutcome(PackStatus.BACK, dispatch.tenant_id)
                    held.append((dispatch, job))
                else:
                    calls.append((dispatch, job, admission))
        # What leaves the pack is recorded as leaving before anything of it happens elsewhere: a
        # stale holder's checkpoint fails here, and it hands nothing over.
        if not self._checkpoint(key, claim.attempt, first, result, release=not calls):
            for _, _, admission in calls:
                self._worker.release(admission)
            return result
        for dispatch, job in held:
            # Crash after the BACK checkpoint, before this send: the redelivered pack sends it again
            # (a duplicate message, which the per-execution claim absorbs).
            self._outcomes.flow.hold_back(job, dispatch)
            result.entries.append((False, "LaneShareHeld", None))
        later: list[Future] = [self._pool.submit(per_execution, d, job) for d, job in moved]
        pending = {self._pool.submit(self._call_group, group, key, claim.attempt, result)
                   for group in self._groups(calls)}
        stale = False
        while pending:
            done, pending = wait(pending, timeout=CHECKPOINT_SECONDS, return_when=ALL_COMPLETED)
            if stale:
                result.entries.extend((False, "StalePackCheckpoints", None) for _ in done)
                continue
            finished = [r for f in done for r in f.result()]
            result.entries.extend(r for r in finished if len(r) == 3)  # accepted calls, adopted at once
            stale = not self._record(key, claim.attempt, [r for r in finished if len(r) != 3], later, result,
                                     release=not pending)
        for future in later:
            result.entries.append(future.result())
        return result

    def _jobs_after_due(self, pack: Pack, jobs: dict, read_at_ms: int | None, due: int,
                        multi_region: bool = False) -> dict:
        """The last look at a FIRE's job follows its due instant (as Worker.process). An entry that
        carries its job's snapshot (the tick's read) is checked against its pack partition's fences
        instead, read now in one strongly consistent Query, when now is at most SNAPSHOT_TRUST_MS
        after the due instant (docs/architecture.md, "The worker reads no job"). The other entries'
        jobs (a fence names them, or they carry none) read before it, or not read, are read again,
        in one strongly consistent batch read."""
        snapped = self._snapshots(pack, due, multi_region)
        keys = [(d.tenant_id, d.job_id) for d in pack.entries if (d.tenant_id, d.job_id) not in snapped]
        if not keys or (read_at_ms is not None and read_at_ms >= due
                        and all(jobs.get(k, UNREAD) is not UNREAD for k in keys)):
            return {**jobs, **snapped}
        try:
            fresh = self._jobs.get_many(list(dict.fromkeys(keys)), whole=True)
        except Exception:  # noqa: BLE001 - as a batch's read: each entry's job is read on its own
            fresh = {k: self._jobs.get(k[0], k[1], consistent=True) for k in dict.fromkeys(keys)}
        return {**jobs, **{k: fresh.get(k) for k in keys}, **snapped}

    def _snapshots(self, pack: Pack, due: int, multi_region: bool = False) -> dict:
        """(tenant, job) -> the job its entry carried, for the entries no fence names (a fence: a
        pause, update or delete may have come after the snapshot, and the job is read again).
        Empty when no entry carries one, or the pack is too late for them (its jobs are read)."""
        carried = [d for d in pack.entries if d.snapshot is not None]
        if not carried or multi_region or self._clock.now_ms() - due > SNAPSHOT_TRUST_MS:
            return {}  # (regions: no fences are written; every entry reads its job)
        key = PackKey.parse(pack.pack_id)
        try:
            fences = self._packs.fences(key.segment, key.due_second, {d.job_id for d in carried})
        except Exception:  # noqa: BLE001 - as without snapshots: the entries read their jobs
            return {}
        snapped: dict = {}
        for dispatch in carried:
            try:
                job = job_of_snapshot(dispatch)
            except (KeyError, TypeError, ValueError):  # not a job's item: its job is read instead
                continue
            fence = fences.get(dispatch.job_id)
            if fence is None or dispatch.generation >= fence:
                snapped[(dispatch.tenant_id, dispatch.job_id)] = job
        return snapped

    def _recorded_before(self, dispatch: Dispatch, job, recorded: PackOutcome, redelivery: bool, moved: list,
                         held: list, result: PackResult) -> None:
        """An entry an earlier delivery of this pack recorded. A success: what follows its end is done
        again (a crash may have come between; each step is conditional). MOVED: handed over to the
        per-execution path again (its claim absorbs the duplicate, or makes the hand-over a crash
        interrupted). BACK: sent again (the send may not have happened; a duplicate is absorbed)."""
        if recorded.status is PackStatus.SUCCEEDED and isinstance(job, Job):
            self._outcomes.after_end(job, dispatch, ExecutionStatus.SUCCEEDED, self._clock.now_ms())
        elif recorded.status is PackStatus.MOVED and redelivery:
            # Handed over again, as a redelivered message of one would be: its claim absorbs a
            # duplicate, and what follows an end that a crash interrupted is done again.
            moved.append((dispatch, job))
            return
        elif recorded.status is PackStatus.BACK and redelivery and isinstance(job, Job):
            held.append((dispatch, job))
            return
        result.entries.append((False, "DuplicatesDropped", None))

    def _groups(self, calls: list[tuple]) -> list[list[tuple]]:
        """The calls in the groups they are made in: up to a batch request's ten for one tenant's
        queue, topic or bus (store/target_batches.py), due within BATCH_WINDOW_MS of the group's
        first; the others one by one."""
        groups: list[list[tuple]] = []
        batchable: list[tuple[tuple, int, tuple]] = []
        for call in calls:
            target = self._worker.batch_key(call[1])
            if target is None:
                groups.append([call])
            else:
                batchable.append((target, call[0].due_ms, call))
        batchable.sort(key=lambda b: (repr(b[0]), b[1]))
        for i, (target, due, call) in enumerate(batchable):
            last = groups[-1] if i else None
            if (last is None or batchable[i - 1][0] != target or len(last) == MAX_BATCH_ENTRIES
                    or due - last[0][0].due_ms > BATCH_WINDOW_MS):
                groups.append([call])
            else:
                last.append(call)
        return groups

    def _call_group(self, group: list[tuple], key: PackKey, attempt: int, result: PackResult) -> list[tuple]:
        """One group's calls, once the latest of their instants has come (none early), each call's end."""
        early = max(d.due_ms for d, _, _ in group) - self._clock.now_ms()
        if early > 0:
            self._clock.sleep(early / 1000)
        tokens = [secrets.token_urlsafe(24) for _ in group]
        started = self._clock.now_ms()
        try:
            if len(group) == 1:
                outcomes = [self._worker.call(group[0][1], group[0][0], tokens[0])]
            else:
                outcomes = self._worker.call_batch([(job, dispatch) for dispatch, job, _ in group])
        finally:
            for _, _, admission in group:
                self._worker.release(admission)
        return [self._called(dispatch, job, outcome, started, token, key, attempt, result)
                for (dispatch, job, _), outcome, token in zip(group, outcomes, tokens)]

    def _called(self, dispatch: Dispatch, job: Job, outcome: AttemptOutcome, started: int, token: str,
                key: PackKey, attempt: int, result: PackResult) -> tuple:
        if outcome.accepted:
            # A long-running (202) call reports back with its callback token, which its own item
            # must hold: it is checkpointed MOVED and adopted now, not at the next checkpoint.
            if not self._checkpoint(key, attempt, {dispatch.execution_id: PackOutcome(
                    PackStatus.MOVED, dispatch.tenant_id, started)}, result, counted=False):
                return False, "StalePackCheckpoints", None
            return self._adopted(job, dispatch, outcome, started, token)
        return dispatch, job, outcome, started, self._clock.now_ms(), token

    def _record(self, key: PackKey, attempt: int, finished: list[tuple], later: list[Future],
                result: PackResult, release: bool) -> bool:
        """One checkpoint of the calls finished since the last: successes recorded in the pack,
        the others MOVED and then adopted by the per-execution path. False if the pack is no
        longer ours (nothing applied, nothing handed over)."""
        outcomes: dict[str, PackOutcome] = {}
        ended: list[tuple] = []
        for dispatch, job, outcome, started, finished_ms, token in finished:
            if _stays(outcome):
                outcomes[dispatch.execution_id] = PackOutcome(
                    PackStatus.SUCCEEDED, dispatch.tenant_id, started, finished_ms, dispatch.run,
                    dispatch.generation, output=outcome.output, at=attempt)
            else:
                outcomes[dispatch.execution_id] = PackOutcome(PackStatus.MOVED, dispatch.tenant_id, started)
            ended.append((dispatch, job, outcome, started, token))
        if not self._checkpoint(key, attempt, outcomes, result, stale_count=len(finished), release=release):
            return False
        now = self._clock.now_ms()
        for dispatch, job, outcome, started, token in ended:
            late = started - dispatch.due_ms
            if _stays(outcome):
                # A one-off job completes (its quota place given back); a count of failures clears.
                self._outcomes.after_end(job, dispatch, ExecutionStatus.SUCCEEDED, now)
                result.entries.append((False, "Succeeded", late))
                result.recorded.append((dispatch, Outcome.SUCCEEDED, 1, late))
            else:
                later.append(self._pool.submit(self._adopted, job, dispatch, outcome, started, token))
        return True

    def _adopted(self, job: Job, dispatch: Dispatch, outcome: AttemptOutcome, started: int, token: str) -> EntryResult:
        done = self._worker.adopt(job, dispatch, outcome, started, token)
        return False, self.metric_of(done.outcome), done.late_ms

    def _checkpoint(self, key: PackKey, attempt: int, outcomes: dict[str, PackOutcome], result: PackResult,
                    stale_count: int = 0, release: bool = False, counted: bool = True) -> bool:
        try:
            self._packs.checkpoint(key, attempt, outcomes, release)
        except ConditionLost:
            # A later delivery took the pack over: this one's outcomes are not applied, counted.
            result.stale_checkpoints += 1
            if counted:
                result.entries.extend((False, "StalePackCheckpoints", None)
                                      for _ in range(stale_count or len(outcomes)))
            return False
        return True


def _stays(outcome: AttemptOutcome) -> bool:
    """A call's end that its pack records: a success, not long-running, with a small output."""
    return outcome.ok and not outcome.accepted and outcome.task is None and (
        outcome.output is None or len(json.dumps(outcome.output, separators=(",", ":"))) <= MAX_PACK_OUTPUT_BYTES)
