"""Workflows: a job whose fire runs a DAG of steps, each step once in effect per run
(service/runs.py), on moto with a fake clock and a recording target that dedupes nothing."""
import json
import threading

import pytest

from jobsched.domain.executions import AttemptOutcome, ExecutionStatus
from jobsched.handlers import worker
from jobsched.local.events import Function, sqs_event
from jobsched.service.runs import Runs
from jobsched.store.executions import ExecutionsStore
from .harness import ACCEPTED, FAIL, KEY_A, WorkerDied
from .test_faults import take_messages

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
ARN = "arn:aws:sqs:us-east-1:123456789012:lane"


def diamond(**b_extra):
    """A → B, A → C, B + C → D."""
    return [{"name": "A", "target": HOOK},
            {"name": "B", "target": HOOK, "dependsOn": ["A"], **b_extra},
            {"name": "C", "target": HOOK, "dependsOn": ["A"]},
            {"name": "D", "target": HOOK, "dependsOn": ["B", "C"]}]


def outputs(harness, *names):
    for name in names:
        harness.target.step_script[name] = [AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, {"from": name})]


def create_flow(harness, steps=None, **extra):
    return harness.create_job({"name": "etl", "type": "DELAYED", "delaySeconds": 70, "payload": {"day": "2030-01-01"},
                               "steps": steps or diamond(), **extra})


def the_run(harness, job):
    runs = harness.executions_of(job["jobId"])
    assert len(runs) == 1, runs  # the history lists the run, never its steps
    return harness.execution(runs[0]["executionId"])


def step_calls(harness, job):
    return [c for c in harness.target.calls_for(job["jobId"]) if c.step]


def effects_by_step(harness, job):
    counts = {}
    for execution_id in harness.target.effects:
        if execution_id.startswith(job["jobId"] + "."):
            name = execution_id.rsplit(".step.", 1)[1]
            counts[name] = counts.get(name, 0) + 1
    return counts


def test_a_diamond_runs_each_step_once_in_dependency_order(harness):
    outputs(harness, "A", "B", "C", "D")
    job = create_flow(harness)
    assert [s["name"] for s in job["steps"]] == ["A", "B", "C", "D"] and job["target"] is None
    harness.advance(200)
    run = the_run(harness, job)
    assert run["status"] == "SUCCEEDED" and run["attempt"] == 1
    assert [(s["name"], s["status"], s["attempt"]) for s in run["steps"]] == [
        ("A", "SUCCEEDED", 1), ("B", "SUCCEEDED", 1), ("C", "SUCCEEDED", 1), ("D", "SUCCEEDED", 1)]
    calls = step_calls(harness, job)
    order = [c.step for c in calls]
    assert order[0] == "A" and order[-1] == "D" and sorted(order[1:3]) == ["B", "C"]
    assert effects_by_step(harness, job) == {"A": 1, "B": 1, "C": 1, "D": 1}
    by_step = {c.step: c for c in calls}
    assert by_step["B"].payload == {"day": "2030-01-01", "upstream": {"A": {"from": "A"}}}
    assert by_step["D"].payload == {"day": "2030-01-01", "upstream": {"B": {"from": "B"}, "C": {"from": "C"}}}
    assert by_step["A"].at_ms >= run_scheduled_ms(run)  # the first steps start at the fire instant
    d = harness.execution(run["steps"][3]["executionId"])
    assert (d["runId"], d["step"], d["status"]) == (run["executionId"], "D", "SUCCEEDED")
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}")[1]["state"] == "COMPLETED"


def run_scheduled_ms(run):
    from jobsched.domain.schedule import parse_instant

    return parse_instant(run["scheduledAt"], "scheduledAt")


def test_a_join_whose_two_upstream_steps_finish_at_once_starts_once(harness, monkeypatch):
    job = create_flow(harness)
    status, _ = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    assert status == 202
    fn = Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                harness.target))
    fn.invoke(sqs_event(take_messages(harness), ARN))  # the run starts: A is sent
    fn.invoke(sqs_event(take_messages(harness), ARN))  # A runs: B and C are sent
    messages = take_messages(harness)
    assert len(messages) == 2
    # B and C end in two workers at the same moment: both reach D's join together, and neither
    # goes on until both have joined (so a join that reads the set after its write sees it full).
    both_joining = threading.Barrier(2, timeout=10)
    original = ExecutionsStore.join_step

    def join_together(self, job_id, step_id, upstream):
        both_joining.wait()
        joined = original(self, job_id, step_id, upstream)
        both_joining.wait()
        return joined

    monkeypatch.setattr(ExecutionsStore, "join_step", join_together)
    workers = [Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                      harness.target)) for _ in range(2)]
    threads = [threading.Thread(target=w.invoke, args=(sqs_event([m], ARN),)) for w, m in zip(workers, messages)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.setattr(ExecutionsStore, "join_step", original)
    sent = take_messages(harness)
    assert [m["Body"].count(".step.D") for m in sent] == [1], "D was dispatched more than once (or never)"
    fn.invoke(sqs_event(sent, ARN))
    run = the_run(harness, job)
    assert run["status"] == "SUCCEEDED" and effects_by_step(harness, job) == {"A": 1, "B": 1, "C": 1, "D": 1}


def test_every_message_of_a_run_delivered_twice_runs_each_step_once(harness):
    harness.target.step_script["B"] = [FAIL]  # B's retry is one of the messages delivered twice
    job = create_flow(harness)
    harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    fn = Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                harness.target))
    kinds = set()
    quiet = 0
    while quiet < 5:
        messages = take_messages(harness)
        if not messages:
            quiet += 1
            harness.clock.set_ms(harness.clock.now_ms() + 1000)  # a retry's delay passes
            continue
        quiet = 0
        for message in messages:
            kinds.add(json.loads(json.loads(message["Body"])["d"])["kind"])
            fn.invoke(sqs_event([message], ARN))  # in turn: the same message twice
            fn.invoke(sqs_event([message], ARN))
    assert kinds >= {"MANUAL", "STEP", "RETRY"}
    run = the_run(harness, job)
    assert run["status"] == "SUCCEEDED", run
    assert effects_by_step(harness, job) == {"A": 1, "B": 1, "C": 1, "D": 1}
    assert [s["attempt"] for s in run["steps"]] == [1, 2, 1, 1]


def test_a_worker_dying_after_a_steps_success_is_recorded_loses_nothing(harness, monkeypatch):
    job = create_flow(harness)
    original = Runs.step_ended
    died = []

    def die_once(self, job_, step_id, status=None):
        if step_id.endswith(".step.A") and not died:
            died.append(step_id)
            raise WorkerDied("the worker died after A's success was recorded, before B and C were sent")
        return original(self, job_, step_id, status)

    monkeypatch.setattr(Runs, "step_ended", die_once)
    harness.advance(200)  # the message of A comes back after its visibility timeout
    monkeypatch.setattr(Runs, "step_ended", original)
    harness.advance(600, step_ms=30_000)
    run = the_run(harness, job)
    assert died and run["status"] == "SUCCEEDED"
    assert effects_by_step(harness, job) == {"A": 1, "B": 1, "C": 1, "D": 1}


def dead_b(harness, c_ends_last=False):
    """A run whose B fails for good (one attempt): D below it never runs, C does. Which of B and
    C ends first is set (each waits for a callback in turn): a join must hold either way."""
    if c_ends_last:
        harness.target.step_script.update(B=[FAIL], C=[ACCEPTED])
    else:
        harness.target.step_script.update(B=[ACCEPTED])
    job = create_flow(harness, steps=diamond(retryPolicy={"maxAttempts": 1}))
    harness.advance(200)
    run = the_run(harness, job)
    waiting = next(s for s in run["steps"] if s["status"] == "RUNNING")
    token = {"X-Callback-Token": harness.target.tokens[waiting["executionId"]]}
    if c_ends_last:
        assert waiting["name"] == "C"
        answer = harness.request("POST", f"/v1/executions/{waiting['executionId']}/complete", {"output": {"from": "C"}},
                                 key=None, headers=token)
    else:
        assert waiting["name"] == "B"
        answer = harness.request("POST", f"/v1/executions/{waiting['executionId']}/fail", {"error": "bad input"},
                                 key=None, headers=token)
    assert answer[0] == 200, answer
    harness.advance(60)
    return job, the_run(harness, job)


@pytest.mark.parametrize("c_ends_last", [False, True])
def test_a_dead_step_fails_what_is_below_it_and_the_run_is_a_dead_letter(harness, c_ends_last):
    job, run = dead_b(harness, c_ends_last)
    assert run["status"] == "DEAD" and "B" in run["error"]
    assert {s["name"]: s["status"] for s in run["steps"]} == {
        "A": "SUCCEEDED", "B": "DEAD", "C": "SUCCEEDED", "D": "UPSTREAM_FAILED"}
    accepted_b = {} if c_ends_last else {"B": 1}  # a long-running B took the call, then reported failure
    assert effects_by_step(harness, job) == {"A": 1, "C": 1, **accepted_b}
    dead = harness.request("GET", "/v1/dead-letters")[1]["items"]
    assert [d["executionId"] for d in dead] == [run["executionId"]]  # the run, not its step


@pytest.mark.parametrize("c_ends_last", [False, True])
def test_a_redrive_runs_the_failed_part_again_and_keeps_what_succeeded(harness, c_ends_last):
    job, run = dead_b(harness, c_ends_last)
    status, redriven = harness.request("POST", f"/v1/executions/{run['executionId']}/redrive")
    assert status == 202 and redriven["status"] == "RUNNING"
    assert {s["name"]: s["status"] for s in redriven["steps"]}["D"] == "PENDING"
    harness.advance(120)
    run = the_run(harness, job)
    assert run["status"] == "SUCCEEDED", run
    assert {s["name"]: (s["status"], s["attempt"]) for s in run["steps"]} == {
        "A": ("SUCCEEDED", 1), "B": ("SUCCEEDED", 2), "C": ("SUCCEEDED", 1), "D": ("SUCCEEDED", 1)}
    # A and C were not run again (B's first call took effect when it was long-running, then failed)
    assert effects_by_step(harness, job) == {"A": 1, "B": 1 if c_ends_last else 2, "C": 1, "D": 1}
    assert harness.request("GET", "/v1/dead-letters")[1]["items"] == []
    assert harness.request("POST", f"/v1/executions/{run['executionId']}/redrive")[0] == 409


def test_cancelling_a_run_mid_way(harness):
    harness.target.step_script["B"] = [ACCEPTED]  # B is long-running: it reports back
    job = create_flow(harness)
    harness.advance(200)
    run = the_run(harness, job)
    assert {s["name"]: s["status"] for s in run["steps"]} == {
        "A": "SUCCEEDED", "B": "RUNNING", "C": "SUCCEEDED", "D": "PENDING"}
    status, cancelled = harness.request("POST", f"/v1/executions/{run['executionId']}/cancel")
    assert status == 202 and cancelled["status"] == "RUNNING" and cancelled["cancelRequested"]
    assert {s["name"]: s["status"] for s in cancelled["steps"]}["D"] == "CANCELLED"  # never starts
    b_id = cancelled["steps"][1]["executionId"]
    status, beat = harness.request("POST", f"/v1/executions/{b_id}/heartbeat", {"progress": None}, key=None,
                                   headers={"X-Callback-Token": harness.target.tokens[b_id]})
    assert status == 200 and beat["status"] == "CANCELLED"
    harness.advance(60)
    run = the_run(harness, job)
    assert run["status"] == "CANCELLED"
    assert {s["name"]: s["status"] for s in run["steps"]} == {
        "A": "SUCCEEDED", "B": "CANCELLED", "C": "SUCCEEDED", "D": "CANCELLED"}
    assert "D" not in effects_by_step(harness, job)


@pytest.mark.parametrize("steps, message", [
    ([{"name": "A", "target": HOOK, "dependsOn": ["B"]}, {"name": "B", "target": HOOK, "dependsOn": ["A"]}],
     "cycle: A -> B -> A"),
    ([{"name": "A", "target": HOOK}, {"name": "B", "target": HOOK, "dependsOn": ["B"]}], "cycle: B -> B"),
    ([{"name": "A", "target": HOOK, "dependsOn": ["nope"]}], "depends on unknown step 'nope'"),
    ([{"name": "A", "target": HOOK}, {"name": "A", "target": HOOK}], "duplicate step name 'A'"),
    ([{"name": f"s{i}", "target": HOOK} for i in range(101)], "at most 100 steps"),
    ([{"name": "bad name", "target": HOOK}], "must be 1-64"),
])
def test_a_malformed_dag_is_refused_naming_the_problem(harness, steps, message):
    status, answer = harness.request("POST", "/v1/jobs", {"name": "x", "type": "DELAYED", "delaySeconds": 70,
                                                          "steps": steps})
    assert status == 422, answer
    assert answer["error"]["details"][0]["field"] == "steps" and message in answer["error"]["message"], answer


def test_a_job_has_a_target_or_steps_not_both(harness):
    for body in ({"steps": diamond(), "target": HOOK}, {}):
        status, answer = harness.request("POST", "/v1/jobs", {"name": "x", "type": "DELAYED", "delaySeconds": 70,
                                                              **body}, key=KEY_A)
        assert status == 400 and "either target or steps" in answer["error"]["message"], answer


def test_a_redrive_interrupted_after_the_runs_reopen_is_completed_by_its_sweep(harness, monkeypatch):
    job, run = dead_b(harness, c_ends_last=True)
    original = Runs.complete_redrive

    def die(self, job_, run_):
        raise WorkerDied("the API died after reopening the run, before reopening its steps")

    monkeypatch.setattr(Runs, "complete_redrive", die)
    status, _ = harness.request("POST", f"/v1/executions/{run['executionId']}/redrive")
    assert status == 500
    monkeypatch.setattr(Runs, "complete_redrive", original)
    assert harness.execution(run["executionId"])["status"] == "RUNNING"  # reopened, steps not yet
    harness.advance(240)  # the sweep armed before the reopen completes the redrive
    run = the_run(harness, job)
    assert run["status"] == "SUCCEEDED", run
    assert effects_by_step(harness, job) == {"A": 1, "B": 1, "C": 1, "D": 1}


def test_overlap_policy_skip_applies_to_runs(harness):
    harness.target.step_script["A"] = [ACCEPTED]  # the first run's A goes on for minutes
    job = harness.create_job({"name": "every-minute", "type": "RATE", "schedule": "PT1M", "overlapPolicy": "SKIP",
                              "steps": [{"name": "A", "target": HOOK}]})
    harness.advance(240)
    runs = harness.executions_of(job["jobId"])
    statuses = [r["status"] for r in reversed(runs)]
    assert statuses[0] == "RUNNING" and set(statuses[1:]) == {"SKIPPED"} and len(statuses) >= 2, statuses
    assert [c.step for c in step_calls(harness, job)] == ["A"]  # no second run started


def test_a_run_of_many_steps_with_large_outputs_reads_its_steps_once_not_at_every_steps_end(harness, monkeypatch):
    """Issue 28, item 10: the run's end was decided by reading every step, outputs included, at
    every step's end (O(steps²) strongly consistent reads: 100 steps of 64 KB outputs cost about
    160,000 read units a run). Now each end adds its name to the run's set of ended steps (one
    small write) and only the step that completes the set reads the steps."""
    from .capacity import ReadUnits

    width = 24
    steps = [{"name": "root", "target": HOOK}] + [
        {"name": f"s{i}", "target": HOOK, "dependsOn": ["root"]} for i in range(width)]
    big = "x" * 16_000  # each step's output: 16 KB, 4 read units a strongly consistent read
    for step in steps:
        harness.target.step_script[step["name"]] = [AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, big)]
    reads = ReadUnits(harness.settings.executions_table).install(monkeypatch)
    job = create_flow(harness, steps=steps)
    harness.advance(200)
    monkeypatch.undo()
    run = the_run(harness, job)
    assert run["status"] == "SUCCEEDED" and len(run["steps"]) == width + 1
    # Reading the ended steps at each of the 25 ends cost about Σ ends × 4 units ≈ 1,300 units;
    # reading them once at the last end costs about 25 × 4, plus each step's own small reads
    # and its upstream output (4 units each).
    assert reads.units < 400, (reads.units, reads.calls)
