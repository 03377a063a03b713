"""Container tasks (ECS_TASK): the target's validation, RunTask's token, tags and overrides, and
what a STOPPED task means. Plain Python: no AWS."""
import json

import pytest

from jobsched.api.mapping import OwnResources, TargetScope, to_spec
from jobsched.api.models import JobRequest, parse_body
from jobsched.domain import container_tasks as tasks
from jobsched.domain.errors import InvalidRequest, UnprocessableRequest

NOW = 1_900_000_000_000
TASK_DEF = "arn:aws:ecs:us-east-1:123456789012:task-definition/report:3"
TARGET = {"type": "ECS_TASK", "cluster": "jobs", "taskDefinition": TASK_DEF, "launchType": "FARGATE",
          "subnets": ["subnet-0abc1234"], "securityGroups": ["sg-0abc1234"], "assignPublicIp": False,
          "container": "main", "command": ["python3", "-c", "print(1)"], "environment": {"MODE": "full"}}


def request(**changes) -> JobRequest:
    body = {"name": "report", "type": "DELAYED", "delaySeconds": 5, "target": {**TARGET, **changes.pop("target", {})},
            **changes}
    return parse_body(JobRequest, json.dumps(body))


def problem(exc) -> str:
    return exc.value.details[0].field


def test_a_container_target_is_accepted_with_a_day_long_timeout():
    spec = to_spec(request(timeoutSec=86_400), NOW)
    assert spec.target.type.value == "ECS_TASK" and spec.timeout_sec == 86_400
    assert spec.target.to_item()["taskDefinition"] == TASK_DEF


@pytest.mark.parametrize("changes, field", [
    ({"taskDefinition": "arn:aws:ecs:us-east-1:123456789012:task-definition/report"}, "target.taskDefinition"),
    ({"taskDefinition": TASK_DEF + "\n"}, "target.taskDefinition"),
    ({"cluster": "jobs/../other"}, "target.cluster"),
    ({"subnets": ["subnet-0abc1234", "subnet-XYZ"]}, "target.subnets"),
    ({"subnets": []}, "target.subnets"),
    ({"securityGroups": ["group-1"]}, "target.securityGroups"),
    ({"container": "main container"}, "target.container"),
    ({"command": ["ok", 3]}, "target.command.1"),
    ({"command": [""]}, "target.command"),
    ({"environment": {"JOBSCHED_ATTEMPT": "9"}}, "target.environment"),
    ({"environment": {"jobsched_payload": "x"}}, "target.environment"),
    ({"environment": {"1BAD": "x"}}, "target.environment"),
    ({"launchType": "EC2"}, "target.launchType"),
    ({"image": "nginx"}, "target.image"),
])
def test_bad_fields_answer_400_naming_the_field(changes, field):
    with pytest.raises(InvalidRequest) as exc:
        request(target=changes)
    assert problem(exc) == field


def test_timeout_over_840_seconds_is_for_container_tasks_only():
    with pytest.raises(InvalidRequest) as exc:
        to_spec(parse_body(JobRequest, json.dumps({"name": "h", "type": "DELAYED", "delaySeconds": 5,
                                                   "target": {"type": "HTTP", "url": "https://example.com/"},
                                                   "timeoutSec": 841})), NOW)
    assert problem(exc) == "timeoutSec"
    with pytest.raises(InvalidRequest) as exc:
        request(timeoutSec=86_401)
    assert problem(exc) == "timeoutSec"


def test_overrides_that_cannot_fit_even_by_reference_are_refused():
    big = {f"V{i}": "x" * 200 for i in range(45)}  # about 9,900 characters of environment
    with pytest.raises(InvalidRequest) as exc:
        to_spec(request(target={"environment": big}), NOW)
    assert problem(exc) == "target.environment"


def test_only_the_granted_task_definitions_and_clusters_are_accepted():
    scope = TargetScope("123456789012", (), task_definitions=("arn:aws:ecs:*:123456789012:task-definition/report:*",),
                        clusters=("arn:aws:ecs:us-east-1:123456789012:cluster/jobs",))
    own = OwnResources(scope=scope)
    assert to_spec(request(), NOW, own).target is not None
    other = "arn:aws:ecs:us-east-1:123456789012:task-definition/admin:1"
    with pytest.raises(UnprocessableRequest) as exc:
        to_spec(request(target={"taskDefinition": other}), NOW, own)
    assert problem(exc) == "target.taskDefinition"
    with pytest.raises(UnprocessableRequest) as exc:
        to_spec(request(target={"cluster": "prod"}), NOW, own)
    assert problem(exc) == "target.cluster"
    nothing = OwnResources(scope=TargetScope("123456789012", (), task_definitions=(), clusters=()))
    with pytest.raises(UnprocessableRequest):  # by default a deployment grants none
        to_spec(request(), NOW, nothing)


def test_client_token_is_per_attempt_and_within_64_characters():
    first, again, second = (tasks.client_token("job_a.0000000000001", 1), tasks.client_token("job_a.0000000000001", 1),
                            tasks.client_token("job_a.0000000000001", 2))
    assert first == again != second
    assert len(first) <= tasks.CLIENT_TOKEN_CHARS and first.isascii()
    # A held-back call is a new request: ECS would answer a repeated token with its first answer
    held, held_again, held_twice = (tasks.client_token("job_a.0000000000001", 1, holds=n) for n in (1, 1, 2))
    assert held == held_again and len({first, held, held_twice}) == 3 and tasks.client_token(
        "job_a.0000000000001", 1, holds=0) == first
    started = tasks.started_by("job_a.0000000000001" + ".step.x" * 20)
    assert len(started) <= tasks.STARTED_BY_CHARS and started.replace("-", "").isalnum()


def test_payload_rides_inline_when_it_fits_and_by_reference_when_not():
    config = TARGET
    small = tasks.container_overrides(config, "job_a", "job_a.0000000000001", 2, {"n": 1})
    [container] = small["containerOverrides"]
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert env["JOBSCHED_EXECUTION_ID"] == "job_a.0000000000001" and env["JOBSCHED_ATTEMPT"] == "2"
    assert json.loads(env["JOBSCHED_PAYLOAD"]) == {"n": 1} and env["MODE"] == "full"
    assert container["command"] == ["python3", "-c", "print(1)"] and container["name"] == "main"
    large = tasks.container_overrides(config, "job_a", "job_a.0000000000001", 1, {"blob": "x" * 9000})
    env = {e["name"]: e["value"] for e in large["containerOverrides"][0]["environment"]}
    assert "JOBSCHED_PAYLOAD" not in env and env["JOBSCHED_PAYLOAD_REF"] == "/v1/jobs/job_a"
    assert tasks.overrides_chars(large) <= tasks.MAX_OVERRIDES_CHARS


def test_a_stopped_task_is_judged_by_its_containers_exit_code_or_its_reason():
    def event(exit_code=None, reason="Essential container in task exited", stop_code="EssentialContainerExited"):
        container = {"name": "main", **({"exitCode": exit_code} if exit_code is not None else {})}
        return {"taskArn": "arn:aws:ecs:us-east-1:123456789012:task/jobs/abc", "lastStatus": "STOPPED",
                "stoppedReason": reason, "stopCode": stop_code, "containers": [{"name": "sidecar", "exitCode": 0},
                                                                               container],
                "tags": [{"key": "jobsched:executionId", "value": "job_a.1"}, {"key": "jobsched:attempt", "value": "3"}]}
    ok = tasks.task_end_of(event(0), "main")
    assert ok.succeeded and ok.error() is None and (ok.execution_id, ok.attempt) == ("job_a.1", 3)
    failed = tasks.task_end_of(event(2), "main")
    assert not failed.succeeded and "exited with code 2" in failed.error()
    unplaced = tasks.task_end_of(event(None, "CannotPullContainerError: no such image", "TaskFailedToStart"), "main")
    assert unplaced.exit_code is None and "failed to start" in unplaced.error() and "CannotPull" in unplaced.error()


def test_the_task_events_function_takes_only_stopped_task_events():
    from jobsched.handlers.task_events import stopped_detail

    detail = {"taskArn": "arn:aws:ecs:us-east-1:123456789012:task/jobs/abc", "lastStatus": "STOPPED"}
    event = {"source": "aws.ecs", "detail-type": "ECS Task State Change", "detail": detail}
    assert stopped_detail(event) is detail
    assert stopped_detail({**event, "detail": {**detail, "lastStatus": "RUNNING"}}) is None
    assert stopped_detail({**event, "source": "tenant.app"}) is None  # someone else's event on the bus
    assert stopped_detail({**event, "detail-type": "ECS Container Instance State Change"}) is None
    assert stopped_detail({**event, "detail": {"lastStatus": "STOPPED"}}) is None  # no task named
    assert stopped_detail("not an event") is None


def test_a_container_stopped_from_outside_that_exits_0_did_not_succeed():
    """StopTask, Fargate's retirement or a Spot interruption send SIGTERM; a container that exits 0
    on it did not finish its work."""
    def end(stop_code):
        return tasks.task_end_of({"taskArn": "arn:aws:ecs:us-east-1:123456789012:task/jobs/abc", "lastStatus": "STOPPED",
                                  "stoppedReason": "stopped", "stopCode": stop_code,
                                  "containers": [{"name": "main", "exitCode": 0}]}, "main")
    assert end("EssentialContainerExited").succeeded
    for stop_code in ("UserInitiated", "SpotInterruption", "TerminationNotice", "ServiceSchedulerInitiated"):
        assert not end(stop_code).succeeded and "exited with code 0" in end(stop_code).error()


def test_overrides_are_counted_as_sent_with_non_ascii_escaped():
    overrides = {"containerOverrides": [{"name": "main", "environment": [{"name": "P", "value": "é" * 10}]}]}
    assert tasks.overrides_chars(overrides) == len(json.dumps(overrides, separators=(",", ":")))
    assert tasks.overrides_chars(overrides) - tasks.overrides_chars({"containerOverrides": [
        {"name": "main", "environment": [{"name": "P", "value": ""}]}]}) == 60  # \u00e9: six characters each


def test_a_task_started_by_an_attempt_that_was_taken_over_is_stopped_unless_it_was_adopted():
    from types import SimpleNamespace

    from jobsched.domain.errors import ConditionLost
    from jobsched.service.container_tasks import ContainerTasks

    def started(recorded_task):
        stopped = []

        class Executions:
            def accept(self, *args):
                raise ConditionLost(what="attempt taken over")

            def get(self, job_id, execution_id):
                return SimpleNamespace(task=recorded_task)

        class Calls:
            def stop_task(self, job, task_arn, reason):
                stopped.append(task_arn)

        service = ContainerTasks(SimpleNamespace(jobs=None, executions=Executions()), outcomes=None,
                                 clock=SimpleNamespace(now_ms=lambda: 0), calls=Calls())
        job = SimpleNamespace(job_id="job_a", spec=SimpleNamespace(timeout_sec=60))
        dispatch = SimpleNamespace(execution_id="job_a.1")
        service.started(job, dispatch, 1, 0, {"cluster": "jobs", "taskArn": "arn:task/jobs/mine"})
        return stopped

    assert started(None) == ["arn:task/jobs/mine"]  # nobody's task: stopped
    assert started({"taskArn": "arn:task/jobs/other"}) == ["arn:task/jobs/mine"]
    assert started({"taskArn": "arn:task/jobs/mine"}) == []  # the takeover adopted it: it runs on


def test_payload_by_reference_never_puts_the_payload_in_the_overrides():
    # RunTask's overrides are recorded by CloudTrail and shown in task events: the reference form
    # keeps a small payload out of them too.
    config = {**TARGET, "payloadByReference": True}
    overrides = tasks.container_overrides(config, "job_a", "job_a.0000000000001", 1, {"secret": "s3cr3t"})
    env = {e["name"]: e["value"] for e in overrides["containerOverrides"][0]["environment"]}
    assert "JOBSCHED_PAYLOAD" not in env and env["JOBSCHED_PAYLOAD_REF"] == "/v1/jobs/job_a"
    assert "s3cr3t" not in json.dumps(overrides)
    assert to_spec(request(target={"payloadByReference": True}), NOW).target.config["payloadByReference"] is True
