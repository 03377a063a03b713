"""Workflow safeguards a mutation pass found untested (issue 26): a failure reaches every step
below it, a redrive that is reopening a run keeps it open, an interrupted redrive re-sends what it
reopened, a run's cancel stops steps waiting for a retry, a cancelled job's steps never run."""
from jobsched.domain.executions import Dispatch, DispatchKind, scheduled_ms_of
from jobsched.domain.steps import step_execution_id
from jobsched.handlers import worker
from jobsched.local.events import Function, sqs_event
from jobsched.service.runs import Runs
from jobsched.store.queues import LaneQueues, Outgoing

from .harness import FAIL, TENANT_A, WorkerDied
from .test_faults import take_messages
from .test_workflows import ARN, HOOK, create_flow, dead_b, effects_by_step, the_run


def statuses(run):
    return {s["name"]: s["status"] for s in run["steps"]}


def test_a_dead_step_fails_its_grandchildren_too_and_the_run_ends(harness):
    # Given a chain A → B → C whose A fails for good
    harness.target.step_script["A"] = [FAIL]
    job = create_flow(harness, steps=[{"name": "A", "target": HOOK, "retryPolicy": {"maxAttempts": 1}},
                                      {"name": "B", "target": HOOK, "dependsOn": ["A"]},
                                      {"name": "C", "target": HOOK, "dependsOn": ["B"]}])
    # When it runs
    harness.advance(200)
    # Then every step below A, not only its child, never runs, and the run ends DEAD
    run = the_run(harness, job)
    assert statuses(run) == {"A": "DEAD", "B": "UPSTREAM_FAILED", "C": "UPSTREAM_FAILED"}
    assert run["status"] == "DEAD", run
    assert effects_by_step(harness, job) == {}


def send_again(harness, job, step_id):
    """What SQS may do at any time: deliver a step's message once more."""
    stored = harness.stores.jobs.get(TENANT_A, job["jobId"])
    run_id = step_id.rsplit(".step.", 1)[0]
    harness.stores.lanes.send([Outgoing(stored.spec.priority, Dispatch(
        DispatchKind.STEP, TENANT_A, job["jobId"], step_id, scheduled_ms_of(run_id), stored.generation), 0)])


def test_a_step_delivered_again_while_a_redrive_reopens_the_run_does_not_end_it(harness, monkeypatch):
    # Given a DEAD run whose redrive died after reopening the run, before reopening its steps
    job, run = dead_b(harness, c_ends_last=True)
    original = Runs.complete_redrive

    def die(self, job_, run_):
        raise WorkerDied("the API died after reopening the run, before reopening its steps")

    monkeypatch.setattr(Runs, "complete_redrive", die)
    assert harness.request("POST", f"/v1/executions/{run['executionId']}/redrive")[0] == 500
    monkeypatch.setattr(Runs, "complete_redrive", original)
    # When a step's message that ended long ago is delivered again (its end is looked at again)
    send_again(harness, job, step_execution_id(run["executionId"], "C"))
    harness.deliver()
    # Then the run stays open for its redrive (every step has ended, but the redrive is not done)
    assert harness.execution(run["executionId"])["status"] == "RUNNING"
    # And the redrive's sweep completes it
    harness.advance(240)
    run = the_run(harness, job)
    assert run["status"] == "SUCCEEDED", run
    assert effects_by_step(harness, job) == {"A": 1, "B": 1, "C": 1, "D": 1}


def test_a_redrive_interrupted_before_its_send_is_sent_by_its_sweep(harness, monkeypatch):
    # Given a DEAD run whose redrive died after reopening its steps, before sending them
    job, run = dead_b(harness, c_ends_last=True)
    original = LaneQueues.send
    died = []

    def die_on_the_redrives_send(self, outgoing, **kwargs):
        if not died and any(o.dispatch.kind is DispatchKind.RETRY for o in outgoing):
            died.append(outgoing)
            raise WorkerDied("the API died after reopening the steps, before sending them")
        return original(self, outgoing, **kwargs)

    monkeypatch.setattr(LaneQueues, "send", die_on_the_redrives_send)
    assert harness.request("POST", f"/v1/executions/{run['executionId']}/redrive")[0] == 500
    assert died
    reopened = harness.execution(run["executionId"])
    assert (reopened["status"], statuses(reopened)["B"]) == ("RUNNING", "PENDING")
    # When its sweep comes
    harness.advance(240)
    # Then the reopened step (PENDING, after an attempt) is sent and the run ends
    run = the_run(harness, job)
    assert run["status"] == "SUCCEEDED", run
    assert {s["name"]: s["attempt"] for s in run["steps"]}["B"] == 2
    assert effects_by_step(harness, job) == {"A": 1, "B": 1, "C": 1, "D": 1}


def test_cancelling_a_run_cancels_a_step_waiting_for_its_retry(harness):
    # Given a run whose B failed once and waits a minute for its retry
    harness.target.step_script["B"] = [FAIL]
    job = create_flow(harness, steps=[
        {"name": "A", "target": HOOK},
        {"name": "B", "target": HOOK, "dependsOn": ["A"],
         "retryPolicy": {"maxAttempts": 3, "backoff": "FIXED", "initialDelayMs": 60_000}}])
    harness.advance(80)
    run = the_run(harness, job)
    assert statuses(run) == {"A": "SUCCEEDED", "B": "FAILED"}
    # When the run is cancelled
    status, cancelled = harness.request("POST", f"/v1/executions/{run['executionId']}/cancel")
    # Then B is cancelled at once, its retry never calls the target, and the run ends CANCELLED
    assert status == 202 and statuses(cancelled)["B"] == "CANCELLED", cancelled
    harness.advance(180)
    run = the_run(harness, job)
    assert run["status"] == "CANCELLED" and statuses(run) == {"A": "SUCCEEDED", "B": "CANCELLED"}
    assert [c.step for c in harness.target.calls_for(job["jobId"])] == ["A", "B"]  # B's first attempt only


def test_a_step_of_a_cancelled_job_never_runs(harness):
    # Given a run whose A has ended and whose B and C are sent
    job = create_flow(harness)
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")[0] == 202
    fn = Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                harness.target))
    fn.invoke(sqs_event(take_messages(harness), ARN))  # the run starts: A is sent
    fn.invoke(sqs_event(take_messages(harness), ARN))  # A runs: B and C are sent
    sent = take_messages(harness)
    assert len(sent) == 2
    # When the job is cancelled before their messages arrive
    assert harness.request("DELETE", f"/v1/jobs/{job['jobId']}")[0] == 200
    fn.invoke(sqs_event(sent, ARN))
    harness.advance(120)
    # Then neither runs, nothing below them does, and the run ends
    assert effects_by_step(harness, job) == {"A": 1}
    run = the_run(harness, job)
    assert statuses(run) == {"A": "SUCCEEDED", "B": "CANCELLED", "C": "CANCELLED", "D": "UPSTREAM_FAILED"}, run
    assert run["status"] == "CANCELLED", run
