"""GET /v1/jobs/{jobId}/occurrences: every nominal occurrence of a window has one answer (FIRED,
SKIPPED with its reason, PENDING, NOT_FIRED), each reason produced here by a scenario."""
from jobsched.domain.schedule import format_instant

from .harness import ACCEPTED, KEY_B

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
MINUTE = 60_000


def ledger(harness, job_id: str, from_ms: int, to_ms: int, **query) -> list[dict]:
    extra = "".join(f"&{k}={v}" for k, v in query.items())
    status, body = harness.request(
        "GET", f"/v1/jobs/{job_id}/occurrences?from={format_instant(from_ms)}&to={format_instant(to_ms)}{extra}")
    assert status == 200, body
    return body["items"]


def answers(rows: list[dict]) -> list[tuple]:
    return [(r["outcome"], r["reason"]) for r in rows]


def minute_start(harness) -> int:
    return harness.clock.now_ms() // MINUTE * MINUTE


def test_a_paused_job_answers_paused_for_what_it_missed(harness):
    # Given a once-a-minute job that fired twice, was paused for three minutes, then resumed
    start = minute_start(harness)
    job = harness.create_job({"name": "p", "type": "CRON", "schedule": "* * * * *", "target": HOOK})
    harness.advance(2 * 60)
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/pause", {"reason": "partner maintenance"})[0] == 200
    harness.advance(3 * 60)
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/resume")[0] == 200
    harness.advance(2 * 60)
    # When its ledger of those minutes and the next two is read
    rows = ledger(harness, job["jobId"], start, start + 10 * MINUTE)
    # Then each occurrence says what became of it: fired, paused, fired again, not due yet
    assert answers(rows) == [("FIRED", None)] * 2 + [("SKIPPED", "PAUSED")] * 3 + [("FIRED", None)] * 2 + [
        ("PENDING", None)] * 2
    fired = rows[0]
    assert fired["status"] == "SUCCEEDED" and fired["executionId"].startswith(job["jobId"]) and fired["lateMs"] >= 0
    assert rows[2]["scheduledAt"] == format_instant(start + 3 * MINUTE) and "paused" in rows[2]["detail"]


def test_an_overlapped_occurrence_answers_overlap(harness):
    # Given a job that skips while its previous run goes on, whose first run is long-running
    start = harness.clock.now_ms()
    job = harness.create_job({"name": "o", "type": "RATE", "schedule": "PT20S", "target": HOOK,
                              "overlapPolicy": "SKIP", "heartbeatTimeoutSec": 600})
    harness.target.script[job["jobId"]] = [ACCEPTED]
    harness.advance(65)
    rows = ledger(harness, job["jobId"], start, start + 65_000)
    assert answers(rows) == [("FIRED", None), ("SKIPPED", "OVERLAP"), ("SKIPPED", "OVERLAP")]
    assert rows[0]["status"] == "RUNNING" and rows[1]["status"] == "SKIPPED"


def test_occurrences_before_start_and_after_end(harness):
    start = minute_start(harness)
    job = harness.create_job({"name": "b", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                              "startAt": format_instant(start + 3 * MINUTE),
                              "endAt": format_instant(start + 5 * MINUTE)})
    harness.advance(7 * 60)
    rows = ledger(harness, job["jobId"], start, start + 7 * MINUTE)
    assert answers(rows) == [("SKIPPED", "BEFORE_START")] * 2 + [("FIRED", None)] * 2 + [
        ("SKIPPED", "AFTER_END")] * 2


def test_missed_while_the_scheduler_was_behind(harness):
    # misfirePolicy SKIP records each missed occurrence; RUN_ONCE runs one late and the others are it
    start = minute_start(harness)
    skip = harness.create_job({"name": "s", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                               "misfirePolicy": "SKIP"})
    once = harness.create_job({"name": "r", "type": "CRON", "schedule": "* * * * *", "target": HOOK})
    harness.ticks_enabled = False
    harness.advance(5 * 60)
    harness.ticks_enabled = True
    harness.advance(60)
    # (00:01 and 00:02 were handed off before the outage; the tick is back at 00:06, when 00:05 is
    # within the misfire grace)
    skipped = ledger(harness, skip["jobId"], start + MINUTE, start + 6 * MINUTE)
    assert answers(skipped) == [("FIRED", None)] * 2 + [("SKIPPED", "MISSED_WINDOW")] * 2 + [("FIRED", None)]
    coalesced = ledger(harness, once["jobId"], start + 3 * MINUTE, start + 7 * MINUTE)
    assert coalesced[0]["outcome"] == "FIRED" and coalesced[0]["lateMs"] >= 3 * MINUTE
    assert answers(coalesced[1:]) == [("SKIPPED", "DEDUPLICATED")] * 3
    assert coalesced[1]["executionId"] == coalesced[0]["executionId"]


def test_a_catch_up_beyond_max_catch_up_answers_missed_window(harness):
    start = minute_start(harness)
    job = harness.create_job({"name": "c", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                              "misfirePolicy": {"policy": "RUN_ALL", "maxCatchUp": 2, "catchUpPerMinute": 60}})
    harness.ticks_enabled = False
    harness.advance(6 * 60)
    harness.ticks_enabled = True
    harness.advance(3 * 60)
    rows = ledger(harness, job["jobId"], start + MINUTE, start + 7 * MINUTE)
    reasons = answers(rows)
    assert ("SKIPPED", "MISSED_WINDOW") in reasons and reasons.count(("FIRED", None)) >= 2
    assert all(r[0] in ("FIRED", "SKIPPED") for r in reasons), reasons


def test_excluded_dates(harness):
    day = format_instant(harness.clock.now_ms())[:10]
    assert harness.request("PUT", "/v1/calendars/today", {"dates": [day]})[0] == 200
    start = minute_start(harness)
    job = harness.create_job({"name": "e", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                              "excludeCalendars": ["today"]})
    harness.advance(3 * 60)
    assert answers(ledger(harness, job["jobId"], start + MINUTE, start + 3 * MINUTE)) == [("SKIPPED", "EXCLUDED")] * 2


def test_cancelled_and_max_runs_reached(harness):
    start = minute_start(harness)
    cancelled = harness.create_job({"name": "x", "type": "CRON", "schedule": "* * * * *", "target": HOOK})
    limited = harness.create_job({"name": "m", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                                  "maxRuns": 2})
    harness.advance(2 * 60)
    assert harness.request("DELETE", f"/v1/jobs/{cancelled['jobId']}")[0] == 200
    harness.advance(3 * 60)
    # (00:00 is before the jobs were created, at 00:00:05: not theirs)
    assert answers(ledger(harness, cancelled["jobId"], start, start + 5 * MINUTE)) == [("FIRED", None)] * 2 + [
        ("SKIPPED", "CANCELLED")] * 2
    assert answers(ledger(harness, limited["jobId"], start, start + 5 * MINUTE)) == [("FIRED", None)] * 2 + [
        ("SKIPPED", "MAX_RUNS_REACHED")] * 2


def test_pages_follow_the_cursor_and_bad_windows_name_the_field(harness):
    start = minute_start(harness)
    job = harness.create_job({"name": "g", "type": "CRON", "schedule": "* * * * *", "target": HOOK})
    path = f"/v1/jobs/{job['jobId']}/occurrences?from={format_instant(start)}&to={format_instant(start + 5 * MINUTE)}"
    status, first = harness.request("GET", path + "&limit=3")
    assert status == 200 and len(first["items"]) == 3 and first["nextCursor"]
    status, rest = harness.request("GET", path + f"&limit=3&cursor={first['nextCursor']}")
    assert [r["scheduledAt"] for r in first["items"] + rest["items"]] == [
        format_instant(start + i * MINUTE) for i in range(1, 5)] and rest["nextCursor"] is None
    for query, code, field in (("from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z", 422, "to"),
                               ("from=2030-01-01T00:00:00Z&to=2030-02-02T00:00:00Z", 422, "to"),
                               ("from=yesterday&to=2030-01-01T00:00:00Z", 422, "from"),
                               ("cursor=nope", 400, "cursor"), ("limit=101", 400, "limit")):
        status, body = harness.request("GET", f"/v1/jobs/{job['jobId']}/occurrences?{query}")
        assert status == code and body["error"]["details"][0]["field"] == field, (query, body)
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}/occurrences", key=KEY_B)[0] == 404
    # A cursor past the window (well-formed, forged) answers an empty page, not a 5xx
    import base64
    import json
    far = base64.urlsafe_b64encode(json.dumps({"after": 2 ** 62}).encode()).decode()
    status, body = harness.request("GET", path + f"&cursor={far}")
    assert status == 200 and body["items"] == [] and body["nextCursor"] is None
    status, body = harness.request("GET", f"/v1/jobs/{job['jobId']}/occurrences?to=1970-01-01T00:00:01Z")
    assert status == 200 and body["from"] == "1970-01-01T00:00:00Z"
