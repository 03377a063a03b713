"""GET /v1/jobs/{jobId}/stats: a job's outcomes and lateness over the last hour, day or week,
from its execution records."""
from jobsched.domain import stats as stats_module

from .harness import FAIL, KEY_B

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def test_stats_count_the_windows_outcomes_and_lateness(harness):
    # Given a once-a-minute job whose 3rd and 4th fires fail once with no retry left, and a trigger
    job = harness.create_job({"name": "m", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                              "retryPolicy": {"maxAttempts": 1}})
    harness.advance(60 * 2)
    harness.target.script[job["jobId"]] = [FAIL, FAIL]
    harness.advance(60 * 8)
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")[0] == 202
    harness.advance(5)
    # When its statistics of the last hour are read
    status, body = harness.request("GET", f"/v1/jobs/{job['jobId']}/stats?window=1h")
    # Then they count what its records say
    assert status == 200, body
    statuses = [e["status"] for e in harness.executions_of(job["jobId"])]
    assert body["fires"] == len([s for s in statuses]) - 1 == 10  # the trigger is not a fire
    assert body["dead"] == 2 and body["succeeded"] == statuses.count("SUCCEEDED") == 9
    assert body["failed"] == body["skipped"] == body["running"] == 0
    assert body["complete"] is True and body["window"] == "1h" and body["missing"] == 0
    late = sorted(e["lateMs"] for e in harness.executions_of(job["jobId"]))
    assert body["lateMs"] == {"p50": late[(len(late) + 1) // 2 - 1], "p99": late[-1], "max": late[-1]}


def test_the_window_bounds_what_is_counted(harness):
    job = harness.create_job({"name": "m", "type": "CRON", "schedule": "*/10 * * * *", "target": HOOK})
    harness.advance(3 * 3600, step_ms=60_000)
    _, hour = harness.request("GET", f"/v1/jobs/{job['jobId']}/stats?window=1h")
    _, day = harness.request("GET", f"/v1/jobs/{job['jobId']}/stats")  # 24h by default
    assert hour["fires"] == 6 and day["fires"] == 18 and day["window"] == "24h"


def test_a_read_past_its_bound_covers_the_newest_part_and_says_so(harness, monkeypatch):
    job = harness.create_job({"name": "m", "type": "CRON", "schedule": "* * * * *", "target": HOOK})
    harness.advance(12 * 60, step_ms=60_000)
    monkeypatch.setattr(stats_module, "MAX_RECORDS", 5)
    monkeypatch.setattr("jobsched.service.jobs.MAX_RECORDS", 5)
    _, body = harness.request("GET", f"/v1/jobs/{job['jobId']}/stats?window=1h")
    assert body["complete"] is False and body["fires"] == 5
    newest = sorted(e["scheduledAt"] for e in harness.executions_of(job["jobId"]))[-5:]
    assert body["from"] == newest[0]


def test_a_bad_window_names_the_field_and_another_tenants_job_is_not_found(harness):
    job = harness.create_job({"name": "m", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    status, body = harness.request("GET", f"/v1/jobs/{job['jobId']}/stats?window=2h")
    assert status == 400 and body["error"]["details"][0]["field"] == "window"
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}/stats", key=KEY_B)[0] == 404


def test_backfilled_runs_count_for_no_lateness(harness):
    # Given a five-minute job paused for an hour, then backfilled (the first backfilled run fails
    # once and is retried) and resumed for two fires on time
    from jobsched.domain.schedule import format_instant

    job = harness.create_job({"name": "b", "type": "RATE", "schedule": "PT5M", "target": HOOK,
                              "retryPolicy": {"maxAttempts": 2, "initialDelayMs": 1000}})
    harness.request("POST", f"/v1/jobs/{job['jobId']}/pause")
    harness.advance(3600, step_ms=60_000)
    harness.target.script[job["jobId"]] = [FAIL]
    status, filled = harness.request("POST", f"/v1/jobs/{job['jobId']}/backfill",
                                     {"from": job["createdAt"], "to": format_instant(harness.clock.now_ms())})
    assert status == 202 and filled["count"] == 11  # one every five minutes after the first
    harness.advance(10)
    harness.request("POST", f"/v1/jobs/{job['jobId']}/resume")
    harness.advance(11 * 60, step_ms=1000)
    executions = harness.executions_of(job["jobId"])
    backfilled = [e for e in executions if e["executionId"] in filled["executionIds"]]
    on_time = [e for e in executions if e["executionId"] not in filled["executionIds"]]
    assert len(backfilled) == 11 and all(e["backfill"] and e["status"] == "SUCCEEDED" for e in backfilled)
    assert max(e["attempt"] for e in backfilled) == 2  # its retry kept the mark
    assert len(on_time) == 2 and not any(e["backfill"] for e in on_time)
    assert min(e["lateMs"] for e in backfilled) > 60_000 > max(e["lateMs"] for e in on_time)
    # When its statistics are read, then only the fires on time count for lateness
    _, body = harness.request("GET", f"/v1/jobs/{job['jobId']}/stats?window=24h")
    late = sorted(e["lateMs"] for e in on_time)
    assert body["lateMs"] == {"p50": late[0], "p99": late[-1], "max": late[-1]}
