"""Schedule bounds and self-pausing, over the API against the tick and the worker (fake clock):
startAt, endAt, maxRuns, runCount, COMPLETED with its reason, pauseAfterFailures."""
from jobsched.domain.executions import AttemptOutcome, ExecutionStatus
from jobsched.domain.schedule import format_instant

from .harness import FAIL

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
ONCE = {"maxAttempts": 1, "backoff": "FIXED", "initialDelayMs": 1000, "maxDelayMs": 1000}
OK = AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, {"ok": True})


def fired(harness, job):
    return [format_instant(c.at_ms) for c in harness.target.calls_for(job["jobId"])]


def get(harness, job):
    status, body = harness.request("GET", f"/v1/jobs/{job['jobId']}")
    assert status == 200, body
    return body


def test_a_job_fires_up_to_its_end_then_is_completed_with_end_reached(harness):
    # Given a job every minute on the minute, ending exactly on an occurrence (00:03)
    job = harness.create_job({"name": "e", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                              "endAt": "2030-01-01T00:03:00Z"})
    # When the clock passes its end
    harness.advance(300)
    # Then it fired in [startAt, endAt) only, and is COMPLETED because its end was reached
    assert fired(harness, job) == ["2030-01-01T00:01:00Z", "2030-01-01T00:02:00Z"]
    body = get(harness, job)
    assert body["state"] == "COMPLETED" and body["completedReason"] == "END_REACHED"
    assert body["runCount"] == 2 and body["nextFireAt"] is None


def test_max_runs_fires_that_many_times_then_is_completed_with_max_runs_reached(harness):
    job = harness.create_job({"name": "m", "type": "RATE", "schedule": "PT1M", "target": HOOK, "maxRuns": 3})
    assert job["maxRuns"] == 3 and job["runCount"] == 0
    harness.advance(150)
    running = get(harness, job)
    assert running["state"] == "ACTIVE" and running["runCount"] == 2
    harness.advance(600)
    assert fired(harness, job) == ["2030-01-01T00:01:05Z", "2030-01-01T00:02:05Z", "2030-01-01T00:03:05Z"]
    body = get(harness, job)
    assert body["state"] == "COMPLETED" and body["completedReason"] == "MAX_RUNS_REACHED"
    assert body["runCount"] == 3 and body["nextFireAt"] is None


def test_max_runs_counts_failed_fires_and_not_triggers(harness):
    job = harness.create_job({"name": "f", "type": "RATE", "schedule": "PT1M", "target": HOOK, "maxRuns": 2,
                              "retryPolicy": ONCE})
    harness.target.script[job["jobId"]] = [FAIL]  # the first fire ends DEAD: it counts all the same
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")[0] == 202  # not counted
    harness.advance(400)
    scheduled = [c for c in harness.target.calls_for(job["jobId"]) if not c.execution_id.endswith(".manual")]
    assert [format_instant(c.at_ms) for c in scheduled] == ["2030-01-01T00:01:05Z", "2030-01-01T00:02:05Z"]
    body = get(harness, job)
    assert body["state"] == "COMPLETED" and body["completedReason"] == "MAX_RUNS_REACHED" and body["runCount"] == 2


def test_the_count_carries_over_a_pause_and_a_resume(harness):
    job = harness.create_job({"name": "p", "type": "RATE", "schedule": "PT1M", "target": HOOK, "maxRuns": 3})
    harness.advance(130)  # fired at 00:01:05 and 00:02:05
    _, paused = harness.request("POST", f"/v1/jobs/{job['jobId']}/pause")
    assert paused["runCount"] == 2
    harness.advance(300)
    _, resumed = harness.request("POST", f"/v1/jobs/{job['jobId']}/resume")
    assert resumed["state"] == "ACTIVE" and resumed["runCount"] == 2
    harness.advance(600)
    assert len(fired(harness, job)) == 3  # one more after the resume, not three
    body = get(harness, job)
    assert body["state"] == "COMPLETED" and body["completedReason"] == "MAX_RUNS_REACHED"


def test_the_first_fire_of_a_job_starting_later_is_its_first_occurrence_at_or_after_start(harness):
    job = harness.create_job({"name": "s", "type": "CRON", "schedule": "*/2 * * * *", "target": HOOK,
                              "startAt": "2030-01-01T00:04:00Z"})
    assert job["nextFireAt"] == "2030-01-01T00:04:00Z"
    harness.advance(420)
    assert fired(harness, job) == ["2030-01-01T00:04:00Z", "2030-01-01T00:06:00Z"]


def test_pause_after_failures_pauses_the_job_naming_its_last_execution_and_resume_resets(harness):
    job = harness.create_job({"name": "d", "type": "RATE", "schedule": "PT1M", "target": HOOK,
                              "retryPolicy": ONCE, "pauseAfterFailures": 2})
    harness.target.script[job["jobId"]] = [FAIL, FAIL, FAIL]
    harness.advance(200)  # 00:01:05 DEAD, 00:02:05 DEAD: paused; 00:03:05 never fires
    assert fired(harness, job) == ["2030-01-01T00:01:05Z", "2030-01-01T00:02:05Z"]
    body = get(harness, job)
    last = f"{job['jobId']}.{1893456125000:013d}"  # 2030-01-01T00:02:05Z
    assert body["state"] == "PAUSED"
    assert body["pausedReason"] == (f"paused after 2 consecutive executions ended DEAD; the last: {last}; "
                                    f"last error: HTTP 503: try later")
    harness.advance(120)
    assert len(fired(harness, job)) == 2
    # Resume clears the count: one more DEAD does not pause it again, a second one does.
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/resume")[1]["state"] == "ACTIVE"
    harness.advance(70)
    assert len(fired(harness, job)) == 3 and get(harness, job)["state"] == "ACTIVE"
    harness.target.script[job["jobId"]] = [FAIL]
    harness.advance(60)
    assert len(fired(harness, job)) == 4 and get(harness, job)["state"] == "PAUSED"


def test_a_success_resets_the_failure_count(harness):
    job = harness.create_job({"name": "r", "type": "RATE", "schedule": "PT1M", "target": HOOK,
                              "retryPolicy": ONCE, "pauseAfterFailures": 2})
    harness.target.script[job["jobId"]] = [FAIL, OK, FAIL, OK]
    harness.advance(300)
    assert len(fired(harness, job)) == 5
    assert get(harness, job)["state"] == "ACTIVE"


def test_bounds_on_a_one_time_job_are_a_422_naming_the_field(harness):
    base = {"name": "o", "type": "ONE_TIME", "runAt": "2030-01-01T01:00:00Z", "target": HOOK}
    for field, value in (("maxRuns", 3), ("startAt", "2030-01-01T00:00:00Z"), ("endAt", "2030-01-02T00:00:00Z"),
                         ("pauseAfterFailures", 2)):
        status, answer = harness.request("POST", "/v1/jobs", {**base, field: value})
        assert status == 422 and answer["error"]["details"][0]["field"] == field, (field, answer)


def test_invalid_bounds_are_refused_naming_the_field(harness):
    base = {"name": "b", "type": "RATE", "schedule": "PT1M", "target": HOOK}
    status, answer = harness.request("POST", "/v1/jobs", {**base, "startAt": "2030-01-02T00:00:00Z",
                                                          "endAt": "2030-01-02T00:00:00Z"})
    assert status == 422 and answer["error"]["details"][0]["field"] == "endAt"
    # Created after its end: nothing would ever fire.
    status, answer = harness.request("POST", "/v1/jobs", {**base, "endAt": "2029-12-31T00:00:00Z"})
    assert status == 422 and answer["error"]["details"][0]["field"] == "endAt"
    for field, value in (("maxRuns", 0), ("maxRuns", 10_000_001), ("pauseAfterFailures", 1001)):
        status, answer = harness.request("POST", "/v1/jobs", {**base, field: value})
        assert status in (400, 422) and field in str(answer), (field, answer)


def test_an_update_may_not_leave_no_run_and_a_completed_job_stays_completed(harness):
    job = harness.create_job({"name": "u", "type": "RATE", "schedule": "PT1M", "target": HOOK, "maxRuns": 3})
    harness.advance(130)  # two fires
    body = {"name": "u", "type": "RATE", "schedule": "PT1M", "target": HOOK, "maxRuns": 2}
    status, answer = harness.request("PUT", f"/v1/jobs/{job['jobId']}", body)
    assert status == 422 and answer["error"]["details"][0]["field"] == "maxRuns"
    status, widened = harness.request("PUT", f"/v1/jobs/{job['jobId']}", {**body, "maxRuns": 4})
    assert status == 200 and widened["runCount"] == 2 and widened["maxRuns"] == 4
    harness.advance(600)
    assert len(fired(harness, job)) == 4
    assert get(harness, job)["completedReason"] == "MAX_RUNS_REACHED"
    # COMPLETED is final: widening the bounds of a completed job is a conflict (create a new job).
    status, answer = harness.request("PUT", f"/v1/jobs/{job['jobId']}", {**body, "maxRuns": 10})
    assert status == 409


def test_the_preview_shows_only_fire_times_inside_the_bounds_and_stops_at_max_runs(harness):
    status, body = harness.request(
        "GET", "/v1/schedule-preview?type=CRON&schedule=0%20*%20*%20*%20*&after=2030-01-01T00:00:00Z&count=10"
               "&startAt=2030-01-01T02:00:00Z&endAt=2030-01-01T05:00:00Z")
    assert status == 200
    assert body["fireTimes"] == ["2030-01-01T02:00:00Z", "2030-01-01T03:00:00Z", "2030-01-01T04:00:00Z"]
    status, body = harness.request(
        "GET", "/v1/schedule-preview?type=RATE&schedule=PT1H&after=2030-01-01T00:00:00Z&count=10&maxRuns=2")
    assert status == 200 and len(body["fireTimes"]) == 2
    status, body = harness.request("GET", "/v1/schedule-preview?type=RATE&schedule=PT1H&maxRuns=0")
    assert status == 400 and body["error"]["details"][0]["field"] == "maxRuns"


def test_a_worker_dying_between_the_count_and_the_pause_counts_once_and_pauses_on_the_redelivery(harness, monkeypatch):
    from jobsched.store.jobs import JobsStore
    from .harness import WorkerDied

    # Every ten minutes: the end's record comes back (re-sent 30 s later: handlers/worker.py's
    # hand-backs, TRANSIENT_RETRY_SECONDS) long before the next fire.
    job = harness.create_job({"name": "c", "type": "RATE", "schedule": "PT10M", "target": HOOK,
                              "retryPolicy": ONCE, "pauseAfterFailures": 2})
    harness.target.script[job["jobId"]] = [FAIL, FAIL, FAIL, FAIL]
    original = JobsStore.pause_itself
    died = []

    def die_once(self, *args):
        if not died:
            died.append(args)
            raise WorkerDied("the worker died after the second DEAD was counted, before the pause")
        return original(self, *args)

    monkeypatch.setattr(JobsStore, "pause_itself", die_once)
    harness.advance(20 * 60 + 5, step_ms=5_000)  # 00:10:05 DEAD (1), 00:20:05 DEAD (2): dies before pausing
    assert died and get(harness, job)["state"] == "ACTIVE"
    harness.advance(510, step_ms=30_000)  # the end's record comes back before the next fire (00:30:05)
    body = get(harness, job)
    assert body["state"] == "PAUSED" and body["pausedReason"].startswith("paused after 2 consecutive")
    assert len(fired(harness, job)) == 2


def test_no_fire_follows_the_last_run_even_while_that_run_is_still_running(harness):
    from .harness import ACCEPTED

    # Given maxRuns 2 and a second run that a long-running target keeps RUNNING past the next occurrence
    job = harness.create_job({"name": "l", "type": "RATE", "schedule": "PT1M", "target": HOOK, "maxRuns": 2,
                              "heartbeatTimeoutSec": 900})
    harness.target.script[job["jobId"]] = [OK, ACCEPTED]
    harness.advance(300)
    # Then the job is not complete yet (its last run has not ended), and yet no third fire ran
    assert fired(harness, job) == ["2030-01-01T00:01:05Z", "2030-01-01T00:02:05Z"]
    body = get(harness, job)
    assert body["state"] == "ACTIVE" and body["runCount"] == 2 and body["nextFireAt"] is None
    # When the last run reports its end, the job is COMPLETED
    last = harness.target.calls_for(job["jobId"])[-1].execution_id
    status, _ = harness.request("POST", f"/v1/executions/{last}/complete", {}, key=None,
                                headers={"X-Callback-Token": harness.target.tokens[last]})
    assert status == 200
    body = get(harness, job)
    assert body["state"] == "COMPLETED" and body["completedReason"] == "MAX_RUNS_REACHED"
