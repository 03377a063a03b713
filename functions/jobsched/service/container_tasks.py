"""Container tasks (ECS_TASK): a started task's record, its end, its timeout and its cancel.

The worker's RunTask call is accepted work (as a long-running HTTP target's 202): the attempt
stays RUNNING with its task recorded until the task stops. Its end is recorded from ECS's
"Task State Change" event (the task_events function), fenced like every end: the execution must be
RUNNING with this attempt, and the event's task must be the one recorded (or, before the record,
carry this attempt). A LEASE timer looks at the task every RECONCILE_MS until its deadline: it
stops a task past its deadline (TIMED_OUT, retried under the policy), stops a cancelled one
(CANCELLED), and records the end of a task whose event was lost."""
from __future__ import annotations

import logging
from typing import Callable

from jobsched.domain.clock import Clock
from jobsched.domain.container_tasks import (RECONCILE_MS, UNLISTED_GRACE_MS, UNLISTED_RETRY_MS, TaskEnd,
                                             console_log_url, task_end_of)
from jobsched.domain.errors import ConditionLost
from jobsched.domain.executions import (AttemptOutcome, AttemptRecord, Dispatch, DispatchKind, Execution,
                                        ExecutionStatus, job_id_of)
from jobsched.domain.jobs import Job
from jobsched.domain.task_networks import TaskNetworks, network_problem
from jobsched.service.outcomes import Outcome, Outcomes, as_step_view

LEASE_MARGIN_MS = 60_000  # as the worker's (service/worker.py): a stray redelivery never beats the deadline check

logger = logging.getLogger(__name__)


def default_log_url(cluster: str, task_arn: str) -> str:
    parts = task_arn.split(":")
    return console_log_url(parts[3] if len(parts) > 3 else "us-east-1", cluster, task_arn)


def task_log_url(env) -> Callable[[str, str], str]:
    """Where a task's logs are shown: the ECS console's task page; the local stack, whose tasks
    are local processes, names their output file instead (Env.TASK_LOGS_URL, `{taskId}` in it)."""
    from jobsched.settings import Env

    template = env.get(Env.TASK_LOGS_URL)
    if not template:
        return default_log_url
    return lambda cluster, task_arn: template.replace("{taskId}", task_arn.rsplit("/", 1)[-1])


class ContainerTasks:
    """`calls`: the ECS calls in the job's tenant session (store/targets.py AwsTargetInvoker);
    the task_events function records ends from events and needs none."""

    def __init__(self, stores, outcomes: Outcomes, clock: Clock, calls=None,
                 log_url: Callable[[str, str], str] = default_log_url, networks: TaskNetworks | None = None) -> None:
        self._jobs = stores.jobs
        self._executions = stores.executions
        self._outcomes = outcomes
        self._clock = clock
        self._calls = calls
        self._log_url = log_url
        self._networks = networks  # container networks (domain/task_networks.py); None: not held to one

    # --- the worker: before RunTask ------------------------------------------------------------

    def refused(self, job: Job) -> AttemptOutcome | None:
        """Container networks, checked again before RunTask: a job created before the operator
        narrowed its tenant's networks (or with no security group, before that was refused) never
        starts a task outside them; its attempt ends with the reason, not retried (the policy
        decides the same way every time). None: it may run."""
        problem = network_problem(self._networks, job.tenant_id, job.spec.target.config)
        if problem is None:
            return None
        return AttemptOutcome(False, ExecutionStatus.FAILED, f"task not started: target.{problem[0]}: {problem[1]}",
                              retryable=False)

    # --- the worker: RunTask answered --------------------------------------------------------

    def started(self, job: Job, dispatch: Dispatch, attempt: int, attempt_started_ms: int, task: dict) -> Outcome:
        """Record the attempt's task and its deadline (the attempt's start plus timeoutSec); the
        lease outlives the deadline so that the deadline's check, not a redelivery, ends it."""
        deadline = attempt_started_ms + job.spec.timeout_sec * 1000
        record = {**task, "deadlineMs": deadline, "logUrl": self._log_url(task["cluster"], task["taskArn"])}
        try:
            execution = self._executions.accept(dispatch, attempt, deadline + LEASE_MARGIN_MS, record)
        except ConditionLost:
            # The task's end was recorded first (a task that stopped at once), or the attempt was
            # taken over: nothing of this attempt is left to record. A task the execution does not
            # name (a worker that stalled and called RunTask after the takeover looked for its
            # task) is nobody's: it is stopped, so it cannot run beside the attempt that owns it.
            now = self._executions.get(job.job_id, dispatch.execution_id)
            if now is None or (now.task or {}).get("taskArn") != task["taskArn"]:
                self._calls.stop_task(job, task["taskArn"], "jobsched: started by an attempt that was taken over")
            return Outcome.STALE_RESULT
        # Crash here: the task runs and its event records its end; only the deadline's check is
        # missing, and a redelivery after the lease adopts the task (take_over) and arms it.
        self._outcomes.flow.extend(job, dispatch.execution_id, deadline + LEASE_MARGIN_MS)
        if execution.cancel_requested:  # cancelled while RunTask was under way: stop it now
            return self.check(dispatch, execution, job)
        self._outcomes.arm_lease_check(dispatch, attempt, min(deadline, self._clock.now_ms() + RECONCILE_MS), job)
        return Outcome.ACCEPTED

    def take_over(self, job: Job, dispatch: Dispatch, attempt: int, attempt_started_ms: int,
                  taken_over: AttemptRecord) -> Outcome | None:
        """This attempt took the execution over from one whose worker stopped reporting before it
        recorded a task (its claim's lease ran out). That worker may have started a task: found by
        the execution's startedBy and the attempt's tag, it becomes this attempt's task (running:
        recorded, with this attempt's deadline) or end (stopped: its end recorded now, its event
        having been refused for the attempt it no longer matched), and no second task is started.
        None: no such task, start one."""
        if self._calls is None:
            return None
        container = job.spec.target.config.get("container")
        found_tasks = self._calls.tasks_of(job, dispatch.execution_id)

        def stopped(task: dict) -> bool:
            return task.get("desiredStatus") == "STOPPED" or task.get("lastStatus") == "STOPPED"

        # Still running: any earlier attempt's (a timeout or a cancel stops a task before its
        # attempt ends, so a running one of an earlier attempt was never recorded: an orphan, also
        # after a second takeover). Stopped: only the taken-over attempt's (an earlier attempt's
        # stopped task may be one whose end was recorded).
        orphans = [t for t in found_tasks if not stopped(t) and (task_end_of(t, container).attempt or attempt) < attempt]
        orphans += [t for t in found_tasks if stopped(t) and task_end_of(t, container).attempt == taken_over.attempt]
        if not orphans:
            return None
        found = orphans[0]
        orphan_attempt = task_end_of(found, container).attempt
        record = {"taskArn": found["taskArn"], "cluster": str(job.spec.target.config["cluster"]),
                  "container": container, "attempt": orphan_attempt}
        if not stopped(found):
            return self.started(job, dispatch, attempt, attempt_started_ms, record)
        end = task_end_of(found, container)
        now = self._clock.now_ms()
        task = {**record, "logUrl": self._log_url(record["cluster"], found["taskArn"]), "exitCode": end.exit_code,
                "stoppedReason": (end.stopped_reason or "")[:1000] or None, "stopCode": end.stop_code}
        status = ExecutionStatus.SUCCEEDED if end.succeeded else ExecutionStatus.FAILED
        records = [taken_over, AttemptRecord(attempt, status, attempt_started_ms, now, end.error())]
        return self._outcomes.finish(job, dispatch, attempt, records, AttemptOutcome(
            end.succeeded, status, end.error(), {"exitCode": end.exit_code}, task=task))

    # --- the task_events function: ECS said the task stopped ---------------------------------

    def record_stopped(self, detail: dict) -> Outcome:
        """An "ECS Task State Change" event with lastStatus STOPPED. A task that is not ours, or
        an end for an attempt that no longer holds its execution, changes nothing."""
        end = task_end_of(detail, None)
        job_id = job_id_of(end.execution_id) if end.execution_id else None
        execution = self._executions.get(job_id, end.execution_id) if job_id else None
        if execution is None or not self._is_current(execution, end):
            return Outcome.STALE_RESULT
        job = self._jobs.get(execution.tenant_id, execution.job_id, consistent=True)
        return self._ended(job, execution, task_end_of(detail, self._container(job, execution)))

    @staticmethod
    def _is_current(execution: Execution, end: TaskEnd) -> bool:
        if execution.status is not ExecutionStatus.RUNNING:
            return False
        if execution.task is not None:
            return execution.task.get("taskArn") == end.task_arn
        return end.attempt == execution.attempt  # ended before the worker recorded it

    @staticmethod
    def _container(job: Job | None, execution: Execution) -> str | None:
        if execution.task is not None:
            return execution.task.get("container")
        job = as_step_view(job, execution.execution_id)
        target = job.spec.target if job is not None else None
        return target.config.get("container") if target is not None else None

    def _ended(self, job: Job | None, execution: Execution, end: TaskEnd) -> Outcome:
        task = {**(execution.task or {"taskArn": end.task_arn, "attempt": end.attempt}),
                "exitCode": end.exit_code, "stoppedReason": (end.stopped_reason or "")[:1000] or None,
                "stopCode": end.stop_code}
        if "logUrl" not in task and "cluster" in task:
            task["logUrl"] = self._log_url(task["cluster"], end.task_arn)
        dispatch = _dispatch(execution, job)
        now = self._clock.now_ms()
        started = execution.attempt_started_ms or now
        if execution.cancel_requested:
            record = AttemptRecord(execution.attempt, ExecutionStatus.CANCELLED, started, now, "cancelled on request")
            return self._outcomes.cancel_running(dispatch, execution.attempt, [record], job=job, task=task)
        status = ExecutionStatus.SUCCEEDED if end.succeeded else ExecutionStatus.FAILED
        record = AttemptRecord(execution.attempt, status, started, now, end.error())
        outcome = AttemptOutcome(end.succeeded, status, end.error(), {"exitCode": end.exit_code}, task=task)
        return self._outcomes.finish(job, dispatch, execution.attempt, [record], outcome)

    # --- the worker: the task's LEASE timer --------------------------------------------------

    def check(self, dispatch: Dispatch, execution: Execution, job: Job | None) -> Outcome:
        """A running container attempt looked at: cancelled → stop it; stopped → record its end;
        past its deadline → stop it, TIMED_OUT; else look again later."""
        task = execution.task or {}
        now = self._clock.now_ms()
        dispatch = _dispatch(execution, job)
        job = as_step_view(job, execution.execution_id)  # a step's task: its step's target and timeout
        if job is None or self._calls is None or job.spec.target is None:
            return Outcome.DUPLICATE
        if execution.cancel_requested:
            self._calls.stop_task(job, task["taskArn"], "jobsched: the execution was cancelled")
            record = AttemptRecord(execution.attempt, ExecutionStatus.CANCELLED, execution.attempt_started_ms or now,
                                   now, "cancelled on request: task stopped")
            return self._outcomes.cancel_running(dispatch, execution.attempt, [record], job=job,
                                                 task={**task, "stoppedReason": "cancelled on request"})
        described = self._calls.describe_task(job, task["taskArn"])
        started_ms = execution.attempt_started_ms or now
        if described is None and now - started_ms < UNLISTED_GRACE_MS:
            # ECS's API is eventually consistent: a task just started may not be described yet.
            self._outcomes.arm_lease_check(dispatch, execution.attempt, now + UNLISTED_RETRY_MS, job)
            return Outcome.LEASE_EXTENDED
        if described is None:
            # Unknown to ECS past the grace: stopped to be sure before the attempt ends (a task ECS
            # still runs must not run beside the retry); a StopTask of a task it forgot fails, and
            # that is fine.
            try:
                self._calls.stop_task(job, task["taskArn"], "jobsched: the task was not found")
            except Exception:  # noqa: BLE001 - gone already: the attempt ends all the same
                logger.info("a task not found could not be stopped", extra={"taskArn": task["taskArn"]})
        if described is None or described.get("lastStatus") == "STOPPED":
            end = task_end_of(described, task.get("container")) if described else TaskEnd(
                task["taskArn"], execution.execution_id, execution.attempt, None, "ECS no longer knows the task", None)
            return self._ended(job, execution, end)
        deadline = int(task.get("deadlineMs") or 0)
        if now >= deadline:
            # Crash after the stop: the next look finds it STOPPED (or its event records it), and
            # the attempt ends with the task's own end instead of TIMED_OUT: still ended once.
            self._calls.stop_task(job, task["taskArn"], "jobsched: the execution's timeout passed")
            error = f"timed out after {job.spec.timeout_sec} s: the task was stopped"
            record = AttemptRecord(execution.attempt, ExecutionStatus.TIMED_OUT, execution.attempt_started_ms or now,
                                   now, error)
            return self._outcomes.finish(job, dispatch, execution.attempt, [record], AttemptOutcome(
                False, ExecutionStatus.TIMED_OUT, error, task={**task, "stoppedReason": "timed out"}))
        self._outcomes.arm_lease_check(dispatch, execution.attempt, min(deadline, now + RECONCILE_MS), job)
        return Outcome.LEASE_EXTENDED


def _dispatch(execution: Execution, job: Job | None) -> Dispatch:
    """The attempt as a dispatch, for the fenced end (as service/callbacks.py builds it)."""
    kind = DispatchKind.MANUAL if execution.execution_id.endswith(".manual") else DispatchKind.FIRE
    return Dispatch(kind, execution.tenant_id, execution.job_id, execution.execution_id, execution.scheduled_ms,
                    job.generation if job else 0, execution.attempt, run=execution.run)
