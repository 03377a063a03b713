"""The API's answers to bad input: clear 4xx with the error shape, never a 500."""
import pytest

from jobsched.domain.schedule import format_instant

GOOD = {"name": "ok", "type": "DELAYED", "delaySeconds": 60,
        "target": {"type": "HTTP", "url": "https://example.com/hook"}}


def with_(**changes):
    body = {**GOOD, **changes}
    return {k: v for k, v in body.items() if v is not None}


def test_health_needs_no_key_and_tells_the_layout_only_to_a_key(harness):
    # Public: the status alone (no region, no segments: the deployment's layout is not public).
    status, body = harness.request("GET", "/v1/health", key=None)
    assert (status, body) == (200, {"status": "ok"})
    # API.md, "Regions": with a valid key, the region and the segments it owns (a single region
    # owns them all); a bad key gets the public answer.
    status, body = harness.request("GET", "/v1/health")
    assert (status, body["status"], body["region"]) == (200, "ok", "us-east-1")
    assert body["ownedSegments"] == list(range(harness.settings.segments))
    assert harness.request("GET", "/v1/health", key="wrong-key") == (200, {"status": "ok"})


@pytest.mark.parametrize("key", [None, "wrong-key"])
def test_missing_or_bad_key_answers_401(harness, key):
    status, body = harness.request("POST", "/v1/jobs", GOOD, key=key)
    assert status == 401 and body["error"]["code"] == "UNAUTHORIZED"


@pytest.mark.parametrize("body,field", [
    ('{"name": "x",', "body"),
    ("[1, 2]", "body"),
    (with_(name=None), "name"),
    (with_(name="x" * 129), "name"),
    (with_(delaySeconds="60"), "delaySeconds"),
    (with_(type="WEEKLY"), "type"),
    (with_(target={"type": "HTTP", "url": "ftp://example.com/x"}), "target.url"),
    (with_(target={"type": "HTTP"}), "target.url"),
    (with_(target={"type": "PIGEON"}), "target"),
    (with_(priority="URGENT"), "priority"),
    (with_(unknownField=1), "unknownField"),
    (with_(type="ONE_TIME", delaySeconds=None), "runAt"),
    (with_(runAt="2030-01-01T00:00:00Z"), "runAt"),
])
def test_malformed_requests_answer_400_naming_the_field(harness, body, field):
    status, answer = harness.request("POST", "/v1/jobs", body)
    assert status == 400, answer
    error = answer["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert field in [d["field"] for d in error["details"]], error


@pytest.mark.parametrize("changes,field", [
    ({"type": "CRON", "delaySeconds": None, "schedule": "0 25 * * *"}, "schedule"),
    ({"type": "CRON", "delaySeconds": None, "schedule": "0 3 * * *", "timezone": "Nowhere/City"}, "timezone"),
    ({"type": "RATE", "delaySeconds": None, "schedule": "P1M"}, "schedule"),
    ({"type": "ONE_TIME", "delaySeconds": None, "runAt": "2020-01-01T00:00:00Z"}, "runAt"),
    ({"type": "ONE_TIME", "delaySeconds": None, "runAt": "tomorrow"}, "runAt"),
    ({"type": "RATE", "delaySeconds": None, "schedule": "PT5M", "startAt": "2030-01-02T00:00:00Z",
      "endAt": "2030-01-01T00:00:00Z"}, "endAt"),
])
def test_well_formed_but_invalid_requests_answer_422(harness, changes, field):
    status, answer = harness.request("POST", "/v1/jobs", with_(**changes))
    assert status == 422, answer
    assert [d["field"] for d in answer["error"]["details"]] == [field]


def test_payload_over_256_kb_answers_413(harness):
    status, answer = harness.request("POST", "/v1/jobs", with_(payload={"blob": "x" * (256 * 1024)}))
    assert status == 413 and answer["error"]["details"][0]["field"] == "payload"


def test_one_time_job_a_little_in_the_past_runs_at_once(harness):
    past = harness.clock.now_ms() - 30_000
    job = harness.create_job(with_(type="ONE_TIME", delaySeconds=None, runAt=format_instant(past)))
    harness.advance(3)
    calls = harness.target.calls_for(job["jobId"])
    assert len(calls) == 1 and calls[0].at_ms - harness.clock.now_ms() > -3000


def test_created_job_has_the_documented_shape(harness):
    job = harness.create_job(with_(type="CRON", delaySeconds=None, schedule="0 3 * * *",
                                   timezone="America/Los_Angeles", payload={"a": [1, 2.5, None]}))
    assert job["jobId"].startswith("job_")
    assert {k: job[k] for k in ("name", "type", "schedule", "timezone", "state", "version", "priority")} == {
        "name": "ok", "type": "CRON", "schedule": "0 3 * * *", "timezone": "America/Los_Angeles",
        "state": "ACTIVE", "version": 1, "priority": "NORMAL"}
    assert job["nextFireAt"] == "2030-01-01T11:00:00Z"  # 03:00 in Los Angeles
    assert job["payload"] == {"a": [1, 2.5, None]}
    assert job["retryPolicy"] == {"maxAttempts": 3, "backoff": "EXPONENTIAL", "initialDelayMs": 1000,
                                  "maxDelayMs": 3600000}
    assert job["createdAt"].endswith("Z") and job["timeoutSec"] == 300
    status, fetched = harness.request("GET", f"/v1/jobs/{job['jobId']}")
    assert status == 200 and fetched == job


def test_unknown_route_and_unknown_job_answer_404(harness):
    assert harness.request("GET", "/v1/nothing")[0] == 404
    status, body = harness.request("GET", "/v1/jobs/job_doesnotexist")
    assert status == 404 and body["error"]["code"] == "NOT_FOUND"
    assert harness.request("GET", "/v1/executions/garbage")[0] == 404


def test_execution_list_paginates_newest_first(harness):
    job = harness.create_job(with_(type="RATE", delaySeconds=None, schedule="PT10S"))
    harness.advance(65)
    _, first = harness.request("GET", f"/v1/jobs/{job['jobId']}/executions?limit=4")
    assert len(first["items"]) == 4 and first["nextCursor"]
    scheduled = [e["scheduledAt"] for e in first["items"]]
    assert scheduled == sorted(scheduled, reverse=True)
    _, second = harness.request("GET", f"/v1/jobs/{job['jobId']}/executions?limit=4&cursor={first['nextCursor']}")
    assert [e["scheduledAt"] for e in second["items"]][0] < scheduled[-1]
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}/executions?limit=0")[0] == 400
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}/executions?cursor=zzz")[0] == 400
