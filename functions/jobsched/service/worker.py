"""The worker: run one attempt of one execution, exactly once in effect.

Delivery is at-least-once; the conditional claim makes execution once in effect, and the
attempt number fences every later write of the attempt."""
from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, replace

from jobsched.domain.clock import Clock
from jobsched.domain.errors import ConditionLost
from jobsched.domain.executions import AttemptOutcome, AttemptRecord, Dispatch, DispatchKind, ExecutionStatus
from jobsched.domain.container_tasks import CALL_LEASE_MS, THROTTLE_HOLD_LIMIT_MS
from jobsched.domain.jobs import Job, JobState, OverlapPolicy, TargetType
from jobsched.service.container_tasks import ContainerTasks
from jobsched.domain.hooks import alert_of_hook, hook_of
from jobsched.service.expectations import CheckOutcome, Expectations
from jobsched.domain.hooks import summary as hook_summary
from jobsched.domain.steps import STEP_ENDED, step_execution_id, step_of
from jobsched.service.lane_shares import LaneGate
from jobsched.service.ownership import Verdict
from jobsched.service.outcomes import Outcome, Outcomes

# A lease outlives the attempt's own timeout by this margin before another worker may take over.
LEASE_MARGIN_MS = 60_000
# SQS delays are whole seconds rounded down: wait out at most this much before calling the target.
MAX_PRECISION_WAIT_MS = 1_500

__all__ = ["ArrivedEarly", "Outcome", "RedeliverLater", "UNREAD", "WorkResult", "Worker", "batch_read_keys",
           "callback_token_hash", "early_ms", "reads_its_job", "still_wanted"]

# Worker.process's `job` when the caller did not read it.
UNREAD = object()


def reads_its_job(dispatch: Dispatch) -> bool:
    """Whether processing this dispatch starts by reading its job (a batch can read them at once)."""
    return dispatch.kind not in (DispatchKind.LEASE, DispatchKind.SWEEP, DispatchKind.CHECK)


def batch_read_keys(dispatches, now_ms: int) -> list[tuple[str, str]]:
    """The jobs a batch reads at once before its records fan out: those of its records that read
    their job, are due by `now_ms` and carry no snapshot of it (service/packs.py). A FIRE before
    its due instant reads its own after its wait,
    or goes back to its queue (ArrivedEarly): read here, it would be read twice or for nothing
    (Worker.process reads again a FIRE's job read before its due instant)."""
    return [(d.tenant_id, d.job_id) for d in dispatches
            if reads_its_job(d) and d.snapshot is None and not (d.kind is DispatchKind.FIRE and d.due_ms > now_ms)]


def early_ms(dispatch: Dispatch, now_ms: int) -> int:
    """How long a FIRE that SQS made visible before its due instant (delays are whole seconds,
    rounded down) waits before its job is read: 0 when it does not wait."""
    early = dispatch.due_ms - now_ms
    return early if dispatch.kind is DispatchKind.FIRE and 0 < early <= MAX_PRECISION_WAIT_MS else 0


# Regions: a message for a segment whose lease lapsed here and was not taken yet comes back this
# much later (the lease is renewed, or taken elsewhere and the message refused, within a minute).
NOT_HELD_WAIT_MS = 20_000
# ... and a claim is made only this long before the region must stop acting on the segment (the
# claim's botocore retries: 5 attempts of at most 10 s read time-outs would pass it; throttled
# claims back off within seconds).
CLAIM_MARGIN_MS = 10_000


class ArrivedEarly(Exception):
    """A FIRE that SQS made visible more than MAX_PRECISION_WAIT_MS before its due instant (a
    delay rounded down twice: by the tick, and again by a restored snapshot or a hand-back). It
    never runs early: the message goes back to the queue until its due second."""

    def __init__(self, early_ms: int) -> None:
        super().__init__(f"{early_ms} ms early")
        self.early_ms = early_ms


class RedeliverLater(Exception):
    """The execution is running under a live lease: let SQS redeliver the message when the
    lease ends (by then, if that worker died, the lease has expired and this delivery takes over)."""

    def __init__(self, execution_id: str, lease_until_ms: int | None = None) -> None:
        super().__init__(execution_id)
        self.lease_until_ms = lease_until_ms


@dataclass(frozen=True)
class WorkResult:
    outcome: Outcome
    attempt: int = 0
    late_ms: int | None = None


def callback_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Worker:
    def __init__(self, stores, outcomes: Outcomes, invoker, clock: Clock, lanes: LaneGate | None = None,
                 containers: ContainerTasks | None = None) -> None:
        self._lanes = lanes  # lane shares (service/lane_shares.py); None: no bound
        self._containers = containers  # container tasks (ECS_TASK): their record, deadline and cancel
        self._jobs = stores.jobs
        self._executions = stores.executions
        self._outcomes = outcomes
        self._runs = outcomes.runs
        self._flow = outcomes.flow
        self._invoker = invoker
        self._clock = clock
        self._expectations = Expectations(stores, clock)  # absence alerts
        self._packs = getattr(stores, "packs", None)  # a backfill checks its occurrence's pack

    regions = None  # the HandOff whose ownership decides, in a multi-region deployment

    def process(self, dispatch: Dispatch, job: Job | None | object = UNREAD,
                read_at_ms: int | None = None) -> WorkResult:
        """`job`: the dispatch's job as read (strongly consistent) just before, None if it was not
        found; by default it is read here. `read_at_ms`: when that read started; a FIRE's job read
        before its due instant, or passed without when it was read, is read again (below)."""
        if self.regions is not None and self.regions.multi_region:
            # Regions (service/ownership.py): act only on a segment this region holds, under the
            # epoch the message was sent with. A later epoch handed it off again: refused. Not held
            # now and no later epoch known (a lapse, nobody took it yet): back to the queue.
            verdict = self.regions.ownership.verdict(self.regions.segment_of(dispatch.job_id), dispatch.epoch)
            if verdict is Verdict.STALE:
                return WorkResult(Outcome.NOT_HELD)
            if verdict is Verdict.WAIT:
                raise RedeliverLater(dispatch.execution_id, self._clock.now_ms() + NOT_HELD_WAIT_MS)
        if dispatch.kind is DispatchKind.LEASE:
            return self._check_lease(dispatch)
        if dispatch.kind is DispatchKind.SWEEP:
            return self._sweep(dispatch)
        if dispatch.kind is DispatchKind.CHECK:
            checked = self._expectations.check(dispatch)
            return WorkResult(Outcome.ABSENCE_ALERTED if checked is CheckOutcome.ALERTED
                              else Outcome.DUPLICATE if checked is CheckOutcome.DUPLICATE
                              else Outcome.EXPECTATION_CHECKED)
        now_ms = self._clock.now_ms()
        if dispatch.kind is DispatchKind.FIRE and dispatch.due_ms - now_ms > MAX_PRECISION_WAIT_MS:
            raise ArrivedEarly(dispatch.due_ms - now_ms)
        wait_ms = early_ms(dispatch, now_ms)
        if dispatch.kind is DispatchKind.FIRE and job is not UNREAD and (read_at_ms is None
                                                                     or read_at_ms < dispatch.due_ms):
            # The last look at a FIRE's job follows its due instant: a job passed in from a read
            # before it (for another record of its batch, the same job's late fire), or without
            # when it was read, is read again, whether this FIRE waits below or its thread started
            # after the instant: a pause or delete answered in between must be seen.
            job = UNREAD
        if wait_ms:
            # Wait out the sub-second rest first, then read the job: a pause or delete answered
            # during the wait is seen, and its fire does not run. (Read before the wait, a pause
            # answered 0.5 s before the due second still fired.)
            self._clock.sleep(wait_ms / 1000)
        if job is UNREAD:
            job = self._jobs.get(dispatch.tenant_id, dispatch.job_id, consistent=True)
        assert job is None or isinstance(job, Job)
        step_ref = step_of(dispatch.execution_id)
        if step_ref is not None:
            return self._run_step(dispatch, job, *step_ref)
        hook_ref = hook_of(dispatch.execution_id)
        if hook_ref is not None:
            return self._run_hook(dispatch, job, *hook_ref)
        if not still_wanted(job, dispatch):
            # An execution waiting for this message (a trigger's or a redrive's PENDING, a FAILED
            # one waiting for this retry) ends CANCELLED: none is left waiting forever because its
            # job went away or changed. A FIRE has no record before its claim, so a stale FIRE
            # (every paused or updated job's message in flight) costs no write.
            if dispatch.kind is not DispatchKind.FIRE or dispatch.throttled_from_ms is not None:
                # (A FIRE held back after its claim, its RunTask throttled, has a PENDING record.)
                self._end_waiting(dispatch)
            return WorkResult(Outcome.STALE_MESSAGE)

        if dispatch.kind is DispatchKind.FIRE:
            if job.spec.overlap_policy is OverlapPolicy.SKIP and self._executions.another_running(
                    job.job_id, dispatch.execution_id):
                recorded = self._executions.put_skipped(job.tenant_id, job.job_id, dispatch.execution_id,
                                                        dispatch.due_ms, job.generation,
                                                        "skipped: the previous run was still running",
                                                        self._clock.now_ms(), skip_reason="OVERLAP")
                if recorded:  # schedule bounds: a skipped last run completes its job all the same
                    self._outcomes.after_end(job, dispatch, ExecutionStatus.SKIPPED, self._clock.now_ms())
                return WorkResult(Outcome.SKIPPED if recorded else Outcome.DUPLICATE)

        if dispatch.kind is DispatchKind.BACKFILL and self._ran_in_pack(dispatch):
            return WorkResult(Outcome.DUPLICATE)  # it ran on time in its pack: no item of its own
        return self._attempt(job, dispatch)

    def _ran_in_pack(self, dispatch: Dispatch) -> bool:
        """A backfill of an occurrence that succeeded in its pack (one consistent Query of the pack
        partition; a backfill's occurrences are past, so their packs have recorded them)."""
        if self._packs is None or self.regions is None:
            return False
        outcome = self._packs.outcomes(self.regions.segment_of(dispatch.job_id), dispatch.due_ms // 1000,
                                       consistent=True).get(dispatch.execution_id)
        return outcome is not None and outcome.status.value == "SUCCEEDED"

    def _attempt(self, job: Job, dispatch: Dispatch) -> WorkResult:
        """Claim the execution, call the target (a job with steps: start its run), record the end."""
        now = self._clock.now_ms()
        # A FIRE waited for its due instant before its job was read (process), so the claim
        # follows the last look at the job; a FIRE is never claimed before its due instant.
        starts_at = max(now, dispatch.due_ms) if dispatch.kind is DispatchKind.FIRE else now
        token = secrets.token_urlsafe(24)
        # A container task runs outside the worker: its claim holds the RunTask call only, and its
        # task's deadline is recorded with the task (service/container_tasks.py).
        holds_ms = CALL_LEASE_MS if _runs_a_task(job) else job.spec.timeout_sec * 1000
        lease_until = starts_at + holds_ms + LEASE_MARGIN_MS
        run = job.spec.steps is not None and step_of(dispatch.execution_id) is None
        took_slot = False
        if job.spec.flow_control is not None and not run and hook_of(dispatch.execution_id) is None:
            allowed, took_slot = self._flow.admit(job, dispatch, lease_until)
            if not allowed:  # not now: later, without an attempt (service/flow.py)
                self._flow.hold_back(job, dispatch)
                return WorkResult(Outcome.THROTTLED)
        # A run's start calls no target: it holds its invocation for milliseconds.
        admission = self._lanes.admit(job, lease_until) if self._lanes is not None and not run else None
        if self._lanes is not None and not run and admission is None:
            # Its tenant or host holds its share of the lane: this record leaves its invocation at
            # once and comes back later, without an attempt; other tenants' records run meanwhile.
            if took_slot:
                self._flow.give_back(job, dispatch.execution_id)
            self._flow.hold_back(job, dispatch)
            return WorkResult(Outcome.LANE_SHARE_HELD)
        try:
            return self._claimed(job, dispatch, now, starts_at, token, lease_until, run, took_slot)
        finally:
            # The call is over (ended, accepted as long-running, or never made): the invocation no
            # longer waits on it. A process that dies here leaves the slot to its lease.
            if self._lanes is not None:
                self._lanes.release(admission)

    def _claimed(self, job: Job, dispatch: Dispatch, now: int, starts_at: int, token: str, lease_until: int,
                 run: bool, took_slot: bool) -> WorkResult:
        throttled_ms = starts_at - dispatch.throttled_from_ms if dispatch.throttled_from_ms is not None else None
        if self.regions is not None and self.regions.multi_region and self.regions.ownership.verdict(
                self.regions.segment_of(dispatch.job_id), dispatch.epoch, CLAIM_MARGIN_MS) is not Verdict.ACT:
            # Regions: checked again just before the claim (the first look came before the wait for
            # the due second and the job's read), with a margin for the claim's own retries: a
            # region claims only well inside its lease, never once a taker may have started.
            if took_slot:
                self._flow.give_back(job, dispatch.execution_id)
            raise RedeliverLater(dispatch.execution_id, self._clock.now_ms() + NOT_HELD_WAIT_MS)
        try:
            claim = self._executions.claim(dispatch, now, lease_until, callback_token_hash(token), started_ms=starts_at,
                                           throttled_ms=throttled_ms)
        except ConditionLost as lost:
            if took_slot:  # not ours to run after all: the slot goes back
                self._flow.give_back(job, dispatch.execution_id)
            return self._claim_lost(job, dispatch, lost.current)
        if job.spec.flow_control is not None and not took_slot:
            self._flow.extend(job, dispatch.execution_id, lease_until)  # a takeover: the slot has its lease
        now = self._clock.now_ms()
        late_ms = now - dispatch.due_ms if claim.attempt == 1 and dispatch.kind in (
            DispatchKind.FIRE, DispatchKind.MANUAL) else None
        if run:
            # A run: its steps are the work. Crash before its start is marked: see service/runs.py.
            self._runs.start(job, dispatch, claim.attempt)
            return WorkResult(Outcome.RUN_STARTED, claim.attempt, late_ms)
        if claim.taken_over is not None and _runs_a_task(job) and self._containers is not None:
            # A container attempt whose worker died may have left a task: it is this attempt's.
            adopted = self._containers.take_over(job, dispatch, claim.attempt, starts_at, claim.taken_over)
            if adopted is not None:
                return WorkResult(adopted, claim.attempt, late_ms)
        # Crash from here until the result is written: SQS redelivers after the visibility
        # timeout, by then the lease has expired, and the next delivery takes over (LOST).
        # Container networks: checked again before RunTask (the job may predate the policy).
        refused = self._containers.refused(job) if _runs_a_task(job) and self._containers is not None else None
        outcome = refused or self._call(job, dispatch, claim.attempt, token, claim.progress)
        if outcome.throttled and self._give_back_attempt(job, dispatch, claim, token):
            return WorkResult(Outcome.THROTTLED, claim.attempt, late_ms)
        if outcome.accepted and outcome.task is not None and self._containers is not None:
            # Crash before the task is recorded: its end event still records the attempt (its
            # attempt is the execution's), and a redelivery after the claim's lease adopts it.
            return WorkResult(self._containers.started(job, dispatch, claim.attempt, starts_at, outcome.task),
                              claim.attempt, late_ms)
        return self._ended_call(job, dispatch, claim, outcome, now, late_ms)

    def _ended_call(self, job: Job, dispatch: Dispatch, claim, outcome: AttemptOutcome, started_ms: int,
                    late_ms: int | None) -> WorkResult:
        """Record what a claimed attempt's call came to: accepted as long-running, or its end."""
        if outcome.accepted:
            deadline = self._clock.now_ms() + job.spec.heartbeat_timeout_sec * 1000
            try:
                self._executions.accept(dispatch, claim.attempt, deadline)
            except ConditionLost:
                return WorkResult(Outcome.STALE_RESULT, claim.attempt, late_ms)
            # Crash here: the attempt is RUNNING under its original (timeout-based) lease, so a
            # redelivery after the visibility timeout takes it over; nothing is stuck.
            self._outcomes.arm_lease_check(dispatch, claim.attempt, deadline, job)
            self._flow.extend(job, dispatch.execution_id, deadline + LEASE_MARGIN_MS)
            return WorkResult(Outcome.ACCEPTED, claim.attempt, late_ms)
        records = [r for r in (claim.taken_over,) if r is not None]
        records.append(AttemptRecord(claim.attempt, outcome.status, started_ms, self._clock.now_ms(), outcome.error))
        return WorkResult(self._outcomes.finish(job, dispatch, claim.attempt, records, outcome), claim.attempt, late_ms)

    # The pack path (service/packs.py) calls targets itself and hands over what needs this machinery.

    def call(self, job: Job, dispatch: Dispatch, token: str) -> AttemptOutcome:
        return self._call(job, dispatch, dispatch.attempt, token, None)

    def batch_key(self, job: Job) -> tuple | None:
        """Calls of the same key may go out in one request of the target's batch call (SQS, SNS,
        EventBridge); None when the invoker has none."""
        key_of = getattr(self._invoker, "batch_key", None)
        return key_of(job) if key_of is not None else None

    def call_batch(self, calls: list[tuple[Job, Dispatch]]) -> list[AttemptOutcome]:
        """The calls of one batch_key, each its attempt's outcome, in order; a failure to make them
        is each one's (as _call)."""
        try:
            return self._invoker.invoke_batch([(job, dispatch, dispatch.attempt) for job, dispatch in calls])
        except Exception as exc:  # noqa: BLE001 - recorded on each attempt, not lost
            return [AttemptOutcome(False, ExecutionStatus.FAILED, f"the call could not be made: "
                                   f"{type(exc).__name__}: {str(exc)[:500]}")] * len(calls)

    def admit(self, job: Job, lease_until_ms: int):
        """A lane-share admission for a pack entry's call; None when its tenant or host holds its
        share (the entry is held back); True when there is no bound."""
        return self._lanes.admit(job, lease_until_ms) if self._lanes is not None else True

    def release(self, admission) -> None:
        if self._lanes is not None and admission is not True:
            self._lanes.release(admission)

    def adopt(self, job: Job, dispatch: Dispatch, outcome: AttemptOutcome, started_ms: int,
              token: str) -> WorkResult:
        """A pack entry whose call was made in its pack but whose end needs the per-execution
        machinery (a failure that may retry or go DEAD, a long-running 202, an output too large for
        the pack). Its pack recorded it MOVED first; it is claimed now with the call's callback
        token and its call's outcome recorded as this attempt's, as _claimed does. A per-execution
        item already there (a redelivered pack re-processed it) is another owner's: DUPLICATE."""
        lease_until = self._clock.now_ms() + job.spec.timeout_sec * 1000 + LEASE_MARGIN_MS
        try:
            claim = self._executions.claim(dispatch, self._clock.now_ms(), lease_until, callback_token_hash(token),
                                           started_ms=started_ms)
        except ConditionLost:
            return WorkResult(Outcome.DUPLICATE)
        return self._ended_call(job, dispatch, claim, outcome, started_ms, started_ms - dispatch.due_ms)

    def _give_back_attempt(self, job: Job, dispatch: Dispatch, claim, token: str) -> bool:
        """The target refused the call for its rate or capacity and started nothing (RunTask
        throttled): the claim is released (the execution PENDING with the attempt before this one)
        and the dispatch sent again later, as flow control holds one back (service/flow.py), so no
        attempt is used. False once it has been held THROTTLE_HOLD_LIMIT_MS, or when the claim is no
        longer this one's to release (a cancel asked meanwhile): the refusal is then the attempt's end."""
        now = self._clock.now_ms()
        if dispatch.throttled_from_ms is not None and now - dispatch.throttled_from_ms > THROTTLE_HOLD_LIMIT_MS:
            return False
        try:
            self._executions.release_claim(dispatch, claim.attempt, callback_token_hash(token), claim.taken_over)
        except ConditionLost:
            return False
        # Crash here: the message comes back and claims the PENDING execution (same attempt number).
        self._flow.give_back(job, dispatch.execution_id)
        self._flow.hold_back(job, replace(dispatch, attempt=claim.attempt))
        return True

    def _call(self, job: Job, dispatch: Dispatch, attempt: int, token: str, progress) -> AttemptOutcome:
        """The target's call. An exception raised while making it (a KMS or DynamoDB failure while
        signing, a bug in an adapter) is this attempt's failure, recorded with its reason and
        retried under the job's policy: left unrecorded, the execution would stay RUNNING until
        its lease expired (minutes), and every delivery meanwhile would be handed back."""
        try:
            return self._invoker.invoke(job, dispatch, attempt, callback_token=token, progress=progress)
        except Exception as exc:  # noqa: BLE001 - recorded on the attempt, not lost
            return AttemptOutcome(False, ExecutionStatus.FAILED, f"the call could not be made: "
                                  f"{type(exc).__name__}: {str(exc)[:500]}")

    def _run_step(self, dispatch: Dispatch, job: Job | None, run_id: str, name: str) -> WorkResult:
        """One attempt of one step of a run: as any execution's, with the step's target and
        policies, and a body that carries its direct upstream steps' outputs."""
        step = job.spec.steps.step(name) if job is not None and job.spec.steps is not None else None
        if step is None or job.state is JobState.CANCELLED:
            # The job went away, was cancelled, or no longer has this step: the step never runs.
            self._end_waiting(dispatch)
            if job is not None and job.spec.steps is not None:
                self._runs.step_ended(job, dispatch.execution_id)
            return WorkResult(Outcome.STALE_MESSAGE)
        outputs = {}
        for upstream in step.depends_on:
            record = self._executions.get(job.job_id, step_execution_id(run_id, upstream))
            outputs[upstream] = record.output if record is not None else None
        return self._attempt(job.for_step(step, run_id, outputs), dispatch)

    def _run_hook(self, dispatch: Dispatch, job: Job | None, of_execution: str, kind: str) -> WorkResult:
        """One attempt of a completion hook's call: the job's hook target, the summary of the
        execution it reports as the body, the job's retry policy."""
        target = None if job is None else (job.spec.on_success if kind == "success" else job.spec.on_failure)
        ended = self._executions.get(job.job_id, of_execution) if target is not None else None
        if target is None or ended is None:
            self._end_waiting(dispatch)  # the job or its hook went away meanwhile
            return WorkResult(Outcome.STALE_MESSAGE)
        alert = alert_of_hook(kind)  # absence alerts: the summary says which
        body = {"alert": alert, **hook_summary(ended)} if alert else hook_summary(ended)
        return self._attempt(job.for_hook(target, body), dispatch)

    def _end_waiting(self, dispatch: Dispatch) -> None:
        """The job changed or went away while this execution waited for its message: end it
        CANCELLED rather than leave it PENDING or FAILED forever."""
        now = self._clock.now_ms()
        try:
            self._executions.cancel_waiting(dispatch.job_id, dispatch.execution_id, now)
        except ConditionLost as lost:
            # A backfill's ids were handed out by the API without a record (the claim writes it):
            # one that never ran gets its CANCELLED record here, so that every id the API answered
            # with ends with a record. Conditional on absence: an execution that exists keeps it.
            if lost.current is None and dispatch.kind is DispatchKind.BACKFILL:
                self._executions.put_cancelled(dispatch.tenant_id, dispatch.job_id, dispatch.execution_id,
                                               dispatch.due_ms, dispatch.generation,
                                               "cancelled: the job was deleted before this backfill ran", now)
            # Otherwise not waiting: already ended, or another delivery got there first.

    def _sweep(self, dispatch: Dispatch) -> WorkResult:
        """A trigger or a redrive armed this before recording its PENDING execution and sending
        its message. If the execution is still PENDING for this attempt, the send was lost (the
        API died between the record and the send) or is still queued: run it now. The claim is
        conditional, so a late original message is a duplicate, never a second run."""
        execution = self._executions.get(dispatch.job_id, dispatch.execution_id)
        if execution is not None and execution.redriving:  # a run's redrive, interrupted: complete it
            job = self._jobs.get(dispatch.tenant_id, dispatch.job_id, consistent=True)
            if job is not None and job.spec.steps is not None:
                self._runs.complete_redrive(job, execution)
            return WorkResult(Outcome.DUPLICATE)
        if (execution is None or execution.status is not ExecutionStatus.PENDING
                or execution.attempt != dispatch.attempt - 1):
            return WorkResult(Outcome.DUPLICATE)  # it ran, is running, or ended: nothing to sweep
        manual = dispatch.execution_id.endswith(".manual") and dispatch.attempt == 1
        original = Dispatch(DispatchKind.MANUAL if manual else DispatchKind.RETRY, dispatch.tenant_id,
                            dispatch.job_id, dispatch.execution_id, dispatch.due_ms, dispatch.generation,
                            dispatch.attempt)
        return self.process(original)

    def _claim_lost(self, job: Job, dispatch: Dispatch, current: dict | None) -> WorkResult:
        if current is None:
            return WorkResult(Outcome.DUPLICATE)
        status = current.get("status")
        if (job.spec.steps is not None and step_of(dispatch.execution_id) is not None
                and ExecutionStatus(status) in STEP_ENDED):
            # A step that ended, delivered again: what follows its end may not have happened yet
            # (a crash after its end was recorded). Doing it again is safe: service/runs.py.
            self._runs.step_ended(job, dispatch.execution_id, ExecutionStatus(status))
            return WorkResult(Outcome.DUPLICATE, int(current.get("attempt", 0)))
        if status in (ExecutionStatus.SUCCEEDED.value, ExecutionStatus.DEAD.value,
                      ExecutionStatus.CANCELLED.value) and step_of(
                dispatch.execution_id) is None and hook_of(dispatch.execution_id) is None:
            # An execution that ended, delivered again: what follows its end (its hook, its job's
            # completion) may not have happened (a crash after the end was recorded). Both are
            # safe to repeat: the hook's claim, the completion's condition.
            self._outcomes.after_end(job, dispatch, ExecutionStatus(status), self._clock.now_ms())
        attempt = int(current.get("attempt", 0))
        if status == ExecutionStatus.RUNNING.value and not current.get("accepted"):
            lease = current.get("leaseUntilMs")
            raise RedeliverLater(dispatch.execution_id, int(lease) if lease is not None else None)
        if status == ExecutionStatus.FAILED.value and attempt == dispatch.attempt and current.get("retryAtMs"):
            self._outcomes.schedule_retry(job, dispatch, attempt + 1, int(current["retryAtMs"]))
            return WorkResult(Outcome.RETRY_RECOVERED, attempt)
        return WorkResult(Outcome.DUPLICATE, attempt)

    def _check_lease(self, dispatch: Dispatch) -> WorkResult:
        """A LEASE timer came due: the attempt either heartbeated (check again at its new
        deadline) or is LOST and retried, handing its last progress to the next attempt."""
        execution = self._executions.get(dispatch.job_id, dispatch.execution_id)
        if execution is None or execution.status is not ExecutionStatus.RUNNING or execution.attempt != dispatch.attempt:
            return WorkResult(Outcome.DUPLICATE)
        job = self._jobs.get(dispatch.tenant_id, dispatch.job_id, consistent=True)
        if execution.task is not None and self._containers is not None:  # a container task: its own checks
            return WorkResult(self._containers.check(dispatch, execution, job), dispatch.attempt)
        now = self._clock.now_ms()
        if execution.lease_until_ms is not None and execution.lease_until_ms > now:
            self._outcomes.arm_lease_check(dispatch, dispatch.attempt, execution.lease_until_ms, job)
            return WorkResult(Outcome.LEASE_EXTENDED, dispatch.attempt)
        records = [AttemptRecord(dispatch.attempt, ExecutionStatus.LOST, execution.attempt_started_ms or now, now,
                                 "missed its heartbeat deadline")]
        lost = AttemptOutcome(False, ExecutionStatus.LOST, "missed its heartbeat deadline")
        outcome = self._outcomes.finish(job, _as_attempt(dispatch, execution.scheduled_ms, execution.run), dispatch.attempt, records,
                                        lost, lease_expired_by=now)
        return WorkResult(Outcome.LOST if outcome is not Outcome.STALE_RESULT else outcome, dispatch.attempt)


def _as_attempt(dispatch: Dispatch, scheduled_ms: int, run: int | None = None) -> Dispatch:
    return Dispatch(DispatchKind.RETRY, dispatch.tenant_id, dispatch.job_id, dispatch.execution_id, scheduled_ms,
                    dispatch.generation, dispatch.attempt, run=run)


def _runs_a_task(job: Job) -> bool:
    return job.spec.target is not None and job.spec.target.type is TargetType.ECS_TASK


def still_wanted(job: Job | None, dispatch: Dispatch) -> bool:
    if job is None:
        return False
    if dispatch.kind in (DispatchKind.MANUAL, DispatchKind.BACKFILL):
        return job.state is not JobState.CANCELLED
    if job.generation != dispatch.generation:
        return False  # updated, paused, resumed or cancelled since this was dispatched
    return dispatch.kind is DispatchKind.RETRY or job.fires()
