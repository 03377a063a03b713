"""Runs: a job whose fire runs a DAG of steps (domain/steps.py), on the same machinery as single
executions: every step is an execution (claimed, fenced, retried, recorded), dispatched through
the lanes when its upstream steps have succeeded. No scan: a run reads its own steps (one query
of the run's items) and the records of a step's direct neighbours.

Crash points (each write below is conditional; a message is deleted only after its work returns,
so a crash anywhere means the message comes back and the work is done again):
- start: the steps' records are written (each only if absent), then the first steps are sent,
  then the run is marked started. A crash before the mark: the fire's message comes back after
  its lease, its claim takes the run over, and the start is repeated: the records stay as they
  are, the first steps are sent again, and their claims absorb the repeat.
- a step ends: its end is recorded by the attempt's fenced write; then `step_ended` joins each
  downstream step (adds this step to its set of succeeded upstream steps, once, whatever that
  step's state: the writer whose addition completes the set of a PENDING step dispatches it, with
  the step's deterministic execution id; a step a redrive reopens knows what it waits for) or marks
  everything below a failed step UPSTREAM_FAILED, then ends the run if every step has ended. A
  crash after the step's end is recorded: the step's message comes back, its claim finds the step
  ended, and `step_ended` runs again: a join already made is not made twice, but a downstream
  step whose set is complete and that never started is sent again (a duplicate send if it was
  sent before: its claim absorbs it).
- the run ends: each step's end adds its name (and those it marked UPSTREAM_FAILED) to the run's
  set of ended steps, one small write that returns the set's size; whoever sees the set complete
  reads the steps (strongly consistent) and writes the run's end, once (conditional on RUNNING).
  A name in the set whose step has not in fact ended (a crash between a reopen and its removal)
  costs a read of the steps that finds it running, never an early end; a step's end is recorded
  before its name is added, so the set is never complete before the steps are.
- redrive: the run is reopened (DEAD → RUNNING, marked `redriving`), then its DEAD steps reopened
  and sent again and its UPSTREAM_FAILED steps put back to PENDING, then the mark is removed. A
  crash in between leaves the mark: a sweep armed before the reopen, or a repeat of the redrive,
  completes it (nothing is done twice: every reopen is conditional). While marked, the run cannot
  end."""
from __future__ import annotations

from typing import Callable

from jobsched.domain.clock import Clock
from jobsched.domain.errors import ConditionLost, Conflict
from jobsched.domain.executions import Dispatch, DispatchKind, Execution, ExecutionStatus, scheduled_ms_of
from jobsched.domain.jobs import Job
from jobsched.domain.steps import Workflow, run_status, step_execution_id, step_of
from jobsched.domain.timers import Timer, TimerKind
from jobsched.service.handoff import HandOff
from jobsched.store.queues import Outgoing

SWEEP_AFTER_MS = 60_000  # a redrive's sweep: when an interrupted redrive is completed


def run_dispatch(job: Job, run: Execution) -> Dispatch:
    """The dispatch a run was started by (for what follows its end, e.g. a one-off job completes)."""
    kind = DispatchKind.MANUAL if run.execution_id.endswith(".manual") else DispatchKind.FIRE
    return Dispatch(kind, job.tenant_id, job.job_id, run.execution_id, scheduled_ms_of(run.execution_id),
                    job.generation, run.attempt, run=run.run)


class Runs:
    def __init__(self, stores, handoff: HandOff, clock: Clock,
                 on_run_end: Callable[[Job, Dispatch, ExecutionStatus, int], None] | None = None) -> None:
        self._executions = stores.executions
        self._lanes = stores.lanes
        self._handoff = handoff
        self._clock = clock
        self._on_run_end = on_run_end

    # --- start -----------------------------------------------------------------------------
    def start(self, job: Job, dispatch: Dispatch, attempt: int) -> None:
        """The run's attempt holds the claim: record every step, send the first ones."""
        workflow = self._workflow(job)
        run_id = dispatch.execution_id
        for step in workflow.steps:
            self._executions.put_step(job.tenant_id, job.job_id, run_id, step.name,
                                      step_execution_id(run_id, step.name), dispatch.due_ms, job.generation)
        self._send(job, run_id, dispatch.due_ms, [s.name for s in workflow.roots()])
        try:
            self._executions.mark_run_started(job.job_id, run_id, attempt)
        except ConditionLost:
            pass  # its steps were quick enough to end it already, or a later delivery took it over

    def _send(self, job: Job, run_id: str, due_ms: int, names: list[str]) -> None:
        if names:
            self._lanes.send([
                Outgoing(job.spec.priority, Dispatch(DispatchKind.STEP, job.tenant_id, job.job_id,
                                                     step_execution_id(run_id, name), due_ms, job.generation), 0)
                for name in names])

    # --- a step ended ----------------------------------------------------------------------
    def step_ended(self, job: Job, step_id: str, status: ExecutionStatus | None = None) -> None:
        """After a step's end was recorded (`status`, which the caller knows when it wrote or
        read it; otherwise it is read): start what now can, or mark what never will, then end the
        run if every step has. Safe to repeat (see the module's crash points)."""
        run_id, name = step_of(step_id) or (None, None)
        workflow = job.spec.steps
        if run_id is None or workflow is None:
            return
        if status is None:
            step = self._executions.get(job.job_id, step_id)
            if step is None:
                return
            status = step.status
        if status is ExecutionStatus.SUCCEEDED:
            ready: list[str] = []
            for below in workflow.downstream(name):
                below_id = step_execution_id(run_id, below.name)
                joined = self._executions.join_step(job.job_id, below_id, name)
                if joined is None:  # joined before: a repeat (see the crash points)
                    joined = self._executions.get(job.job_id, below_id)
                if joined is None or joined.status is not ExecutionStatus.PENDING or joined.attempt != 0:
                    continue  # it started, ended, or never will (UPSTREAM_FAILED, CANCELLED)
                if set(below.depends_on) <= joined.upstream_done:
                    ready.append(below.name)
            self._send(job, run_id, scheduled_ms_of(run_id), ready)
        elif status in (ExecutionStatus.DEAD, ExecutionStatus.CANCELLED, ExecutionStatus.UPSTREAM_FAILED):
            now = self._clock.now_ms()
            below_names = [below.name for below in workflow.below(name)]
            for below_name in below_names:
                self._executions.mark_upstream_failed(job.job_id, step_execution_id(run_id, below_name), now)
        else:
            return  # not an end (the step was read and is still waiting or running)
        # Every step below a failed one has ended (UPSTREAM_FAILED, by this call or an earlier one)
        # or could never start: counted with it. Then the run is decided from its own small item.
        ended = [name] + (below_names if status is not ExecutionStatus.SUCCEEDED else [])
        noted = self._executions.note_steps_ended(job.job_id, run_id, ended)
        if noted is None:
            return
        run, ended_count = noted
        if ended_count < len(workflow.steps):
            return  # a step is still to end: its own end will look again
        self.end_if_done(job, run_id, run)

    def end_if_done(self, job: Job, run_id: str, run: Execution | None = None) -> ExecutionStatus | None:
        """End the run once every step has ended (strongly consistent reads: of two steps ending
        at once, the later one's set of ended steps and its read of the steps see both). Returns
        the run's end if this call wrote it. The steps (with their outputs) are read once the run
        is known to be at its end, not at every step's end."""
        workflow = self._workflow(job)
        run = run if run is not None else self._executions.get(job.job_id, run_id)
        if run is not None and run.status in (ExecutionStatus.SUCCEEDED, ExecutionStatus.DEAD, ExecutionStatus.CANCELLED) \
                and self._on_run_end is not None:
            # Ended already: a repeat (a crash after the run's end was written, before what follows
            # it); what follows it is safe to do again (a conditional completion, a hook's claim).
            self._on_run_end(job, run_dispatch(job, run), run.status, self._clock.now_ms())
            return None
        if run is None or run.status is not ExecutionStatus.RUNNING or run.redriving:
            return None
        steps = self._executions.run_steps(job.job_id, run_id)
        if len(steps) < len(workflow.steps):
            return None  # its start is still recording them
        status = run_status([s.status for s in steps], run.cancel_requested)
        if status is None:
            return None
        failed = [s.step_name for s in steps if s.status in (ExecutionStatus.DEAD, ExecutionStatus.CANCELLED)]
        error = f"step {', '.join(sorted(failed))} ended {'CANCELLED' if status is ExecutionStatus.CANCELLED else 'DEAD'}" \
            if failed else ("cancelled on request" if status is ExecutionStatus.CANCELLED else None)
        now = self._clock.now_ms()
        if not self._executions.finish_run(job.job_id, run_id, status, now, error, tenant_id=job.tenant_id):
            return None
        if self._on_run_end is not None:
            self._on_run_end(job, run_dispatch(job, run), status, now)
        return status

    # --- cancel and redrive (the API) ------------------------------------------------------
    def cancel(self, job: Job, run: Execution) -> None:
        """Pending and waiting steps never start; running ones are asked to stop, as a single
        execution is; the run ends CANCELLED once every step has ended."""
        if run.status is not ExecutionStatus.RUNNING:
            raise Conflict(f"run is {run.status.value}; only a running run can be cancelled")
        if not run.cancel_requested:
            try:
                self._executions.request_cancel(job.job_id, run.execution_id, run.attempt)
            except ConditionLost:
                raise Conflict("the run changed meanwhile; try again") from None
        now = self._clock.now_ms()
        for step in self._executions.run_steps(job.job_id, run.execution_id):
            self._cancel_step(job, step, now)
        self.end_if_done(job, run.execution_id)

    def _cancel_step(self, job: Job, step: Execution, now: int) -> None:
        for _ in range(3):
            try:
                if step.status in (ExecutionStatus.PENDING, ExecutionStatus.FAILED):
                    self._executions.cancel_waiting(job.job_id, step.execution_id, now)
                elif step.status is ExecutionStatus.RUNNING and not step.cancel_requested:
                    self._executions.request_cancel(job.job_id, step.execution_id, step.attempt)
                return
            except ConditionLost:
                step = self._executions.get(job.job_id, step.execution_id) or step  # it moved on: look again

    def redrive(self, job: Job, run: Execution) -> Execution:
        """Run the DEAD and UPSTREAM_FAILED steps of a DEAD run again, keeping what succeeded."""
        if run.status is not ExecutionStatus.DEAD and not (run.status is ExecutionStatus.RUNNING and run.redriving):
            raise Conflict(f"run is {run.status.value}; only a DEAD run can be redriven")
        # Armed before the reopen: whatever the crash point, the redrive is completed.
        timer = Timer(self._clock.now_ms() + SWEEP_AFTER_MS, TimerKind.SWEEP, job.tenant_id, job.job_id,
                      job.generation, self._handoff.segment_of(job.job_id), run.execution_id, run.attempt + 1)
        self._handoff.place(timer, job)
        try:
            reopened = self._executions.reopen_run(job.job_id, run.execution_id)
        except ConditionLost:
            raise Conflict("only a DEAD run can be redriven") from None
        self.complete_redrive(job, reopened)
        return self._executions.get(job.job_id, run.execution_id) or reopened

    def complete_redrive(self, job: Job, run: Execution) -> None:
        """Reopen what failed (each conditionally: a repeat does nothing twice), send the DEAD
        steps again as new attempts, then let the run end again."""
        if not run.redriving:
            return
        retries: list[Outgoing] = []
        reopened: list[str] = []
        for step in self._executions.run_steps(job.job_id, run.execution_id):
            attempt = None
            if step.status is ExecutionStatus.DEAD:
                try:
                    attempt = self._executions.reopen_dead(job.job_id, step.execution_id).attempt + 1
                except ConditionLost:
                    continue
                reopened.append(step.step_name)
            elif step.status is ExecutionStatus.UPSTREAM_FAILED:
                if self._executions.reopen_upstream_failed(job.job_id, step.execution_id):
                    reopened.append(step.step_name)
            elif step.status is ExecutionStatus.PENDING and step.attempt > 0:
                attempt = step.attempt + 1  # reopened by an interrupted redrive: send it (again)
            if attempt is not None:
                retries.append(Outgoing(job.spec.priority, Dispatch(
                    DispatchKind.RETRY, job.tenant_id, job.job_id, step.execution_id, step.scheduled_ms,
                    job.generation, attempt), 0))
        # Only the steps this call reopened, before any is sent: a step sent by an interrupted
        # redrive may have ended since, and its name must stay. A crash before this leaves their
        # names in the set: a read of the steps too many, never an early end.
        self._executions.forget_steps_ended(job.job_id, run.execution_id, reopened)
        if retries:
            self._lanes.send(retries)
        self._executions.end_redrive(job.job_id, run.execution_id)
        self.end_if_done(job, run.execution_id)

    @staticmethod
    def _workflow(job: Job) -> Workflow:
        if job.spec.steps is None:
            raise ValueError(f"job {job.job_id} has no steps")
        return job.spec.steps
