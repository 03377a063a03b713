"""Container jobs (ECS_TASK) and the networks their tasks join: the API refuses a job outside its
tenant's networks (the operator's ecsNetworks), the worker checks again before RunTask, and a
RunTask refused for Fargate's rate or capacity holds the execution back without using an attempt.
On the emulator's ECS under the strict layer, as tests/integration/test_container_tasks.py."""
import pytest

from jobsched.local.tasks import hold_tasks_running

from .aws_doubles import ThrottledRunTask
from .harness import KEY_A, KEY_B, TENANT_A
from .test_container_tasks import (CLUSTER, _with_ecs, allow_networks, ecs_job, end_task, environment,
                                   make_functions, only_execution, task_definition, tasks_of)


@pytest.fixture
def ecs_harness(harness):
    release = hold_tasks_running()
    yield _with_ecs(harness)
    release()


@pytest.fixture
def throttled(harness):
    """The invoker's ECS clients refuse RunTask while the double has refusals left."""
    release = hold_tasks_running()
    double = ThrottledRunTask(harness.session, refusals=0)
    yield _with_ecs(harness, session=double), double
    release()


def _create(harness, target_changes: dict, key=KEY_A, steps: bool = False, path="/v1/jobs", method="POST"):
    target = {"type": "ECS_TASK", "cluster": CLUSTER, "taskDefinition": harness.definition, "container": "main",
              "subnets": [harness.subnet], "securityGroups": [harness.group], **target_changes}
    target = {k: v for k, v in target.items() if v is not None}
    body = {"name": "report", "type": "DELAYED", "delaySeconds": 5}
    body.update({"steps": [{"name": "build", "target": target}]} if steps else {"target": target})
    return harness.request(method, path, body, key=key)


def _refused_field(answer) -> str:
    return answer["error"]["details"][0]["field"]


def test_the_api_refuses_a_container_job_outside_its_tenants_networks(ecs_harness):
    harness = ecs_harness
    harness.definition = task_definition(harness)
    status, job = _create(harness, {})  # within tenant A's network
    assert status == 201, job
    for changes, field in (({"subnets": ["subnet-0c0c0c0c"]}, "target.subnets"),
                           ({"subnets": [harness.subnet, "subnet-0c0c0c0c"]}, "target.subnets"),
                           ({"securityGroups": ["sg-0c0c0c0c"]}, "target.securityGroups"),
                           ({"securityGroups": []}, "target.securityGroups"),
                           ({"securityGroups": None}, "target.securityGroups"),  # left out: the VPC's default
                           ({"assignPublicIp": True}, "target.assignPublicIp")):
        status, answer = _create(harness, changes)
        assert status == 422 and _refused_field(answer) == field, (changes, answer)
    status, answer = _create(harness, {"subnets": ["subnet-0c0c0c0c"]}, steps=True)
    assert status == 422 and _refused_field(answer) == "steps.0.target.subnets", answer
    # Tenant B may use its own network only, not tenant A's; a replace is held to the same.
    status, answer = _create(harness, {}, key=KEY_B)
    assert status == 422 and _refused_field(answer) == "target.subnets" and harness.subnet in answer["error"]["message"]
    status, answer = _create(harness, {"subnets": ["subnet-0c0c0c0c"]}, path=f"/v1/jobs/{job['jobId']}", method="PUT")
    assert status == 422 and _refused_field(answer) == "target.subnets", answer
    # A tenant the operator does not name, with no "*" entry, runs no container task at all.
    allow_networks(harness, {TENANT_A: {"subnets": [harness.subnet], "securityGroups": [harness.group]}})
    make_functions(harness)
    status, answer = _create(harness, {}, key=KEY_B)
    assert status == 422 and _refused_field(answer) == "target.subnets"
    assert "no networks are granted" in answer["error"]["message"]
    # The deployment-wide entry "*" covers every tenant not named.
    allow_networks(harness, {"*": {"subnets": [harness.subnet], "securityGroups": [harness.group],
                                   "assignPublicIp": True}})
    make_functions(harness)
    status, answer = _create(harness, {"assignPublicIp": True}, key=KEY_B)
    assert status == 201, answer


def test_a_job_made_before_its_tenants_networks_narrowed_never_starts_a_task_outside_them(ecs_harness):
    harness = ecs_harness
    job = ecs_job(harness, task_definition(harness), retryPolicy={"maxAttempts": 3})
    # The operator narrows tenant A's networks after the job was made: another subnet only.
    allow_networks(harness, {TENANT_A: {"subnets": ["subnet-0a0a0a0a"], "securityGroups": [harness.group]}})
    make_functions(harness)
    harness.advance(6)
    assert tasks_of(harness) == []
    execution = only_execution(harness, job)
    assert execution["status"] == "DEAD" and execution["attempt"] == 1, execution  # not retried: same answer
    assert "target.subnets" in execution["error"] and harness.subnet in execution["error"]


@pytest.mark.parametrize("capacity", [False, True], ids=["ThrottlingException", "capacity-failure"])
def test_a_refused_run_task_holds_the_execution_back_without_using_an_attempt(throttled, capacity):
    harness, double = throttled
    double.refusals, double._capacity = 3, capacity
    job = ecs_job(harness, task_definition(harness), retryPolicy={"maxAttempts": 2, "initialDelayMs": 1000})
    harness.advance(6)
    assert double.refused >= 1 and tasks_of(harness) == []
    held = only_execution(harness, job)
    assert held["status"] == "PENDING" and held["attempt"] == 0 and held["attempts"] == [], held
    harness.advance(30)  # the refusals end: the execution runs, its first attempt
    assert double.refused == 3 and double.started == 1
    [task] = tasks_of(harness)
    running = only_execution(harness, job)
    assert running["status"] == "RUNNING" and running["attempt"] == 1 and running["throttledMs"] > 0, running
    assert environment(task)["JOBSCHED_ATTEMPT"] == "1"
    assert end_task(harness, task, 0) == {"outcome": "SUCCEEDED"}
    done = only_execution(harness, job)
    assert done["status"] == "SUCCEEDED" and [a["status"] for a in done["attempts"]] == ["SUCCEEDED"]


def test_run_tasks_over_fargates_rate_are_held_back_and_all_run_on_their_first_attempt(ecs_harness):
    """Through the strict layer, which throttles RunTask as Fargate does (here scaled down to a
    bucket of 2 calls refilled at 1 a second): a herd of container jobs due together all start,
    later, each on its first attempt, none failed for the account's rate."""
    harness = ecs_harness
    harness.strict.limits.run_task_calls = (2, 1)
    definition = task_definition(harness)
    jobs = [ecs_job(harness, definition, retryPolicy={"maxAttempts": 1}) for _ in range(6)]
    harness.advance(40)
    assert harness.strict.ledger.throttled_calls > 0
    executions = [only_execution(harness, job) for job in jobs]
    assert [(e["status"], e["attempt"]) for e in executions] == [("RUNNING", 1)] * 6, executions
    assert len(tasks_of(harness)) == 6 and sum(e["throttledMs"] is not None for e in executions) >= 4


def test_a_held_back_fire_whose_job_was_cancelled_meanwhile_ends_its_waiting_execution(throttled):
    """A FIRE held back after its claim (RunTask throttled) left a PENDING execution: when the job
    is cancelled before the FIRE comes back, that execution ends CANCELLED, not PENDING for ever."""
    harness, double = throttled
    double.refusals = 10 ** 6  # Fargate stays throttled
    job = ecs_job(harness, task_definition(harness))
    harness.advance(6)
    assert only_execution(harness, job)["status"] == "PENDING"
    status, answer = harness.request("DELETE", f"/v1/jobs/{job['jobId']}")
    assert status == 200, answer
    harness.advance(60)
    execution = only_execution(harness, job)
    assert execution["status"] == "CANCELLED" and tasks_of(harness) == [], execution
