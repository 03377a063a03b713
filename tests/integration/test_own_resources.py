"""No tenant reaches the scheduler's insides: its own queues, topics and functions are never a
target, and a lane message the scheduler did not seal is never run."""
import pytest

from jobsched.domain.executions import Dispatch, DispatchKind, execution_id_for
from jobsched.local.stack import STACK_NAME

from .harness import KEY_B

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def body_with(target):
    return {"name": "t", "type": "RATE", "schedule": "PT1M", "target": target}


def test_the_scheduler_lanes_cannot_be_a_target(harness):
    for url in harness.lane_urls:
        status, answer = harness.request("POST", "/v1/jobs", body_with({"type": "SQS", "queueUrl": url}), key=KEY_B)
        assert status == 422 and answer["error"]["details"][0]["field"] == "target.queueUrl", answer


@pytest.mark.parametrize("target", [
    {"type": "SQS", "queueUrl": f"https://sqs.us-east-1.amazonaws.com/123456789012/{STACK_NAME}-LanesHighDlq-X1"},
    {"type": "LAMBDA", "functionArn": f"arn:aws:lambda:us-east-1:123456789012:function:{STACK_NAME}-Worker-Ab"},
    {"type": "SNS", "topicArn": f"arn:aws:sns:us-east-1:123456789012:{STACK_NAME}-AlarmsTopic-Q"},
    # Lambda takes partial ARNs and bare names for the same function.
    {"type": "LAMBDA", "functionArn": f"123456789012:function:{STACK_NAME}-Api-Ab"},
    {"type": "LAMBDA", "functionArn": f"{STACK_NAME}-Api-Ab"},
    {"type": "LAMBDA", "functionArn": f"{STACK_NAME}-Api-Ab:live"},
])
def test_no_resource_of_the_stack_can_be_a_target(harness, target):
    status, answer = harness.request("POST", "/v1/jobs", body_with(target), key=KEY_B)
    assert status == 422, answer
    status, _ = harness.request("POST", "/v1/jobs", body_with({**target, **{k: v.replace(STACK_NAME, "Mine")
                                                                             for k, v in target.items()
                                                                             if k != "type"}}), key=KEY_B)
    assert status == 201  # the tenant's own resources are fine


def test_a_forged_dispatch_on_a_lane_never_runs_another_tenants_job(harness):
    # Given tenant A's job, and a message naming it put on a lane by someone else (as a tenant's
    # SQS target aimed at the lane would), in the shape of a dispatch, with and without a seal
    victim = harness.create_job({"name": "victim", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    job = harness.stores.jobs.get("tenant-a", victim["jobId"], consistent=True)
    due = harness.clock.now_ms()
    forged = Dispatch(DispatchKind.MANUAL, "tenant-a", victim["jobId"], execution_id_for(victim["jobId"], due) + ".x",
                      due, job.generation)
    lane = harness.lane_urls[1]
    harness.sqs.send_message(QueueUrl=lane, MessageBody=forged.to_json())
    harness.sqs.send_message(QueueUrl=lane, MessageBody='{"d": %s, "mac": "%s"}' % (
        __import__("json").dumps(forged.to_json()), "0" * 64))
    # When the worker receives them
    harness.deliver()
    # Then neither ran the job, and both are gone from the lane (dropped, not retried)
    assert harness.target.calls_for(victim["jobId"]) == []
    assert harness.queue_depth() == 0
