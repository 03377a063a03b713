"""Long-running targets, cancellation, overlap policy, long backoffs, and AWS targets."""
import copy
import json

import pytest

from jobsched.domain.tenant_tags import TENANT_TAG_KEY
from jobsched.domain.trace import trace_context
from jobsched.local import strict_aws
from jobsched.settings import Env

from .harness import ACCEPTED, FAIL, TENANT_A, TIMEOUT

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def accepted_job(harness, **extra):
    job = harness.create_job({"name": "long", "type": "DELAYED", "delaySeconds": 30, "target": HOOK,
                              "heartbeatTimeoutSec": 60, **extra})
    harness.target.script[job["jobId"]] = [ACCEPTED]
    harness.advance(31)
    [call] = harness.target.calls_for(job["jobId"])
    return job, call.execution_id


def callback(harness, execution_id, action, body=None, token=None):
    token = token if token is not None else harness.target.tokens[execution_id]
    return harness.request("POST", f"/v1/executions/{execution_id}/{action}", body or {}, key=None,
                           headers={"X-Callback-Token": token})


def test_accepted_work_stays_running_under_heartbeats_then_completes(harness):
    job, execution_id = accepted_job(harness)
    assert harness.execution(execution_id)["status"] == "RUNNING"
    for minute in range(5):  # an hour-long job, heartbeating well inside its 60 s deadline
        harness.advance(45)
        status, answer = callback(harness, execution_id, "heartbeat", {"progress": {"step": minute}})
        assert status == 200 and answer["status"] == "RUNNING", answer
    assert harness.execution(execution_id)["progress"] == {"step": 4}
    status, done = callback(harness, execution_id, "complete", {"output": {"rows": 42}})
    assert status == 200 and done["status"] == "SUCCEEDED" and done["output"] == {"rows": 42}
    assert callback(harness, execution_id, "heartbeat")[0] == 401  # it has ended: no attempt holds the token
    harness.advance(120)
    assert len(harness.target.calls_for(job["jobId"])) == 1


def test_a_missed_heartbeat_deadline_is_lost_and_retried_with_the_last_progress(harness):
    job, execution_id = accepted_job(harness)
    harness.advance(30)
    callback(harness, execution_id, "heartbeat", {"progress": {"checkpoint": 7}})
    old_token = harness.target.tokens[execution_id]
    harness.advance(200)  # silence: the LEASE timer finds the deadline passed
    execution = harness.execution(execution_id)
    assert [a["status"] for a in execution["attempts"]][:1] == ["LOST"]
    assert harness.target.progress_seen[-1] == {"checkpoint": 7}  # handed to the next attempt
    assert execution["status"] == "SUCCEEDED" and execution["attempt"] == 2
    # the lost attempt's token no longer works
    assert callback(harness, execution_id, "complete", token=old_token)[0] == 401


def test_callbacks_need_the_attempts_own_token(harness):
    _, execution_id = accepted_job(harness)
    assert callback(harness, execution_id, "heartbeat", token="forged")[0] == 401
    assert harness.request("POST", f"/v1/executions/{execution_id}/heartbeat", {}, key=None)[0] == 401
    assert callback(harness, "job_nope.1", "heartbeat", token="x")[0] == 401


def test_callbacks_tell_an_unknown_execution_and_a_wrong_token_apart_in_no_way(harness):
    _, execution_id = accepted_job(harness)
    answers = [callback(harness, eid, action, token="forged")
               for eid in (execution_id, "job_nope.0000000000001", "not-an-id")
               for action in ("heartbeat", "complete", "fail")]
    assert {status for status, _ in answers} == {401}
    assert len({json.dumps(body, sort_keys=True) for _, body in answers}) == 1


def test_fail_callback_retries_per_policy(harness):
    job, execution_id = accepted_job(harness, retryPolicy={"maxAttempts": 2, "initialDelayMs": 2000})
    status, failed = callback(harness, execution_id, "fail", {"error": "disk full"})
    assert status == 200 and failed["status"] == "FAILED" and failed["error"] == "disk full"
    harness.advance(5)
    assert harness.execution(execution_id)["status"] == "SUCCEEDED"


def test_cancel_a_running_long_job_ends_at_its_next_heartbeat(harness):
    job, execution_id = accepted_job(harness)
    status, answer = harness.request("POST", f"/v1/executions/{execution_id}/cancel")
    assert status == 202 and answer["status"] == "RUNNING" and answer["cancelRequested"] is True
    assert harness.request("POST", f"/v1/executions/{execution_id}/cancel")[0] == 202  # repeat is safe
    status, beat = callback(harness, execution_id, "heartbeat", {"progress": {"x": 1}})
    assert status == 200 and beat["status"] == "CANCELLED"
    execution = harness.execution(execution_id)
    assert execution["status"] == "CANCELLED" and execution["attempts"][-1]["status"] == "CANCELLED"
    harness.advance(300)
    assert len(harness.target.calls_for(job["jobId"])) == 1  # not retried


def test_cancel_a_waiting_retry_means_it_never_runs_again(harness):
    job = harness.create_job({"name": "w", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 3, "initialDelayMs": 60000}})
    harness.target.script[job["jobId"]] = [FAIL]
    harness.advance(12)
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "FAILED" and execution["nextAttemptAt"]
    status, cancelled = harness.request("POST", f"/v1/executions/{execution['executionId']}/cancel")
    assert status == 202 and cancelled["status"] == "CANCELLED"
    harness.advance(120)
    assert len(harness.target.calls_for(job["jobId"])) == 1
    assert harness.request("POST", f"/v1/executions/{execution['executionId']}/redrive")[0] == 409


def test_cancel_a_triggered_execution_before_it_starts(harness):
    job = harness.create_job({"name": "t", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    _, pending = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    status, cancelled = harness.request("POST", f"/v1/executions/{pending['executionId']}/cancel")
    assert status == 202 and cancelled["status"] == "CANCELLED"
    harness.advance(3)
    assert harness.target.calls_for(job["jobId"]) == []


def test_cancel_a_finished_execution_answers_409(harness):
    job = harness.create_job({"name": "f", "type": "DELAYED", "delaySeconds": 5, "target": HOOK})
    harness.advance(7)
    [execution] = harness.executions_of(job["jobId"])
    status, answer = harness.request("POST", f"/v1/executions/{execution['executionId']}/cancel")
    assert status == 409 and "SUCCEEDED" in answer["error"]["message"]


def test_overlap_skip_records_the_occurrence_while_the_previous_run_goes_on(harness):
    job = harness.create_job({"name": "o", "type": "RATE", "schedule": "PT20S", "target": HOOK,
                              "overlapPolicy": "SKIP", "heartbeatTimeoutSec": 600})
    harness.target.script[job["jobId"]] = [ACCEPTED]
    harness.advance(65)  # 3 occurrences; the first is still running
    statuses = [e["status"] for e in reversed(harness.executions_of(job["jobId"]))]
    assert statuses == ["RUNNING", "SKIPPED", "SKIPPED"]
    assert len(harness.target.calls_for(job["jobId"])) == 1


def test_overlap_skip_holds_past_many_skipped_occurrences(harness):
    """The check passes over the SKIPPED records a long run leaves behind (it once read only the
    newest five executions, so the seventh occurrence overlapped)."""
    job = harness.create_job({"name": "o", "type": "RATE", "schedule": "PT10S", "target": HOOK,
                              "overlapPolicy": "SKIP", "heartbeatTimeoutSec": 600})
    harness.target.script[job["jobId"]] = [ACCEPTED]
    harness.advance(125)  # 12 occurrences while the first runs
    statuses = [e["status"] for e in reversed(harness.executions_of(job["jobId"]))]
    assert statuses[0] == "RUNNING" and statuses[1:] == ["SKIPPED"] * (len(statuses) - 1) and len(statuses) >= 12
    assert len(harness.target.calls_for(job["jobId"])) == 1


def test_overlap_allow_runs_concurrently(harness):
    job = harness.create_job({"name": "o", "type": "RATE", "schedule": "PT20S", "target": HOOK,
                              "heartbeatTimeoutSec": 600})
    harness.target.script[job["jobId"]] = [ACCEPTED]
    harness.advance(65)
    assert len(harness.target.calls_for(job["jobId"])) == 3


def test_a_backoff_beyond_15_minutes_rides_a_retry_timer(harness):
    job = harness.create_job({"name": "slow", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 2, "backoff": "FIXED", "initialDelayMs": 1_800_000,
                                              "maxDelayMs": 1_800_000}})
    harness.target.script[job["jobId"]] = [TIMEOUT]
    harness.advance(12)
    [execution] = harness.executions_of(job["jobId"])
    timers = harness.stores.timers._table.scan()["Items"]
    assert any(t["kind"] == "RETRY" for t in timers)
    harness.advance(1800, step_ms=10_000)
    calls = harness.target.calls_for(job["jobId"])
    assert [c.attempt for c in calls] == [1, 2]
    assert 900_000 <= calls[1].at_ms - calls[0].at_ms <= 1_830_000
    assert harness.execution(execution["executionId"])["status"] == "SUCCEEDED"


def test_a_retry_of_a_job_changed_meanwhile_ends_cancelled(harness):
    job = harness.create_job({"name": "c", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 3, "initialDelayMs": 20000}})
    harness.target.script[job["jobId"]] = [FAIL]
    harness.advance(12)
    harness.request("DELETE", f"/v1/jobs/{job['jobId']}")
    harness.advance(30)
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "CANCELLED"


# --- AWS targets on the emulator, with the real invoker ------------------------------------
@pytest.fixture
def real_targets(harness):
    from jobsched.adapters.http_target import HttpTargetInvoker
    from jobsched.adapters.targets import TargetRouter
    from jobsched.local.events import Function
    from jobsched.handlers import worker
    from jobsched.settings import Env
    from jobsched.store.targets import AwsTargetInvoker, TenantSessions

    # As the worker builds it: AWS targets are called in the tenant's session of the targets role.
    harness.tenant_sessions = TenantSessions(harness.session, harness.envs["worker"][Env.TARGETS_ROLE_ARN],
                                             harness.clock.now_ms)
    router = TargetRouter(HttpTargetInvoker(allow_private=True),
                          AwsTargetInvoker(harness.session, harness.tenant_sessions))
    harness.worker = Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                            router))
    harness.poller._worker = harness.worker
    return harness


def test_sqs_sns_and_eventbridge_targets_receive_the_execution_id(real_targets):
    harness = real_targets
    sqs, sns, events = harness.sqs, harness.session.client("sns"), harness.session.client("events")
    # The tenant's resources carry its tag: IAM lets its session reach them (and no other tenant's).
    granted = {TENANT_TAG_KEY: TENANT_A}
    inbox = sqs.create_queue(QueueName="tenant-inbox", tags=granted)["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topic = sns.create_topic(Name="tenant-topic", Tags=[{"Key": TENANT_TAG_KEY, "Value": TENANT_A}])["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn, Attributes={"RawMessageDelivery": "true"})
    events.create_event_bus(Name="tenant-bus", Tags=[{"Key": TENANT_TAG_KEY, "Value": TENANT_A}])
    events.put_rule(Name="all", EventBusName="tenant-bus", EventPattern=json.dumps({"source": ["tenant.app"]}))
    events.put_targets(Rule="all", EventBusName="tenant-bus", Targets=[{"Id": "q", "Arn": inbox_arn}])
    targets = [{"type": "SQS", "queueUrl": inbox}, {"type": "SNS", "topicArn": topic},
               {"type": "EVENTBRIDGE", "eventBusName": "tenant-bus", "source": "tenant.app", "detailType": "tick"}]
    jobs = [harness.create_job({"name": t["type"], "type": "DELAYED", "delaySeconds": 5, "target": t,
                                "payload": {"kind": t["type"]}}) for t in targets]
    harness.advance(8)
    received = sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    assert len(received) == 3
    bodies = [json.loads(m["Body"]) for m in received]
    direct = [m for m in received if "executionId" in m.get("MessageAttributes", {})]
    assert {m["MessageAttributes"]["executionId"]["StringValue"].split(".")[0] for m in direct} >= {
        jobs[0]["jobId"]}
    event = next(b for b in bodies if b.get("source") == "tenant.app")
    assert event["detail"]["executionId"].startswith(jobs[2]["jobId"]) and event["detail"]["attempt"] == 1
    assert event["detail"]["payload"] == {"kind": "EVENTBRIDGE"}
    for job in jobs:
        assert [e["status"] for e in harness.executions_of(job["jobId"])] == ["SUCCEEDED"]
    # and each call carries its execution's W3C trace context, which the execution names
    for message in direct:  # the SQS target's and the SNS target's (raw delivery keeps attributes)
        attributes = message["MessageAttributes"]
        execution_id = attributes["executionId"]["StringValue"]
        assert attributes["traceparent"]["StringValue"] == trace_context(execution_id, 1).traceparent
        assert harness.execution(execution_id)["traceId"] == trace_context(execution_id, 1).trace_id
    assert len(direct) == 2


def test_an_aws_target_that_does_not_exist_fails_and_retries(real_targets):
    # A topic IAM allows (no tag condition: an operator's targetArnPatterns grant, given here to
    # the targets role) that does not exist: the call fails with NotFound, which is retried.
    harness = real_targets
    role = harness.envs["worker"][Env.TARGETS_ROLE_ARN]
    template = copy.copy(harness.strict.template)  # this test's layer only: the parsed template is shared
    template.role_policies = {**template.role_policies, role: [*template.role_policies[role], strict_aws._statement(
        {"Effect": "Allow", "Action": "sns:Publish", "Resource": "arn:aws:sns:*:*:nope"}, str)]}
    harness.strict.template = template
    job = harness.create_job({"name": "gone", "type": "DELAYED", "delaySeconds": 5,
                              "target": {"type": "SNS", "topicArn": "arn:aws:sns:us-east-1:123456789012:nope"},
                              "retryPolicy": {"maxAttempts": 2, "initialDelayMs": 1000}})
    harness.advance(10)
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "DEAD" and "NotFound" in execution["error"] and execution["attempt"] == 2


def test_a_rejected_request_ends_dead_at_once_and_a_throttled_one_waits_as_asked(harness):
    from jobsched.domain.executions import AttemptOutcome, ExecutionStatus

    hook = {"type": "HTTP", "url": "http://127.0.0.1:9/h"}
    policy = {"maxAttempts": 5, "initialDelayMs": 1000, "maxDelayMs": 60_000}
    rejected = harness.create_job({"name": "bad", "type": "DELAYED", "delaySeconds": 70, "target": hook,
                                   "retryPolicy": policy})
    throttled = harness.create_job({"name": "busy", "type": "DELAYED", "delaySeconds": 70, "target": hook,
                                    "retryPolicy": policy})
    harness.target.script[rejected["jobId"]] = [
        AttemptOutcome(False, ExecutionStatus.FAILED, "HTTP 400: bad field", retryable=False)]
    harness.target.script[throttled["jobId"]] = [
        AttemptOutcome(False, ExecutionStatus.FAILED, "HTTP 429: slow down", retry_after_ms=3_600_000)]
    harness.advance(100)
    [dead] = harness.executions_of(rejected["jobId"])
    assert (dead["status"], dead["attempt"]) == ("DEAD", 1)  # not retried
    [waiting] = harness.executions_of(throttled["jobId"])
    assert waiting["status"] == "FAILED"
    from jobsched.domain.schedule import parse_instant

    finished = parse_instant(waiting["attempts"][0]["finishedAt"], "finishedAt")
    assert parse_instant(waiting["nextAttemptAt"], "nextAttemptAt") - finished == 60_000  # asked 1 h, bounded
    harness.advance(90)
    assert [e["status"] for e in harness.executions_of(throttled["jobId"])] == ["SUCCEEDED"]
