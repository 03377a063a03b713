"""Every execution ends: none is left PENDING forever, whatever happens between its record and
its message (a stale message of any kind, an API that dies between the record and the send)."""
import pytest

from jobsched.domain.executions import DispatchKind
from jobsched.store import queues

from .harness import FAIL

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


@pytest.fixture
def lost_sends(monkeypatch):
    """The API process dies after writing the PENDING record, before its send (the next N
    sends of the given kinds raise, as a crash there would leave them unsent)."""
    state = {"kinds": set(), "left": 0, "lost": 0}
    real = queues.LaneQueues.send

    def send(self, outgoing, **kwargs):
        if state["left"] and any(o.dispatch.kind in state["kinds"] for o in outgoing):
            state["left"] -= 1
            state["lost"] += 1
            raise RuntimeError("the API process died before its send")
        return real(self, outgoing, **kwargs)

    monkeypatch.setattr(queues.LaneQueues, "send", send)

    def arm(kinds, count=1):
        state["kinds"], state["left"] = set(kinds), count
        return state

    return arm


def test_a_trigger_followed_at_once_by_a_delete_ends_cancelled(harness):
    job = harness.create_job({"name": "t", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    status, execution = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    assert status == 202 and execution["status"] == "PENDING"
    assert harness.request("DELETE", f"/v1/jobs/{job['jobId']}")[0] == 200
    harness.advance(2)
    assert harness.execution(execution["executionId"])["status"] == "CANCELLED"
    assert harness.target.calls_for(job["jobId"]) == []


def test_a_trigger_whose_send_was_lost_is_run_by_its_sweep_once(harness, lost_sends):
    job = harness.create_job({"name": "t", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    state = lost_sends({DispatchKind.MANUAL})
    status, answer = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger", headers={"Idempotency-Key": "k"})
    assert status == 500 and state["lost"] == 1
    # the client's retry with the same key sees the recorded execution, still PENDING
    status, execution = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger", headers={"Idempotency-Key": "k"})
    assert status == 202 and execution["status"] == "PENDING"
    harness.advance(60)
    assert harness.execution(execution["executionId"])["status"] == "PENDING"  # no message yet
    harness.advance(5 * 60)
    done = harness.execution(execution["executionId"])
    assert done["status"] == "SUCCEEDED", done
    assert [c.execution_id for c in harness.target.calls_for(job["jobId"])] == [execution["executionId"]]


def test_a_sweep_after_a_normal_trigger_runs_nothing_more(harness):
    job = harness.create_job({"name": "t", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    _, execution = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    harness.advance(7 * 60)
    assert harness.execution(execution["executionId"])["status"] == "SUCCEEDED"
    assert [c.execution_id for c in harness.target.calls_for(job["jobId"])] == [execution["executionId"]]


def test_a_redrive_whose_send_was_lost_is_run_by_its_sweep(harness, lost_sends):
    job = harness.create_job({"name": "d", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 1, "initialDelayMs": 1000}})
    harness.target.script[job["jobId"]] = [FAIL]
    harness.advance(30)
    dead = harness.request("GET", "/v1/dead-letters")[1]["items"][0]
    lost_sends({DispatchKind.RETRY})
    status, _ = harness.request("POST", f"/v1/executions/{dead['executionId']}/redrive")
    assert status == 500
    assert harness.execution(dead["executionId"])["status"] == "PENDING"
    assert harness.request("POST", f"/v1/executions/{dead['executionId']}/redrive")[0] == 409
    harness.advance(6 * 60)
    done = harness.execution(dead["executionId"])
    assert done["status"] == "SUCCEEDED" and done["attempt"] == 2, done
    assert len(harness.target.calls_for(job["jobId"])) == 2


def test_a_lost_trigger_of_a_job_deleted_meanwhile_ends_cancelled(harness, lost_sends):
    job = harness.create_job({"name": "t", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    lost_sends({DispatchKind.MANUAL})
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")[0] == 500
    execution = harness.executions_of(job["jobId"])[0]
    assert harness.request("DELETE", f"/v1/jobs/{job['jobId']}")[0] == 200
    harness.advance(6 * 60)
    assert harness.execution(execution["executionId"])["status"] == "CANCELLED"
    assert harness.target.calls_for(job["jobId"]) == []
