"""The API's boundary: what it refuses (and how), so that nothing it accepts can break a tenant,
an item or a response."""
import json

import pytest

from jobsched.local.events import api_gateway_event

from .harness import KEY_A
from .test_long_running_and_policies import accepted_job, callback

LAMBDA_RESPONSE_LIMIT = 6 * 1024 * 1024
HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
JOB = '{"name": "n", "type": "RATE", "schedule": "PT1M", "target": {"type": "HTTP", "url": "http://127.0.0.1:9/h"}, '


def fields(answer):
    return [d["field"] for d in answer["error"]["details"]]


@pytest.mark.parametrize("payload", ["NaN", "Infinity", "-Infinity", "1e400", '{"a": 1, "a": 2}'])
def test_json_that_is_not_rfc_8259_is_refused(harness, payload):
    status, answer = harness.request("POST", "/v1/jobs", JOB + f'"payload": {payload}}}')
    assert status == 400 and fields(answer) == ["body"], answer


def test_deeply_nested_json_is_refused_not_a_500(harness):
    nested = "[" * 5000 + "]" * 5000
    status, answer = harness.request("POST", "/v1/jobs", JOB + f'"payload": {nested}}}')
    assert status == 400 and fields(answer) == ["body"]
    status, _ = harness.request("POST", "/v1/jobs", JOB + '"payload": ' + "[" * 40 + "]" * 40 + "}")
    assert status == 400


def test_payload_size_counts_utf8_bytes_not_escapes(harness):
    body = {"name": "n", "type": "RATE", "schedule": "PT1M", "target": HOOK}
    # 100,000 "é" are 200 KB of UTF-8 (600 KB as \u escapes): within the 256 KB limit
    status, _ = harness.request("POST", "/v1/jobs", {**body, "payload": "é" * 100_000})
    assert status == 201
    status, answer = harness.request("POST", "/v1/jobs", {**body, "payload": "é" * 140_000})
    assert status == 413 and fields(answer) == ["payload"]


@pytest.mark.parametrize("name", ["Content-Length", "host", "Transfer-Encoding", "Connection", "X-Execution-Id",
                                  "x-attempt", "X-Jobsched-Signature", "X-Callback-Token", "Content-Type",
                                  "X-Amz-Target", "x-amz-security-token", "X-Amz-Date", "Traceparent"])
def test_headers_the_call_controls_cannot_be_set_by_a_job(harness, name):
    status, answer = harness.request("POST", "/v1/jobs", {"name": "n", "type": "RATE", "schedule": "PT1M",
                                                          "target": {**HOOK, "headers": {name: "1"}}})
    assert status == 400 and fields(answer) == ["target.headers"], answer


@pytest.mark.parametrize("headers", [{"X-A": "v\r\nX-Injected: 1"}, {"Bad Name": "v"}, {"X-Big": "v" * 5000},
                                     {f"X-H{i}": "v" for i in range(40)}, {"X-U": "ünï\u2603"}])
def test_target_headers_are_bounded_and_well_formed(harness, headers):
    status, answer = harness.request("POST", "/v1/jobs", {"name": "n", "type": "RATE", "schedule": "PT1M",
                                                          "target": {**HOOK, "headers": headers}})
    assert status == 400 and fields(answer) == ["target.headers"], answer


def test_reports_of_long_running_targets_are_bounded(harness):
    _, execution_id = accepted_job(harness)
    big = {"blob": "x" * 70_000}
    status, answer = callback(harness, execution_id, "heartbeat", {"progress": big})
    assert status == 413 and fields(answer) == ["progress"]
    status, answer = callback(harness, execution_id, "complete", {"output": big})
    assert status == 413 and fields(answer) == ["output"]
    status, done = callback(harness, execution_id, "complete", {"output": {"blob": "x" * 60_000}})
    assert status == 200 and done["status"] == "SUCCEEDED"


def test_a_list_page_of_large_jobs_stays_under_the_response_limit_and_pages_on(harness):
    created = []
    for i in range(15):
        created.append(harness.create_job({"name": f"big{i}", "type": "RATE", "schedule": "PT1H", "target": HOOK,
                                           "payload": {"blob": '"' * 120_000}}))
        # About 240 write units each on the tenant's partition: a client paced as the throttle
        # answer asks (test_a_throttled_create_answers_503_...) creates four a second.
        harness.clock.advance_ms(300)
    seen, pages, cursor = [], 0, ""
    while True:
        path = "/v1/jobs?limit=100" + (f"&cursor={cursor}" if cursor else "")
        raw = harness.api.invoke(api_gateway_event("GET", path, {"Authorization": f"Bearer {KEY_A}"}, None))
        assert raw["statusCode"] == 200
        assert len(json.dumps(raw)) < LAMBDA_RESPONSE_LIMIT  # what Lambda hands API Gateway
        page = json.loads(raw["body"])
        seen += [j["jobId"] for j in page["items"]]
        pages += 1
        cursor = page["nextCursor"]
        if not cursor:
            break
    assert seen == [j["jobId"] for j in created] and pages >= 2


def test_a_throttled_create_answers_503_with_retry_after_and_its_retry_creates_the_job_once(harness, monkeypatch):
    """Given large jobs created faster than one partition key takes (each about 240 write units,
    against 1,000 a second per partition key; the tenant's job keys made one, so that they land
    on the same key), when the strict layer throttles a write, then the answer is 503 THROTTLED
    with Retry-After (not a 500), and the same request repeated a second later with its
    Idempotency-Key creates the job, once."""
    monkeypatch.setattr("jobsched.domain.jobs.JOB_KEY_SHARDS", 1)
    body = {"name": "big", "type": "RATE", "schedule": "PT1H", "target": HOOK, "payload": {"blob": '"' * 120_000}}
    answers = []
    for i in range(8):
        headers = {"Authorization": f"Bearer {KEY_A}", "Idempotency-Key": f"big-{i}"}
        raw = harness.api.invoke(api_gateway_event("POST", "/v1/jobs", headers, json.dumps({**body, "name": f"big{i}"})))
        answers.append((i, headers, raw))
    throttled = [(i, headers, raw) for i, headers, raw in answers if raw["statusCode"] != 201]
    assert throttled, "eight 240 KB creates within a second of one tenant's partition were all taken"
    for _, _, raw in throttled:
        assert raw["statusCode"] == 503, raw
        headers = raw.get("headers") or {k: v[-1] for k, v in raw.get("multiValueHeaders", {}).items()}
        assert headers["Retry-After"] == "1"
        assert json.loads(raw["body"])["error"]["code"] == "THROTTLED"
    for i, headers, _ in throttled:
        harness.clock.advance_ms(1000)
        raw = harness.api.invoke(api_gateway_event("POST", "/v1/jobs", headers, json.dumps({**body, "name": f"big{i}"})))
        assert raw["statusCode"] == 201, raw
    harness.clock.advance_ms(1000)
    status, listed = harness.request("GET", "/v1/jobs?limit=100")
    assert status == 200
    names = sorted(j["name"] for j in listed["items"])
    assert names == sorted(f"big{i}" for i in range(8))  # each once


@pytest.mark.parametrize("extra,field", [
    ({"type": "ONE_TIME", "runAt": "9999-12-31T23:59:59Z", "jitterSec": 3600}, "runAt"),
    ({"type": "RATE", "schedule": "P1000000W"}, "schedule"),
    ({"type": "RATE", "schedule": "PT1M", "startAt": "9999-12-31T00:00:00Z"}, "startAt"),
    ({"type": "CRON", "schedule": "0 3 * * *", "endAt": "10000-01-01T00:00:00Z"}, "endAt"),
    ({"type": "ONE_TIME", "schedule": "at(9999-12-31T23:59:59)"}, "schedule"),
    ({"type": "ONE_TIME", "runAt": "2030-W01-1T00:00:00Z"}, "runAt"),
])
def test_instants_beyond_the_end_of_time_are_refused_and_the_tenant_keeps_working(harness, extra, field):
    body = {"name": "far", "target": HOOK, **extra}
    status, answer = harness.request("POST", "/v1/jobs", body)
    assert status == 422 and fields(answer) == [field], answer
    status, page = harness.request("GET", "/v1/jobs")
    assert status == 200, page


def test_a_job_at_the_end_of_time_is_stored_listed_and_printed(harness):
    job = harness.create_job({"name": "last", "type": "ONE_TIME", "runAt": "9998-12-31T23:00:00Z",
                              "jitterSec": 3600, "target": HOOK})
    assert job["runAt"] == "9998-12-31T23:00:00Z" and job["nextFireAt"] <= "9999-01-01T00:00:00Z"
    status, page = harness.request("GET", "/v1/jobs")
    assert status == 200 and [j["jobId"] for j in page["items"]] == [job["jobId"]]
    # A recurring schedule's last occurrence is an hour (the most jitter) before the end of time.
    status, preview = harness.request("GET", "/v1/schedule-preview?type=RATE&schedule=PT1H&count=5"
                                             "&after=9998-12-31T21:30:00Z")
    assert status == 200 and preview["fireTimes"] == ["9998-12-31T22:30:00Z"], preview
    # A one-time run whose jitter would pass the end of time is refused, naming jitterSec.
    status, answer = harness.request("POST", "/v1/jobs", {"name": "after", "type": "ONE_TIME", "target": HOOK,
                                                          "runAt": "9999-01-01T00:00:00Z", "jitterSec": 60})
    assert status == 422 and fields(answer) == ["jitterSec"], answer


def _cursor(key) -> str:
    import base64
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode()


@pytest.mark.parametrize("method,path,headers,field", [
    ("POST", "/v1/jobs", {"Idempotency-Key": "k" * 256}, "Idempotency-Key"),
    ("POST", "/v1/jobs", {"Idempotency-Key": "clé"}, "Idempotency-Key"),
    ("GET", "/v1/jobs?limit=%C2%B2", {}, "limit"),  # "²": a digit to str.isdigit(), not to int()
    ("GET", "/v1/jobs?limit=%D9%A3", {}, "limit"),  # Arabic-Indic three
    ("PUT", "/v1/jobs/{job}", {"If-Match": "١"}, "If-Match"),
    ("GET", "/v1/jobs?cursor=" + _cursor({"tenantId": "tenant-a", "jobId": 7}), {}, "cursor"),
    ("GET", "/v1/jobs/{job}/executions?cursor=" + _cursor({"jobId": "{job}", "executionId": ["x"]}), {}, "cursor"),
    ("GET", "/v1/dead-letters?cursor=" + _cursor({"jobId": "j", "executionId": "e", "deadLetterTenant": "tenant-a",
                                                  "deadAtMs": "soon"}), {}, "cursor"),
    ("GET", "/v1/schedule-preview?type=RATE&schedule=PT1S&after=9999-12-31T23:59:59Z", {}, "after"),
    ("GET", "/v1/schedule-preview?type=CRON&schedule=0+0+*+*+*&timezone=" + "A" * 300, {}, "timezone"),
])
def test_bad_headers_query_strings_and_cursors_name_their_field(harness, method, path, headers, field):
    job = harness.create_job({"name": "n", "type": "RATE", "schedule": "PT1M", "target": HOOK})
    path = path.replace("{job}", job["jobId"])
    body = {"name": "n", "type": "RATE", "schedule": "PT1M", "target": HOOK} if method in ("POST", "PUT") else None
    status, answer = harness.request(method, path, body, headers=headers)
    assert status == 400 or status == 422, answer
    assert fields(answer) == [field], answer


def test_an_id_longer_than_any_key_is_not_found_not_a_500(harness):
    status, answer = harness.request("GET", "/v1/jobs/job_" + "x" * 2000)
    assert status == 404, answer
    status, answer = harness.request("POST", "/v1/executions/" + "é" * 600 + "/cancel")
    assert status == 404, answer


@pytest.mark.parametrize("target", [
    {"type": "SNS", "topicArn": "arn:aws:sns:us-east-1:123456789012:tenant-topic"},
    {"type": "EVENTBRIDGE", "eventBusName": "tenant-bus", "source": "tenant.app", "detailType": "tick"},
])
def test_a_payload_that_fits_256_kb_but_not_an_sns_or_eventbridge_target_with_its_envelope_is_refused(
        harness, target):
    payload = "x" * (256 * 1024 - 2 - 10)  # 10 bytes under the API's own limit
    status, body = harness.request("POST", "/v1/jobs", {"name": "big", "type": "DELAYED", "delaySeconds": 60,
                                                        "target": target, "payload": payload})
    assert status == 413 and fields(body) == ["payload"], body
    status, body = harness.request("POST", "/v1/jobs", {"name": "small", "type": "DELAYED", "delaySeconds": 60,
                                                        "target": target, "payload": payload[:-1024]})
    assert status == 201, body
@pytest.mark.parametrize("name", ["a\u0000b", "line\nbreak", "esc\u001b[31m", "c1\u0085"])
def test_a_name_with_nul_or_another_control_character_is_refused(harness, name):
    status, answer = harness.request("POST", "/v1/jobs", {"name": name, "type": "RATE", "schedule": "PT1M",
                                                          "target": HOOK})
    assert status == 400 and fields(answer) == ["name"], answer
    status, answer = harness.request("POST", "/v1/jobs/bulk", {"action": "PAUSE", "filter": {"namePrefix": name}})
    assert status == 400 and fields(answer) == ["filter.namePrefix"], answer



def http_api_event(method: str, path: str, headers: dict[str, str], body: str | None) -> dict:
    """What API Gateway's HTTP API hands the function (payload format 1.0, the $default route and
    stage): header names in lower case, `resource` the route key, no stage in the path (AWS's
    "Create AWS Lambda proxy integrations for HTTP APIs"), as the local stack builds it."""
    event = api_gateway_event(method, path, headers, body, api="http")
    assert event["version"] == "1.0" and event["requestContext"]["stage"] == "$default"
    assert all(name == name.lower() for name in event["headers"]) and event["requestContext"]["path"] == path.split("?")[0]
    return event


def test_the_http_apis_event_reaches_the_same_routes_with_its_lower_case_headers(harness):
    """The stack deploys the HTTP API by default: its events carry `authorization` and
    `content-type` in lower case, and the key check and the routes must not depend on case."""
    job = {"name": "via-http-api", "type": "RATE", "schedule": "PT1M", "target": HOOK}
    headers = {"Authorization": f"Bearer {KEY_A}", "Content-Type": "application/json"}
    created = harness.api.invoke(http_api_event("POST", "/v1/jobs", headers, json.dumps(job)))
    assert created["statusCode"] == 201, created
    job_id = json.loads(created["body"])["jobId"]
    read = harness.api.invoke(http_api_event("GET", f"/v1/jobs/{job_id}?x=1", headers, None))
    assert read["statusCode"] == 200 and json.loads(read["body"])["name"] == "via-http-api"
    refused = harness.api.invoke(http_api_event("GET", f"/v1/jobs/{job_id}", {"authorization": "Bearer nope"}, None))
    assert refused["statusCode"] == 401
    assert harness.api.invoke(http_api_event("GET", "/v1/health", {}, None))["statusCode"] == 200
    # and the REST API's event (`-c api=rest`: a stage in the context, header names as sent) reaches them too
    rest = harness.api.invoke(api_gateway_event("GET", f"/v1/jobs/{job_id}", headers, None, api="rest"))
    assert rest["statusCode"] == 200 and json.loads(rest["body"])["name"] == "via-http-api"
    assert harness.api_type == "http"  # the harness's own requests are the deployed default's events
