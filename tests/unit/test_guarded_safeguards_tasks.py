"""Container-task and AWS-target safeguards that a mutation pass found held by no test, checked on
the service with stand-ins for its stores, its outcomes and ECS: a cancel during RunTask stops the
task; a takeover adopts only an earlier attempt's running task and only the taken-over attempt's
stopped one; a task's end applies only to a RUNNING execution and, before the record, to its own
attempt; a cancelled task's end records CANCELLED; a task ECS no longer knows is stopped before its
attempt ends; a RunTask that started nothing fails the attempt; expired credentials are retried
once with a fresh session."""
from types import SimpleNamespace

from jobsched.domain.container_tasks import TAG_ATTEMPT, TAG_EXECUTION, UNLISTED_GRACE_MS
from jobsched.domain.executions import AttemptOutcome, Execution, ExecutionStatus
from jobsched.service.container_tasks import ContainerTasks
from jobsched.service.outcomes import Outcome

NOW = 1_900_000_000_000
JOB_ID = "job_a"
EXECUTION_ID = f"{JOB_ID}.{NOW - 60_000:013d}"
ARN = "arn:aws:ecs:us-east-1:123456789012:task/jobs/"


def job():
    target = SimpleNamespace(config={"cluster": "jobs", "container": "main", "taskDefinition": "td"})
    spec = SimpleNamespace(timeout_sec=600, steps=None, target=target)
    return SimpleNamespace(tenant_id="tenant-a", job_id=JOB_ID, spec=spec, generation=1, version=1)


def execution(status=ExecutionStatus.RUNNING, attempt=2, task=None, cancel_requested=False):
    return Execution(JOB_ID, EXECUTION_ID, "tenant-a", NOW - 60_000, status, attempt, attempt_started_ms=NOW - 60_000,
                     task=task, cancel_requested=cancel_requested)


def ecs_task(name, attempt, stopped=False, exit_code=0):
    return {"taskArn": ARN + name, "lastStatus": "STOPPED" if stopped else "RUNNING",
            "desiredStatus": "STOPPED" if stopped else "RUNNING", "stopCode": "EssentialContainerExited",
            "containers": [{"name": "main", "exitCode": exit_code if stopped else None}],
            "tags": [{"key": TAG_EXECUTION, "value": EXECUTION_ID}, {"key": TAG_ATTEMPT, "value": str(attempt)}]}


class World:
    """The service's surroundings, recording what it asked of them, in order."""

    def __init__(self, current: Execution | None = None, tasks=(), described=None):
        self.said: list[tuple] = []
        self.current, self.tasks, self.described = current, list(tasks), described
        world = self

        class Executions:
            def get(self, job_id, execution_id):
                return world.current

            def accept(self, dispatch, attempt, lease_until, record):
                return world.current

        class Calls:
            def stop_task(self, job, task_arn, reason):
                world.said.append(("stop", task_arn))

            def describe_task(self, job, task_arn):
                return world.described

            def tasks_of(self, job, execution_id):
                return world.tasks

        class Outcomes:
            flow = SimpleNamespace(extend=lambda *args: None)

            def finish(self, job, dispatch, attempt, records, outcome):
                world.said.append(("finish", attempt, outcome.status))
                return Outcome.SUCCEEDED if outcome.ok else Outcome.RETRY_SCHEDULED

            def cancel_running(self, dispatch, attempt, records, error=None, job=None, task=None):
                world.said.append(("cancelled", attempt))
                return Outcome.CANCELLED

            def arm_lease_check(self, dispatch, attempt, deadline_ms, job):
                world.said.append(("look again", deadline_ms))

        stores = SimpleNamespace(jobs=SimpleNamespace(get=lambda *args, **kwargs: job()), executions=Executions())
        self.service = ContainerTasks(stores, Outcomes(), SimpleNamespace(now_ms=lambda: NOW), calls=Calls())


def dispatch():
    return SimpleNamespace(execution_id=EXECUTION_ID, job_id=JOB_ID, tenant_id="tenant-a", holds=0)


def test_a_cancel_asked_during_run_task_stops_the_task_at_once():
    world = World(current=execution(task={"taskArn": ARN + "t2", "container": "main"}, cancel_requested=True))
    outcome = world.service.started(job(), dispatch(), 2, NOW - 60_000, {"cluster": "jobs", "taskArn": ARN + "t2"})
    assert outcome is Outcome.CANCELLED
    assert world.said == [("stop", ARN + "t2"), ("cancelled", 2)]


def taken_over(attempt):
    from jobsched.domain.executions import AttemptRecord  # noqa: PLC0415
    return AttemptRecord(attempt, ExecutionStatus.LOST, NOW - 120_000, NOW - 60_000, None)


def test_a_takeover_adopts_no_running_task_of_its_own_attempt_or_a_later_one():
    world = World(current=execution(attempt=2), tasks=[ecs_task("t2", 2), ecs_task("t3", 3)])
    assert world.service.take_over(job(), dispatch(), 2, NOW, taken_over(1)) is None
    assert world.said == []


def test_a_takeover_adopts_no_stopped_task_of_an_attempt_before_the_taken_over_one():
    world = World(current=execution(attempt=3), tasks=[ecs_task("t1", 1, stopped=True, exit_code=0)])
    assert world.service.take_over(job(), dispatch(), 3, NOW, taken_over(2)) is None
    assert world.said == []


def stopped_event(name, attempt, exit_code=0):
    return ecs_task(name, attempt, stopped=True, exit_code=exit_code)


def test_a_task_end_for_an_execution_no_longer_running_changes_nothing():
    waiting = execution(status=ExecutionStatus.FAILED, task={"taskArn": ARN + "t2", "container": "main"})
    world = World(current=waiting)
    assert world.service.record_stopped(stopped_event("t2", 2)) is Outcome.STALE_RESULT
    assert world.said == []


def test_a_task_end_before_the_record_applies_only_to_its_own_attempt():
    world = World(current=execution(attempt=3, task=None))
    assert world.service.record_stopped(stopped_event("t2", 2)) is Outcome.STALE_RESULT
    assert world.said == []
    # (its own attempt's end, before the record, is its end)
    assert world.service.record_stopped(stopped_event("t3", 3)) is Outcome.SUCCEEDED
    assert world.said == [("finish", 3, ExecutionStatus.SUCCEEDED)]


def test_the_end_of_a_cancelled_task_records_cancelled():
    world = World(current=execution(task={"taskArn": ARN + "t2", "container": "main"}, cancel_requested=True))
    assert world.service.record_stopped(stopped_event("t2", 2, exit_code=143)) is Outcome.CANCELLED
    assert world.said == [("cancelled", 2)]


def test_a_task_ecs_no_longer_knows_is_stopped_before_its_attempt_ends():
    running = execution(task={"taskArn": ARN + "t2", "container": "main", "deadlineMs": NOW + 600_000})
    running = Execution(**{**running.__dict__, "attempt_started_ms": NOW - UNLISTED_GRACE_MS - 1})
    world = World(current=running, described=None)
    world.service.check(dispatch(), running, job())
    assert world.said[0] == ("stop", ARN + "t2")
    assert world.said[1][0] == "finish" and world.said[1][2] is ExecutionStatus.FAILED


# --- AWS targets -----------------------------------------------------------------------------
def invoker():
    from jobsched.store.targets import AwsTargetInvoker  # noqa: PLC0415
    return AwsTargetInvoker.__new__(AwsTargetInvoker)


def test_a_run_task_that_started_nothing_fails_the_attempt_with_ecs_reason():
    aws = invoker()
    answer = {"tasks": [], "failures": [{"arn": "x", "reason": "RESOURCE:MEMORY"}]}
    aws._ecs = lambda job: SimpleNamespace(run_task=lambda **kwargs: answer)
    ecs_job = SimpleNamespace(tenant_id="tenant-a", job_id=JOB_ID, spec=SimpleNamespace(payload=None, target=SimpleNamespace(
        config={"cluster": "jobs", "taskDefinition": "td", "subnets": ["s"], "container": "main"})))
    outcome = aws._run_task(ecs_job, SimpleNamespace(execution_id=EXECUTION_ID, holds=0), 1)
    assert not outcome.ok and outcome.status is ExecutionStatus.FAILED
    assert "RESOURCE:MEMORY" in outcome.error


def test_expired_credentials_are_retried_once_with_a_fresh_session():
    from jobsched.store.targets import _Expired  # noqa: PLC0415
    aws = invoker()
    forgotten, calls = [], []
    aws._tenants = SimpleNamespace(forget=forgotten.append)

    def invoke(job, dispatch, attempt, progress):
        calls.append(len(forgotten))
        if not forgotten:  # the cached session's credentials: expired
            raise _Expired("ExpiredToken: the security token included in the request is expired")
        return AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, None)

    aws._invoke = invoke
    outcome = aws.invoke(SimpleNamespace(tenant_id="tenant-a"), dispatch(), 1)
    assert outcome.ok, outcome
    assert forgotten == ["tenant-a"] and calls == [0, 1]
