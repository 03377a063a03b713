"""Issue 26, "Hardening 2": every id the API hands out ends with a record; names are checked up to
their true end; an exception inside an attempt is that attempt's failure; a pause or delete
answered before the due second stops the fire."""
import threading

import pytest

from jobsched.domain.schedule import format_instant, parse_instant
from jobsched.service.handoff import HandOff
from jobsched.service.outcomes import Outcome, Outcomes
from jobsched.service.worker import Worker
from jobsched.store import queues
from jobsched.store.aws import build_stores
from jobsched.store.jobs import JobsStore

from .harness import TENANT_A
from .test_faults import take_messages

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
MINUTE = 60_000


def fields(answer):
    return [d["field"] for d in answer["error"]["details"]]


# Item 5 -----------------------------------------------------------------------------------------

def test_a_backfill_followed_at_once_by_a_delete_ends_every_id_it_answered_cancelled(harness):
    # Given a job whose three past occurrences were backfilled (202 with their ids)
    job = harness.create_job({"name": "hourly", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    created = parse_instant(job["createdAt"], "createdAt")
    harness.request("POST", f"/v1/jobs/{job['jobId']}/pause")
    harness.advance(3 * 3600 + 60, step_ms=60_000)
    window = {"from": format_instant(created), "to": format_instant(harness.clock.now_ms())}
    status, filled = harness.request("POST", f"/v1/jobs/{job['jobId']}/backfill", window)
    assert status == 202 and filled["count"] == 3, filled
    # When the job is deleted before the backfill's messages are delivered
    assert harness.request("DELETE", f"/v1/jobs/{job['jobId']}")[0] == 200
    harness.advance(5)
    # Then each id answered has a record, CANCELLED, and the target was never called
    for execution_id in filled["executionIds"]:
        execution = harness.execution(execution_id)
        assert execution["status"] == "CANCELLED" and execution["attempts"] == [], execution
    assert harness.target.calls_for(job["jobId"]) == []


# Item 6 -----------------------------------------------------------------------------------------

TRAILING_NEWLINE = [
    ("steps", lambda name: {"steps": [{"name": name, "target": HOOK}]}),
    ("target.headers", lambda name: {"target": {**HOOK, "headers": {name: "v"}}}),
    ("tags", lambda name: {"target": HOOK, "tags": {name: "v"}}),
    ("flowControl.key", lambda name: {"target": HOOK, "flowControl": {"key": name, "maxConcurrency": 1}}),
]


@pytest.mark.parametrize("field,body", TRAILING_NEWLINE, ids=[f for f, _ in TRAILING_NEWLINE])
def test_a_name_ending_in_a_newline_is_refused_naming_its_field(harness, field, body):
    base = {"name": "n", "type": "RATE", "schedule": "PT1H"}
    # Given a name that is valid: accepted
    assert harness.request("POST", "/v1/jobs", {**base, **body("X-Partner")})[0] == 201
    # When the same name ends in a newline (or carries one): refused, naming the field, never stored
    for bad in ("X-Partner\n", "X-Par\ntner"):
        status, answer = harness.request("POST", "/v1/jobs", {**base, **body(bad)})
        assert status in (400, 422), (bad, status, answer)
        assert any(f == field or f.startswith(field + ".") for f in fields(answer)), answer


# Item 7 -----------------------------------------------------------------------------------------

def test_an_exception_inside_an_attempt_is_recorded_failed_and_retried_under_the_policy(harness, monkeypatch):
    # Given a target whose first call raises inside the worker (a KMS failure while signing)
    job = harness.create_job({"name": "d", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 3, "backoff": "FIXED", "initialDelayMs": 30_000}})
    real_invoke = harness.target.invoke
    raised = []

    def kms_fails_once(*args, **kwargs):
        if not raised:
            raised.append(True)
            raise RuntimeError("KMS Decrypt: ThrottlingException")
        return real_invoke(*args, **kwargs)

    monkeypatch.setattr(harness.target, "invoke", kms_fails_once)
    # When the job fires
    harness.advance(12)
    # Then the attempt is recorded FAILED with the reason and a retry is scheduled (no lease wait)
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "FAILED", execution
    assert "KMS Decrypt: ThrottlingException" in execution["attempts"][0]["error"]
    harness.advance(35)  # the policy's 30 s, not the lease's 6 minutes
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "SUCCEEDED" and [a["status"] for a in execution["attempts"]] == \
        ["FAILED", "SUCCEEDED"], execution
    assert len(harness.target.calls_for(job["jobId"])) == 1


def test_an_exception_on_the_last_attempt_ends_dead(harness, monkeypatch):
    job = harness.create_job({"name": "d", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 1}})

    def always_fails(*args, **kwargs):
        raise RuntimeError("KMS Decrypt: AccessDeniedException")

    monkeypatch.setattr(harness.target, "invoke", always_fails)
    harness.advance(12)
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "DEAD" and "AccessDeniedException" in execution["error"], execution


# Item 8 -----------------------------------------------------------------------------------------

def test_a_pause_or_delete_answered_before_the_due_second_stops_its_fire(harness, monkeypatch):
    start = harness.clock.now_ms()
    due = (start // MINUTE + 3) * MINUTE  # 00:03:00
    every_minute = {"type": "CRON", "schedule": "* * * * *", "target": HOOK}
    paused = harness.create_job({"name": "paused", **every_minute})
    kept = harness.create_job({"name": "kept", **every_minute})
    deleted = harness.create_job({"name": "once", "type": "ONE_TIME", "runAt": format_instant(due), "target": HOOK})
    # Given the tick that hands off 00:03's bucket runs 0.56 s into its minute, so that SQS
    # (whole-second delays, rounded down) makes the fires visible at 00:02:59.56
    harness.advance((due - 2 * MINUTE - start) / 1000 - 0.001)
    harness.clock.set_ms(due - 2 * MINUTE + 560)
    harness.tick_all()
    harness.clock.set_ms(due - 440)
    # When the messages are delivered and, while the worker waits for the due second, the API
    # answers a pause of one job and a delete of another (at 00:02:59.56)
    answered = []
    real_sleep = harness.clock.sleep
    lock = threading.Lock()

    def pause_and_delete_during_the_wait(seconds):
        with lock:
            if not answered:
                answered.append(harness.request("POST", f"/v1/jobs/{paused['jobId']}/pause")[0])
                answered.append(harness.request("DELETE", f"/v1/jobs/{deleted['jobId']}")[0])
        real_sleep(seconds)

    monkeypatch.setattr(harness.clock, "sleep", pause_and_delete_during_the_wait)
    harness.deliver()
    assert answered == [200, 200]
    # Then neither fires, and the job left alone fires at its due instant (by execution id: the
    # late fires of 00:01 and 00:02 in the same batch may run after the shared clock reached 00:03)
    def due_fires(job):
        return [c.at_ms for c in harness.target.calls_for(job["jobId"]) if c.execution_id == f"{job['jobId']}.{due}"]

    assert due_fires(paused) == []
    assert harness.target.calls_for(deleted["jobId"]) == []
    assert due_fires(kept) == [due]
    # and nothing of theirs is left RUNNING
    assert all(e["status"] != "RUNNING" for e in harness.executions_of(paused["jobId"]))
    assert harness.executions_of(deleted["jobId"]) == []


def every_minute_job_visible_early(harness) -> tuple[dict, int]:
    """A job due every minute whose fire at 00:03 SQS makes visible 0.44 s early (the tick handed
    00:03's bucket off 0.56 s into its minute; delays are whole seconds), the clock at 00:02:59.56,
    its fires of 00:01 and 00:02 visible since: (the job, 00:03)."""
    start = harness.clock.now_ms()
    due = (start // MINUTE + 3) * MINUTE
    job = harness.create_job({"name": "paused", "type": "CRON", "schedule": "* * * * *", "target": HOOK})
    harness.advance((due - 2 * MINUTE - start) / 1000 - 0.001)
    harness.clock.set_ms(due - 2 * MINUTE + 560)
    harness.tick_all()
    harness.clock.set_ms(due - 440)
    return job, due


def worker_of(harness) -> Worker:
    """The worker's service on its own stores, as a container has them."""
    stores = build_stores(harness.settings, harness.session, harness.clock)
    return Worker(stores, Outcomes(stores, HandOff(stores, harness.clock, harness.settings.segments), harness.clock),
                  harness.target, harness.clock)


def test_a_job_read_before_the_wait_is_read_again_after_it(harness, monkeypatch):
    # Given a fire visible 0.44 s early, and its job as a batch read found it before the wait
    job, due = every_minute_job_visible_early(harness)
    # (00:02's fire, visible since 00:02, is taken too and set aside)
    [dispatch] = [d for d in (harness.stores.lanes.open(m["Body"]) for m in take_messages(harness)) if d.due_ms == due]
    read_before = harness.stores.jobs.get(TENANT_A, job["jobId"], consistent=True)
    worker = worker_of(harness)
    real_sleep = harness.clock.sleep

    def pause_during_the_wait(seconds):
        assert harness.request("POST", f"/v1/jobs/{job['jobId']}/pause")[0] == 200
        real_sleep(seconds)

    monkeypatch.setattr(harness.clock, "sleep", pause_during_the_wait)
    # When the worker processes it with that job
    result = worker.process(dispatch, read_before)
    # Then the pause answered during the wait stops it
    assert result.outcome is Outcome.STALE_MESSAGE
    assert harness.target.calls_for(job["jobId"]) == []


def test_a_fire_whose_job_its_batch_read_before_its_due_instant_reads_it_again(harness, monkeypatch):
    # Given a job's late fires and its next, 0.44 s early, in one batch: the batch reads the job
    # once, for the late ones, before the early one's due instant
    job, due = every_minute_job_visible_early(harness)
    # When a pause is answered just after that read, and the due instant has passed when the early
    # fire's thread first looks at the clock (it started late: no wait)
    real_get_many = JobsStore.get_many
    paused = []

    def read_then_pause(self, keys, whole=False):
        found = real_get_many(self, keys, whole)
        if whole and not paused:
            paused.append(None)  # once: the pause's own reads come through here too
            paused[0] = harness.request("POST", f"/v1/jobs/{job['jobId']}/pause")[0]
            harness.clock.set_ms(due)
        return found

    monkeypatch.setattr(JobsStore, "get_many", read_then_pause)
    harness.deliver()
    assert paused == [200]
    # Then the fire due after the read does not run; the late ones, due before it, did
    fired = {c.execution_id for c in harness.target.calls_for(job["jobId"])}
    assert f"{job['jobId']}.{due}" not in fired
    assert {f"{job['jobId']}.{due - MINUTE}", f"{job['jobId']}.{due - 2 * MINUTE}"} <= fired


@pytest.mark.parametrize("read_before_due_ms", [440, None])
def test_a_job_read_before_the_due_instant_is_read_again_when_the_fire_runs_after_it(harness, read_before_due_ms):
    # Given a fire, its job read 0.44 s before its due instant, and a pause answered after that read
    job, due = every_minute_job_visible_early(harness)
    [dispatch] = [d for d in (harness.stores.lanes.open(m["Body"]) for m in take_messages(harness)) if d.due_ms == due]
    read_before = harness.stores.jobs.get(TENANT_A, job["jobId"], consistent=True)
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/pause")[0] == 200
    worker = worker_of(harness)
    # When the worker processes it at its due instant with that job and when it was read (or
    # without saying when)
    harness.clock.set_ms(due)
    read_at = None if read_before_due_ms is None else due - read_before_due_ms
    result = worker.process(dispatch, read_before, read_at_ms=read_at)
    # Then the job is read again, and the pause stops it
    assert result.outcome is Outcome.STALE_MESSAGE
    assert harness.target.calls_for(job["jobId"]) == []


def test_a_fire_visible_seconds_before_its_due_instant_goes_back_and_fires_on_time(harness, monkeypatch):
    # Given a fire whose message becomes visible 3 s before its due second (a delay rounded down
    # twice, as a restored local snapshot's is)
    start = harness.clock.now_ms()
    due = (start // MINUTE + 3) * MINUTE + 30_000
    job = harness.create_job({"name": "early", "type": "ONE_TIME", "runAt": format_instant(due), "target": HOOK})
    monkeypatch.setattr(queues, "delay_seconds", lambda at_ms, now_ms: max(0, (at_ms - now_ms) // 1000 - 3))
    harness.advance((due - 30_000 - start) / 1000)  # its minute's tick hands it to SQS
    monkeypatch.undo()
    # When it is delivered 2.6 s before its due second
    harness.clock.set_ms(due - 2_600)
    harness.deliver()
    # Then the target is not called early: the message goes back to the queue
    assert harness.target.calls_for(job["jobId"]) == []
    assert harness.executions_of(job["jobId"]) == []
    harness.clock.set_ms(due - 1_700)
    harness.deliver()
    assert harness.target.calls_for(job["jobId"]) == []
    # and is back within the last second, and fires at its due instant, once
    harness.clock.set_ms(due - 500)
    harness.deliver()
    assert [c.at_ms for c in harness.target.calls_for(job["jobId"])] == [due]
    harness.advance(5)
    assert len(harness.target.calls_for(job["jobId"])) == 1
