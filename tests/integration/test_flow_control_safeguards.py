"""Flow-control safeguards a mutation pass found untested (issue 26): a delivery that loses its
claim gives back the slot it took, and a long-running attempt (accepted, then heartbeating) keeps
its slot past the lease of its call, so the limit holds while long jobs run."""
from jobsched.handlers import worker
from jobsched.local.events import Function, sqs_event

from .harness import ACCEPTED, TENANT_A
from .test_faults import take_messages

ARN = "arn:aws:sqs:us-east-1:123456789012:lane"
KEY = "one-at-a-time"


def one_at_a_time(harness, name, **extra):
    return harness.create_job({"name": name, "type": "CRON", "schedule": "0 3 * * *",
                               "target": {"type": "HTTP", "url": "http://127.0.0.1:9/x"}, "timeoutSec": 5,
                               "flowControl": {"key": KEY, "maxConcurrency": 1}, **extra})


def trigger(harness, job):
    status, execution = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    assert status == 202, execution
    return execution["executionId"]


def held(harness):
    return harness.stores.flow.held(TENANT_A, KEY, 0)  # maxConcurrency 1: a single slot item


def test_a_delivery_that_loses_its_claim_gives_back_the_slot_it_took(harness):
    # Given an execution that ran and gave its slot back
    first, second = one_at_a_time(harness, "first"), one_at_a_time(harness, "second")
    trigger(harness, first)
    message = take_messages(harness)
    fn = Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                harness.target))
    fn.invoke(sqs_event(message, ARN))
    assert harness.executions_of(first["jobId"])[0]["status"] == "SUCCEEDED" and held(harness) == {}
    # When its message is delivered again (it takes the free slot, then loses its claim)
    fn.invoke(sqs_event(message, ARN))
    # Then the slot is free again, and another execution of the key starts at once
    assert held(harness) == {}
    trigger(harness, second)
    harness.deliver()
    [ran] = harness.executions_of(second["jobId"])
    assert (ran["status"], ran["throttledMs"]) == ("SUCCEEDED", None), ran


def start_long_running(harness, **extra):
    """An execution whose target accepts the call and reports back later (timeoutSec 5: the
    call's own lease ends 65 s after it starts)."""
    long_job = one_at_a_time(harness, "long", **extra)
    harness.target.script[long_job["jobId"]] = [ACCEPTED]
    execution_id = trigger(harness, long_job)
    harness.deliver()
    assert harness.execution(execution_id)["status"] == "RUNNING"
    assert list(held(harness)) == [execution_id]
    return execution_id


def test_an_accepted_attempt_keeps_its_slot_past_its_calls_lease(harness):
    # Given a long-running attempt that holds the only slot, within its heartbeat deadline (600 s)
    long_id = start_long_running(harness, heartbeatTimeoutSec=600)
    harness.advance(120, step_ms=5000)  # the call's lease (5 s + 60 s) has passed
    # When another execution of the key comes
    other = one_at_a_time(harness, "other")
    trigger(harness, other)
    harness.advance(30)
    # Then it waits: the slot is still the long attempt's
    assert harness.executions_of(other["jobId"])[0]["status"] == "PENDING"
    assert list(held(harness)) == [long_id] and harness.target.calls_for(other["jobId"]) == []


def test_a_heartbeat_extends_the_slot_of_a_long_running_attempt(harness):
    # Given a long-running attempt (heartbeat deadline 300 s: its slot's lease ends 360 s after the
    # call) that heartbeats at 200 s (deadline 500 s)
    long_id = start_long_running(harness)
    harness.advance(200, step_ms=5000)
    token = {"X-Callback-Token": harness.target.tokens[long_id]}
    status, beat = harness.request("POST", f"/v1/executions/{long_id}/heartbeat", {"progress": None}, key=None,
                                   headers=token)
    assert status == 200 and beat["status"] == "RUNNING", beat
    harness.advance(200, step_ms=5000)  # 400 s: past the first lease, within the new deadline
    # When another execution of the key comes
    other = one_at_a_time(harness, "other")
    trigger(harness, other)
    harness.advance(30)
    # Then it waits: the heartbeat kept the slot the long attempt's
    assert harness.execution(long_id)["status"] == "RUNNING"
    assert harness.executions_of(other["jobId"])[0]["status"] == "PENDING"
    assert list(held(harness)) == [long_id] and harness.target.calls_for(other["jobId"]) == []
