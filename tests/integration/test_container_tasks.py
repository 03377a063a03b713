"""Container jobs (ECS_TASK) on the emulator's ECS, with the real invoker in the tenant's session of
the targets role under the strict layer (IAM from the template): RunTask, the task's STOPPED
event into the task_events function, the deadline's StopTask, cancel, and a worker that dies
after RunTask. The events are built as ECS sends them (local/tasks.py stopped_event)."""
import json

import pytest

from jobsched.domain.tenant_tags import TENANT_TAG_KEY
from jobsched.local.tasks import hold_tasks_running, stopped_event

from .harness import KEY_B, TENANT_A, TENANT_B, ProcessDied

ACCOUNT = "123456789012"
CLUSTER = "local"


@pytest.fixture
def ecs_harness(harness):
    release = hold_tasks_running()
    yield _with_ecs(harness)
    release()


def _with_ecs(harness, session=None):
    """`session`: what the invoker makes its clients from (a fault double's, by default the harness's)."""
    harness.ecs = harness.session.client("ecs")
    harness.ecs.create_cluster(clusterName=CLUSTER)
    # Fargate's awsvpc networking: the subnet and the security group must exist.
    ec2 = harness.session.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})  # each task's ENI gets a name
    harness.subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    harness.group = ec2.create_security_group(GroupName="tasks", Description="tasks", VpcId=vpc)["GroupId"]
    # Container networks: tenant A may use this subnet and group, tenant B another network.
    allow_networks(harness, {TENANT_A: {"subnets": [harness.subnet], "securityGroups": [harness.group]},
                             TENANT_B: {"subnets": ["subnet-0b0b0b0b"], "securityGroups": ["sg-0b0b0b0b"]}})
    return make_functions(harness, session)


def make_functions(harness, session=None):
    """The API and the worker (with the real invoker) from the harness's settings, made again."""
    from jobsched.adapters.http_target import HttpTargetInvoker
    from jobsched.adapters.targets import TargetRouter
    from jobsched.handlers import api, worker
    from jobsched.local.events import Function
    from jobsched.settings import Env
    from jobsched.store.targets import AwsTargetInvoker, TenantSessions

    sessions = TenantSessions(harness.session, harness.envs["worker"][Env.TARGETS_ROLE_ARN], harness.clock.now_ms)
    harness.router = TargetRouter(HttpTargetInvoker(allow_private=True),
                                  AwsTargetInvoker(session or harness.session, sessions))
    inner = worker.make_handler(harness.envs["worker"], harness.clock, harness.session, harness.router)

    def invocation(event, context):
        try:
            return inner(event, context)
        except ProcessDied as died:  # the invocation fails as a whole, as a dead process's does
            raise RuntimeError("the worker's process died") from died

    harness.worker = Function("worker", invocation)
    harness.poller._worker = harness.worker
    harness.api = Function("api", api.make_handler(harness.envs["api"], harness.clock, harness.session))
    return harness


def allow_networks(harness, policy: dict) -> None:
    """The operator's ecsNetworks, as the stack hands it to the API and the worker (their
    functions are made again by make_functions)."""
    from jobsched.domain.task_networks import TaskNetworks
    from jobsched.settings import Env

    for name in ("api", "worker"):
        harness.envs[name] = {**harness.envs[name], Env.ECS_NETWORKS: TaskNetworks.parse(policy).text()}


def task_definition(harness, family="local-report", tenant=TENANT_A, role="local-task-report"):
    tags = [{"key": TENANT_TAG_KEY, "value": tenant}] if tenant else []
    return harness.ecs.register_task_definition(
        family=family, requiresCompatibilities=["FARGATE"], networkMode="awsvpc", cpu="256", memory="512",
        taskRoleArn=f"arn:aws:iam::{ACCOUNT}:role/{role}",
        containerDefinitions=[{"name": "main", "image": "python:3.12-slim", "essential": True, "cpu": 256,
                               "memory": 512}],
        tags=tags)["taskDefinition"]["taskDefinitionArn"]


def ecs_job(harness, definition, key=None, target_changes=None, **extra):
    target = {"type": "ECS_TASK", "cluster": CLUSTER, "taskDefinition": definition, "subnets": [harness.subnet],
              "securityGroups": [harness.group], "container": "main",
              "command": ["python3", "-c", "print('report')"], "environment": {"MODE": "full"},
              **(target_changes or {})}
    body = {"name": "report", "type": "DELAYED", "delaySeconds": 5, "target": target, "payload": {"day": "monday"},
            **extra}
    status, answer = harness.request("POST", "/v1/jobs", body, **({"key": key} if key else {}))
    assert status == 201, answer
    return answer


def tasks_of(harness) -> list[dict]:
    arns = harness.ecs.list_tasks(cluster=CLUSTER).get("taskArns") or []
    return harness.ecs.describe_tasks(cluster=CLUSTER, tasks=arns, include=["TAGS"])["tasks"] if arns else []


def environment(task) -> dict:
    [override] = task["overrides"]["containerOverrides"]
    return {e["name"]: e["value"] for e in override["environment"]}


def end_task(harness, task, exit_code, reason="Essential container in task exited",
             stop_code="EssentialContainerExited"):
    """The task's container exits: ECS marks it STOPPED and sends its event (delivered as often as
    EventBridge chooses: the tests deliver some twice)."""
    harness.ecs.stop_task(cluster=CLUSTER, task=task["taskArn"], reason=reason)
    event = stopped_event(task, exit_code, reason, stop_code, harness.clock.now_ms())
    return harness.task_events.invoke(event)


def only_execution(harness, job):
    [execution] = harness.executions_of(job["jobId"])
    return harness.execution(execution["executionId"])


def test_a_task_that_exits_0_succeeds_with_its_task_exit_code_and_log_link(ecs_harness):
    harness = ecs_harness
    job = ecs_job(harness, task_definition(harness), timeoutSec=7200)
    harness.advance(6)
    [task] = tasks_of(harness)
    execution = only_execution(harness, job)
    assert execution["status"] == "RUNNING" and execution["task"]["taskArn"] == task["taskArn"]
    env = environment(task)
    assert env["JOBSCHED_EXECUTION_ID"] == execution["executionId"] and env["JOBSCHED_ATTEMPT"] == "1"
    assert json.loads(env["JOBSCHED_PAYLOAD"]) == {"day": "monday"} and env["MODE"] == "full"
    assert task["overrides"]["containerOverrides"][0]["command"] == ["python3", "-c", "print('report')"]
    tags = {t["key"]: t["value"] for t in task["tags"]}
    # RunTask's own, and its task definition's tenant tag (propagateTags=TASK_DEFINITION)
    assert tags == {"jobsched:executionId": execution["executionId"], "jobsched:attempt": "1",
                    TENANT_TAG_KEY: TENANT_A}
    harness.advance(3600)  # an hour of running: no heartbeat asked of it, it stays RUNNING
    assert only_execution(harness, job)["status"] == "RUNNING"
    assert end_task(harness, task, 0) == {"outcome": "SUCCEEDED"}
    done = only_execution(harness, job)
    assert done["status"] == "SUCCEEDED" and done["attempt"] == 1
    assert done["task"]["taskArn"] == task["taskArn"] and done["task"]["exitCode"] == 0
    assert done["task"]["stoppedReason"] == "Essential container in task exited"
    assert done["task"]["logUrl"].endswith(f"/tasks/{task['taskArn'].rsplit('/', 1)[-1]}/logs?region=us-east-1")
    # The same event again (EventBridge delivers at least once) changes nothing.
    assert end_task(harness, task, 0) == {"outcome": "STALE_RESULT"}
    assert len(tasks_of(harness)) == 1


def test_a_task_that_exits_non_zero_fails_and_is_retried_and_a_late_event_is_fenced(ecs_harness):
    harness = ecs_harness
    job = ecs_job(harness, task_definition(harness),
                  retryPolicy={"maxAttempts": 3, "backoff": "FIXED", "initialDelayMs": 2000})
    harness.advance(6)
    [first] = tasks_of(harness)
    assert end_task(harness, first, 3) == {"outcome": "RETRY_SCHEDULED"}
    failed = only_execution(harness, job)
    assert failed["status"] == "FAILED" and "exited with code 3" in failed["error"]
    assert failed["task"]["exitCode"] == 3
    harness.advance(4)
    second = next(t for t in tasks_of(harness) if t["taskArn"] != first["taskArn"])
    assert environment(second)["JOBSCHED_ATTEMPT"] == "2"
    running = only_execution(harness, job)
    assert running["status"] == "RUNNING" and running["attempt"] == 2 and running["task"]["taskArn"] == second["taskArn"]
    # The first task's event, delivered late: it belongs to attempt 1, which no longer holds the execution.
    late = stopped_event(first, 0, "late", "EssentialContainerExited", harness.clock.now_ms())
    assert harness.task_events.invoke(late) == {"outcome": "STALE_RESULT"}
    assert only_execution(harness, job)["status"] == "RUNNING"
    assert end_task(harness, second, 0) == {"outcome": "SUCCEEDED"}
    done = only_execution(harness, job)
    assert done["status"] == "SUCCEEDED" and [a["status"] for a in done["attempts"]] == ["FAILED", "SUCCEEDED"]


def test_an_unplaceable_task_fails_with_its_reason_and_is_retried(ecs_harness):
    harness = ecs_harness
    job = ecs_job(harness, task_definition(harness), retryPolicy={"maxAttempts": 2, "initialDelayMs": 1000})
    harness.advance(6)
    [task] = tasks_of(harness)
    outcome = end_task(harness, task, None, "CannotPullContainerError: pull image manifest has been retried 5 times",
                       "TaskFailedToStart")
    assert outcome == {"outcome": "RETRY_SCHEDULED"}
    execution = only_execution(harness, job)
    assert "task failed to start" in execution["error"] and "CannotPullContainerError" in execution["error"]
    assert execution["task"]["exitCode"] is None


def test_a_task_past_its_timeout_is_stopped_and_the_attempt_timed_out(ecs_harness):
    harness = ecs_harness
    job = ecs_job(harness, task_definition(harness), timeoutSec=1800, retryPolicy={"maxAttempts": 1})
    harness.advance(6)
    [task] = tasks_of(harness)
    harness.advance(1700)
    assert only_execution(harness, job)["status"] == "RUNNING"  # looked at every 15 minutes, left running
    harness.advance(300)  # its deadline's look: StopTask, TIMED_OUT, and (one attempt) DEAD
    [stopped] = tasks_of(harness)
    assert stopped["desiredStatus"] == "STOPPED" and "timeout" in stopped["stoppedReason"]
    execution = only_execution(harness, job)
    assert execution["status"] == "DEAD" and [a["status"] for a in execution["attempts"]] == ["TIMED_OUT"]
    assert "timed out after 1800 s" in execution["error"]
    # ECS then reports the stopped task (exit 137): the attempt has ended, nothing changes.
    assert harness.task_events.invoke(stopped_event(task, 137, "stopped", "UserInitiated",
                                                    harness.clock.now_ms())) == {"outcome": "STALE_RESULT"}
    assert only_execution(harness, job)["status"] == "DEAD"


def test_a_lost_event_is_recovered_by_the_next_look_at_the_task(ecs_harness):
    harness = ecs_harness
    job = ecs_job(harness, task_definition(harness), timeoutSec=7200)
    harness.advance(6)
    [task] = tasks_of(harness)
    harness.ecs.stop_task(cluster=CLUSTER, task=task["taskArn"], reason="Essential container in task exited")
    harness.advance(16 * 60)  # no event delivered: the worker's look (every 15 minutes) finds it STOPPED
    execution = only_execution(harness, job)
    assert execution["status"] != "RUNNING" and execution["task"]["stoppedReason"] == "Essential container in task exited"


def test_cancel_while_running_stops_the_task(ecs_harness):
    harness = ecs_harness
    job = ecs_job(harness, task_definition(harness), timeoutSec=7200)
    harness.advance(6)
    [task] = tasks_of(harness)
    execution_id = only_execution(harness, job)["executionId"]
    status, answer = harness.request("POST", f"/v1/executions/{execution_id}/cancel")
    assert status == 202 and answer["cancelRequested"] is True
    harness.advance(2)
    [stopped] = tasks_of(harness)
    assert stopped["desiredStatus"] == "STOPPED" and "cancelled" in stopped["stoppedReason"]
    execution = harness.execution(execution_id)
    assert execution["status"] == "CANCELLED" and execution["task"]["taskArn"] == task["taskArn"]
    assert end_task(harness, task, 137, "cancelled", "UserInitiated") == {"outcome": "STALE_RESULT"}
    assert harness.execution(execution_id)["status"] == "CANCELLED"


def die_once_after_run_task(harness):
    real = harness.router.invoke
    deaths = []

    def die_after_the_call(*args, **kwargs):
        outcome = real(*args, **kwargs)
        if not deaths:
            deaths.append(outcome)
            raise ProcessDied("the worker died between RunTask and recording the task")
        return outcome

    harness.router.invoke = die_after_the_call
    return deaths


def test_a_task_that_ended_unseen_while_its_worker_was_dead_is_its_attempts_end(ecs_harness):
    harness = ecs_harness
    job = ecs_job(harness, task_definition(harness), timeoutSec=7200)
    deaths = die_once_after_run_task(harness)
    harness.advance(6)
    [task] = tasks_of(harness)
    assert deaths
    # The task exits 0 and ECS's event never reaches the scheduler (EventBridge gave up).
    harness.ecs.stop_task(cluster=CLUSTER, task=task["taskArn"], reason="Essential container in task exited")
    harness.advance(20 * 60)  # the redelivery takes over, finds the stopped task: its end is this attempt's
    assert [t["taskArn"] for t in tasks_of(harness)] == [task["taskArn"]]  # no second task
    execution = only_execution(harness, job)
    assert execution["status"] == "SUCCEEDED" and execution["task"]["taskArn"] == task["taskArn"]
    assert execution["task"]["exitCode"] == 0  # as the emulator's ECS reports the stopped container
    assert execution["attempt"] == 2 and execution["attempts"][0]["status"] == "LOST"


@pytest.mark.parametrize("pair_refused", [False, True], ids=["as-emulated", "ecs-refuses-startedBy-with-status"])
def test_a_worker_that_dies_after_run_task_starts_no_second_task(ecs_harness, monkeypatch, pair_refused):
    """Also when ECS refuses ListTasks with startedBy and desiredStatus together (its API reference
    says startedBy must be the only filter): the running task is found by startedBy alone."""
    harness = ecs_harness
    if pair_refused:
        from moto.ecs.exceptions import InvalidParameterException
        from moto.ecs.models import EC2ContainerServiceBackend

        listed = EC2ContainerServiceBackend.list_tasks

        def strict_list_tasks(self, cluster_str=None, container_instance=None, family=None, started_by=None,
                              service_name=None, desiredStatus=None):
            if started_by and desiredStatus:
                raise InvalidParameterException("startedBy must be the only filter")
            return listed(self, cluster_str, container_instance, family, started_by, service_name, desiredStatus)

        monkeypatch.setattr(EC2ContainerServiceBackend, "list_tasks", strict_list_tasks)
    job = ecs_job(harness, task_definition(harness), timeoutSec=7200)
    deaths = die_once_after_run_task(harness)
    harness.advance(6)
    [task] = tasks_of(harness)
    assert deaths and only_execution(harness, job)["task"] is None  # started, never recorded
    harness.advance(20 * 60)  # the claim's lease ends; the redelivery takes over and finds the task
    assert [t["taskArn"] for t in tasks_of(harness)] == [task["taskArn"]]  # no second task
    execution = only_execution(harness, job)
    assert execution["status"] == "RUNNING" and execution["attempt"] == 2
    assert execution["task"]["taskArn"] == task["taskArn"]
    assert end_task(harness, task, 0) == {"outcome": "SUCCEEDED"}
    assert only_execution(harness, job)["status"] == "SUCCEEDED"


def test_iam_runs_only_the_tenants_granted_task_definitions_and_roles(ecs_harness):
    harness = ecs_harness
    # Tagged for another tenant: the targets role's session of tenant A may not run it.
    others = ecs_job(harness, task_definition(harness, family="local-theirs", tenant=TENANT_B),
                     retryPolicy={"maxAttempts": 3})
    # Tagged for tenant A, but its task role is not one the deployment lets the scheduler pass.
    unpassable = ecs_job(harness, task_definition(harness, family="local-admin", role="admin"),
                         retryPolicy={"maxAttempts": 3})
    harness.advance(6)
    assert tasks_of(harness) == []
    for job, action in ((others, "ecs:RunTask"), (unpassable, "iam:PassRole")):
        execution = only_execution(harness, job)
        assert execution["status"] == "DEAD" and execution["attempt"] == 1, execution  # not retried
        assert "AccessDenied" in execution["error"] and action in execution["error"]
        assert "ecsTaskDefinitions" in execution["error"] and f"jobsched:tenant={TENANT_A}" in execution["error"]
    # A task definition outside the deployment's grant is refused at creation.
    status, answer = harness.request("POST", "/v1/jobs", {
        "name": "x", "type": "DELAYED", "delaySeconds": 5, "target": {
            "type": "ECS_TASK", "cluster": CLUSTER, "container": "main", "subnets": ["subnet-0abc1234"],
            "taskDefinition": f"arn:aws:ecs:us-east-1:{ACCOUNT}:task-definition/prod-report:1"}}, key=KEY_B)
    assert status == 422 and answer["error"]["details"][0]["field"] == "target.taskDefinition"


def test_a_container_step_of_a_run_ends_under_its_steps_timeout_and_moves_the_run(ecs_harness):
    harness = ecs_harness
    definition = task_definition(harness)
    target = {"type": "ECS_TASK", "cluster": CLUSTER, "taskDefinition": definition, "subnets": [harness.subnet],
              "securityGroups": [harness.group], "container": "main", "command": ["sh", "-c", "make build"]}
    job = harness.create_job({"name": "pipeline", "type": "DELAYED", "delaySeconds": 5, "timeoutSec": 7200,
                              "retryPolicy": {"maxAttempts": 1},
                              "steps": [{"name": "build", "target": target},
                                        {"name": "package", "target": target, "dependsOn": ["build"],
                                         "timeoutSec": 1800}]})
    harness.advance(6)
    [build] = tasks_of(harness)
    assert end_task(harness, build, 0) == {"outcome": "SUCCEEDED"}
    harness.advance(2)
    package = next(t for t in tasks_of(harness) if t["taskArn"] != build["taskArn"])
    assert environment(package)["JOBSCHED_EXECUTION_ID"].endswith(".step.package")
    harness.advance(1800)  # the package step's own timeout (not the job's 7,200 s): stopped, TIMED_OUT
    [run] = harness.executions_of(job["jobId"])
    run = harness.execution(run["executionId"])
    assert {s["name"]: s["status"] for s in run["steps"]} == {"build": "SUCCEEDED", "package": "DEAD"}
    assert run["status"] == "DEAD"
    assert next(t for t in tasks_of(harness) if t["taskArn"] == package["taskArn"])["desiredStatus"] == "STOPPED"


def test_a_completion_hook_cannot_be_a_container_task(ecs_harness):
    harness = ecs_harness
    target = {"type": "ECS_TASK", "cluster": CLUSTER, "taskDefinition": task_definition(harness),
              "subnets": [harness.subnet], "container": "main"}
    status, answer = harness.request("POST", "/v1/jobs", {"name": "x", "type": "DELAYED", "delaySeconds": 5,
                                                          "target": target, "onFailure": target})
    assert status == 422 and answer["error"]["details"][0]["field"] == "onFailure.type"


def test_a_task_not_described_yet_is_looked_at_again_not_failed(ecs_harness):
    """ECS's API is eventually consistent: a task DescribeTasks misses just after its start is
    looked at again (here it then passes its deadline and is stopped, TIMED_OUT), never ended as
    unknown while it may run."""
    harness = ecs_harness
    job = ecs_job(harness, task_definition(harness), timeoutSec=30)
    calls = harness.router.task_calls
    real, missed = calls.describe_task, []

    def not_yet(job_, task_arn):
        if not missed:
            missed.append(task_arn)
            return None
        return real(job_, task_arn)

    calls.describe_task = not_yet
    harness.advance(6)
    [task] = tasks_of(harness)
    harness.advance(31)  # the deadline's look: not described
    assert missed and only_execution(harness, job)["status"] == "RUNNING"
    harness.advance(31)  # looked at again: running past its deadline, stopped
    stopped = next(t for t in tasks_of(harness) if t["taskArn"] == task["taskArn"])
    assert stopped["desiredStatus"] == "STOPPED"
    assert only_execution(harness, job)["attempts"][0]["status"] == "TIMED_OUT"


def test_a_task_definition_or_cluster_of_another_region_is_refused_at_creation(ecs_harness):
    # Before: granted by the region-wildcard pattern, accepted, and its task's end (heard by an
    # EventBridge rule in its own region only) was found only by the worker's 15-minute look.
    harness = ecs_harness
    here = task_definition(harness)
    elsewhere = here.replace(":us-east-1:", ":eu-west-1:")
    body = {"name": "x", "type": "DELAYED", "delaySeconds": 5, "target": {
        "type": "ECS_TASK", "cluster": CLUSTER, "container": "main", "subnets": [harness.subnet],
        "securityGroups": [harness.group], "taskDefinition": elsewhere}}
    status, answer = harness.request("POST", "/v1/jobs", body)
    assert status == 422 and answer["error"]["details"][0]["field"] == "target.taskDefinition", answer
    assert "eu-west-1" in answer["error"]["message"] and "us-east-1" in answer["error"]["message"]
    body["target"].update(taskDefinition=here, cluster=f"arn:aws:ecs:eu-west-1:{ACCOUNT}:cluster/{CLUSTER}")
    status, answer = harness.request("POST", "/v1/jobs", body)
    assert status == 422 and answer["error"]["details"][0]["field"] == "target.cluster", answer
    body["target"].update(cluster=f"arn:aws:ecs:us-east-1:{ACCOUNT}:cluster/{CLUSTER}")
    assert harness.request("POST", "/v1/jobs", body)[0] == 201


def test_a_tenants_session_may_describe_or_stop_only_its_own_tenants_running_tasks(ecs_harness):
    # Before: DescribeTasks and StopTask were granted on every task of a granted cluster, so any
    # tenant's session could read another tenant's task (its overrides: command, environment,
    # payload) or stop it. Now the task's tenant tag (propagated from its task definition) decides.
    from botocore.exceptions import ClientError

    harness = ecs_harness
    definition = task_definition(harness)
    ecs_job(harness, definition, timeoutSec=7200)
    harness.advance(6)
    [task] = tasks_of(harness)
    assert {t["key"]: t["value"] for t in task["tags"]}[TENANT_TAG_KEY] == TENANT_A  # propagated
    aws = harness.router._aws

    def session_of(tenant):
        return aws.client("ecs", definition, 30, tenant)

    for call in (lambda ecs: ecs.describe_tasks(cluster=CLUSTER, tasks=[task["taskArn"]]),
                 lambda ecs: ecs.stop_task(cluster=CLUSTER, task=task["taskArn"], reason="not yours")):
        with pytest.raises(ClientError) as denied:
            call(session_of(TENANT_B))
        assert denied.value.response["Error"]["Code"] == "AccessDeniedException"
    assert tasks_of(harness)[0]["lastStatus"] == "RUNNING"
    # Its own tenant's session (the worker's look, its stop at a cancel or the deadline) may, and
    # still describes the task once stopped (ECS deleted its tags then).
    [described] = session_of(TENANT_A).describe_tasks(cluster=CLUSTER, tasks=[task["taskArn"]])["tasks"]
    assert described["taskArn"] == task["taskArn"]
    session_of(TENANT_A).stop_task(cluster=CLUSTER, task=task["taskArn"], reason="mine")
    [stopped] = session_of(TENANT_A).describe_tasks(cluster=CLUSTER, tasks=[task["taskArn"]],
                                                    include=["TAGS"])["tasks"]
    assert stopped["lastStatus"] == "STOPPED" and not stopped.get("tags")


def test_a_job_with_its_payload_by_reference_keeps_it_out_of_runtasks_overrides(ecs_harness):
    harness = ecs_harness
    job = ecs_job(harness, task_definition(harness), timeoutSec=7200, payload={"token": "s3cr3t"},
                  target_changes={"payloadByReference": True})
    harness.advance(6)
    [task] = tasks_of(harness)
    env = environment(task)
    assert "JOBSCHED_PAYLOAD" not in env and env["JOBSCHED_PAYLOAD_REF"] == f"/v1/jobs/{job['jobId']}"
    assert "s3cr3t" not in json.dumps(task, default=str)  # DescribeTasks (and the task events) show none of it
    status, read = harness.request("GET", env["JOBSCHED_PAYLOAD_REF"])  # what the task reads, with the key
    assert status == 200 and read["payload"] == {"token": "s3cr3t"}
