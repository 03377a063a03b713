"""Completion hooks: onSuccess / onFailure called once per execution (a run counts as one) with
its summary, also when every message is delivered twice."""
from jobsched.handlers import worker
from jobsched.local.events import Function, sqs_event

from .harness import FAIL
from .test_faults import take_messages

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/work"}
ON_SUCCESS = {"type": "HTTP", "url": "http://127.0.0.1:9/succeeded"}
ON_FAILURE = {"type": "HTTP", "url": "http://127.0.0.1:9/failed"}
ARN = "arn:aws:sqs:us-east-1:123456789012:lane"


def hook_calls(harness, job_id):
    return [c for c in harness.target.calls_for(job_id) if ".hook." in c.execution_id]


def test_on_success_and_on_failure_are_called_once_with_the_summary(harness):
    good = harness.create_job({"name": "good", "type": "DELAYED", "delaySeconds": 70, "target": HOOK,
                               "onSuccess": ON_SUCCESS, "onFailure": ON_FAILURE})
    bad = harness.create_job({"name": "bad", "type": "DELAYED", "delaySeconds": 70, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 1}, "onSuccess": ON_SUCCESS, "onFailure": ON_FAILURE})
    assert good["onSuccess"] == {**ON_SUCCESS, "method": "POST", "headers": {}}
    harness.target.script[bad["jobId"]] = [FAIL]
    harness.advance(200)
    [ran] = harness.executions_of(good["jobId"])  # the history lists the execution, not its hook
    [call] = hook_calls(harness, good["jobId"])
    assert call.execution_id == ran["executionId"] + ".hook.success"
    assert call.payload["status"] == "SUCCEEDED" and call.payload["executionId"] == ran["executionId"]
    assert call.payload["event"] == "execution.succeeded" and call.payload["output"] == {"ok": True}
    [dead] = harness.executions_of(bad["jobId"])
    [failure] = [c for c in hook_calls(harness, bad["jobId"])]
    assert failure.execution_id == dead["executionId"] + ".hook.failure"
    assert failure.payload["status"] == "DEAD" and "503" in failure.payload["error"]
    hook = harness.execution(call.execution_id)
    assert hook["status"] == "SUCCEEDED"  # the hook's call is an execution of its own


def test_a_hook_is_called_once_when_every_message_is_delivered_twice(harness):
    job = harness.create_job({"name": "twice", "type": "CRON", "schedule": "0 3 * * *", "target": HOOK,
                              "onSuccess": ON_SUCCESS})
    flow = harness.create_job({"name": "flow", "type": "CRON", "schedule": "0 3 * * *", "onSuccess": ON_SUCCESS,
                               "steps": [{"name": "a", "target": HOOK}, {"name": "b", "target": HOOK,
                                                                        "dependsOn": ["a"]}]})
    for j in (job, flow):
        assert harness.request("POST", f"/v1/jobs/{j['jobId']}/trigger")[0] == 202
    fn = Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                harness.target))
    for _ in range(20):
        messages = take_messages(harness)
        if not messages:
            break
        for message in messages:
            fn.invoke(sqs_event([message], ARN))
            fn.invoke(sqs_event([message], ARN))
    for j in (job, flow):
        hooks = hook_calls(harness, j["jobId"])
        assert len(hooks) == 1 and hooks[0].payload["status"] == "SUCCEEDED", hooks  # one per execution / run
        assert harness.target.effects_per_execution(j["jobId"])[hooks[0].execution_id] == 1


def test_a_worker_dying_after_the_end_is_recorded_still_calls_the_hook_once(harness, monkeypatch):
    from jobsched.service.outcomes import Outcomes

    from .harness import WorkerDied

    job = harness.create_job({"name": "crash", "type": "DELAYED", "delaySeconds": 70, "target": HOOK,
                              "onSuccess": ON_SUCCESS})
    original = Outcomes.send_hook
    died = []

    def die_once(self, job_, execution_id, status):
        if not died:
            died.append(execution_id)
            raise WorkerDied("the worker died after the execution's end was recorded, before its hook was sent")
        return original(self, job_, execution_id, status)

    monkeypatch.setattr(Outcomes, "send_hook", die_once)
    harness.advance(200)  # the message comes back after its visibility timeout
    harness.advance(600, step_ms=30_000)
    assert died and len(hook_calls(harness, job["jobId"])) == 1
