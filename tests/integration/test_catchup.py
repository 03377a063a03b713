"""Catch-up that does not flood, through the whole stack on a fake clock: a once-a-minute job with
misfirePolicy {RUN_ALL, maxCatchUp 100, catchUpPerMinute 10} after 3 hours paused or without
ticks fires the newest 100 missed occurrences at no more than 10 a minute, each catchUp: true with
its lateMs; the older ones are one SKIPPED record, reason MISSED_WINDOW. The string forms keep
their meaning."""
from collections import Counter

from jobsched.domain.schedule import parse_instant

from .harness import KEY_A

HOOK = {"type": "HTTP", "url": "https://example.com/hook"}
CATCH_UP = {"policy": "RUN_ALL", "maxCatchUp": 100, "catchUpPerMinute": 10}
MINUTE = 60_000


def all_executions(harness, job_id: str) -> list[dict]:
    items, cursor = [], None
    while True:
        path = f"/v1/jobs/{job_id}/executions?limit=100" + (f"&cursor={cursor}" if cursor else "")
        status, body = harness.request("GET", path, key=KEY_A)
        assert status == 200, body
        items += body["items"]
        cursor = body["nextCursor"]
        if not cursor:
            return items


def ms(text: str) -> int:
    return parse_instant(text, "t")


def assert_catch_up(harness, job_id: str, missed_from: int) -> list[dict]:
    executions = all_executions(harness, job_id)
    catch_ups = sorted((e for e in executions if e["catchUp"]), key=lambda e: e["scheduledAt"])
    assert len(catch_ups) == 100
    assert {e["status"] for e in catch_ups} == {"SUCCEEDED"}
    for e in catch_ups:
        assert e["lateMs"] == ms(e["startedAt"]) - ms(e["scheduledAt"]) and e["lateMs"] > 60_000
    # At no more than 10 a minute: no 60-second window of the calls holds more than 10
    called = sorted(c.at_ms for c in harness.target.calls_for(job_id)
                    if c.execution_id in {e["executionId"] for e in catch_ups})
    assert len(called) == 100
    assert max(sum(1 for t in called if start <= t < start + MINUTE) for start in called) <= 10
    # The older ones: one SKIPPED record, MISSED_WINDOW, from the first missed to the one before the kept
    [skipped] = [e for e in executions if e["status"] == "SKIPPED"]
    assert skipped["reason"] == "MISSED_WINDOW"
    assert ms(skipped["scheduledAt"]) == missed_from
    assert ms(skipped["skippedThrough"]) == ms(catch_ups[0]["scheduledAt"]) - MINUTE
    assert skipped["skippedCount"] == (ms(skipped["skippedThrough"]) - missed_from) // MINUTE + 1
    # Nothing ran twice, and the schedule goes on on time after the catch-up
    assert set(harness.target.effects_per_execution(job_id).values()) == {1}
    on_time = sorted((e for e in executions if not e["catchUp"] and e["status"] == "SUCCEEDED"
                      and ms(e["scheduledAt"]) > ms(catch_ups[-1]["scheduledAt"])), key=lambda e: e["scheduledAt"])
    assert on_time and all(e["lateMs"] < 2_000 for e in on_time[1:]), [(e["scheduledAt"], e["lateMs"]) for e in on_time]
    return catch_ups


def test_a_job_paused_for_3_hours_then_resumed_catches_up_the_newest_100_at_10_a_minute(harness):
    job = harness.create_job({"name": "every-minute", "type": "RATE", "schedule": "PT1M", "target": HOOK,
                              "misfirePolicy": CATCH_UP})
    assert job["misfirePolicy"] == CATCH_UP
    harness.advance(150)
    status, paused = harness.request("POST", f"/v1/jobs/{job['jobId']}/pause", {}, KEY_A)
    assert status == 200, paused
    paused_at = harness.clock.now_ms()
    harness.advance(3 * 3600, step_ms=60_000)
    status, _ = harness.request("POST", f"/v1/jobs/{job['jobId']}/resume", {}, KEY_A)
    assert status == 200
    harness.advance(15 * 60)
    first_missed = ms(job["createdAt"]) + ((paused_at - ms(job["createdAt"])) // MINUTE + 1) * MINUTE
    catch_ups = assert_catch_up(harness, job["jobId"], first_missed)
    # released from the resume on: the 100th about 99 x 6 s later
    assert ms(catch_ups[-1]["startedAt"]) - ms(catch_ups[0]["startedAt"]) >= 99 * 6_100 - 1_000


def test_3_hours_without_ticks_catches_up_the_newest_100_at_10_a_minute(harness):
    job = harness.create_job({"name": "every-minute", "type": "RATE", "schedule": "PT1M", "target": HOOK,
                              "misfirePolicy": CATCH_UP})
    harness.advance(150)
    harness.ticks_enabled = False
    outage_from = harness.clock.now_ms()
    harness.advance(3 * 3600, step_ms=60_000)
    harness.ticks_enabled = True
    harness.advance(30 * 60)
    executions = all_executions(harness, job["jobId"])
    # The last tick before the outage looked two minutes ahead: the first missed is within 3 minutes
    [skipped] = [e for e in executions if e["status"] == "SKIPPED"]
    assert outage_from < ms(skipped["scheduledAt"]) <= outage_from + 3 * MINUTE
    # The tick catches up 15 buckets a run, 13 runs for 3 hours: the occurrences due meanwhile go
    # out on time, not as a second catch-up (docs/architecture.md, "Catch-up that does not flood")
    assert_catch_up(harness, job["jobId"], ms(skipped["scheduledAt"]))


def test_the_string_run_all_still_runs_every_missed_occurrence_and_answers_a_string(harness):
    job = harness.create_job({"name": "every-minute", "type": "RATE", "schedule": "PT1M", "target": HOOK,
                              "misfirePolicy": "RUN_ALL"})
    assert job["misfirePolicy"] == "RUN_ALL"
    status, read = harness.request("GET", f"/v1/jobs/{job['jobId']}", key=KEY_A)
    assert read["misfirePolicy"] == "RUN_ALL"
    harness.advance(90)
    harness.ticks_enabled = False
    harness.advance(30 * 60, step_ms=60_000)
    harness.ticks_enabled = True
    harness.advance(10 * 60)
    executions = all_executions(harness, job["jobId"])
    assert not any(e["catchUp"] for e in executions)
    assert Counter(e["status"] for e in executions)["SKIPPED"] == 0
    assert len(executions) >= 40  # every minute of the outage ran


def test_catch_up_bounds_are_422_naming_the_field(harness):
    status, body = harness.request("POST", "/v1/jobs", {"name": "x", "type": "RATE", "schedule": "PT1M",
                                                        "target": HOOK, "misfirePolicy": {"policy": "SKIP",
                                                                                          "maxCatchUp": 5}}, KEY_A)
    assert status == 422 and body["error"]["details"][0]["field"] == "misfirePolicy.maxCatchUp", body
    status, body = harness.request("POST", "/v1/jobs", {"name": "x", "type": "RATE", "schedule": "PT1M",
                                                        "target": HOOK, "misfirePolicy": {
                                                            "policy": "RUN_ALL", "catchUpPerMinute": 601}}, KEY_A)
    assert status == 422 and body["error"]["details"][0]["field"] == "misfirePolicy.catchUpPerMinute", body


def test_the_preview_shows_what_a_catch_up_would_do(harness):
    status, body = harness.request("GET", "/v1/schedule-preview?type=RATE&schedule=PT1M&count=2"
                                          "&maxCatchUp=100&catchUpPerMinute=10", key=KEY_A)
    assert status == 200, body
    assert body["catchUp"] == {"policy": "RUN_ALL", "maxCatchUp": 100, "catchUpPerMinute": 10, "drainSeconds": 604}
    status, body = harness.request("GET", "/v1/schedule-preview?type=RATE&schedule=PT1M&count=2", key=KEY_A)
    assert status == 200 and "catchUp" not in body
    status, body = harness.request("GET", "/v1/schedule-preview?type=RATE&schedule=PT1M&maxCatchUp=0", key=KEY_A)
    assert status == 422 and body["error"]["details"][0]["field"] == "maxCatchUp", body


def test_max_runs_and_a_catch_up_policy_are_refused_together(harness):
    status, body = harness.request("POST", "/v1/jobs", {
        "name": "both", "type": "CRON", "schedule": "* * * * *", "target": {"type": "HTTP", "url": "http://127.0.0.1:9/x"},
        "maxRuns": 5, "misfirePolicy": {"policy": "RUN_ALL", "maxCatchUp": 10, "catchUpPerMinute": 5}})
    assert status == 422 and body["error"]["details"][0]["field"] == "maxRuns", body
