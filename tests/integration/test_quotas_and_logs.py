"""Tenant quotas answer 429; secrets never reach the logs."""
import io
import json

from jobsched.handlers import api
from jobsched.local.events import Function, api_gateway_event, http_response
from jobsched.settings import Env

from .harness import KEY_A, KEY_B

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
BODY = {"name": "q", "type": "RATE", "schedule": "PT1H", "target": HOOK}


def limited_api(harness, **limits):
    env = {**harness.envs["api"], **{getattr(Env, k): str(v) for k, v in limits.items()}}
    return Function("api", api.make_handler(env, harness.clock, harness.session))


def call(function, method, path, body=None, key=KEY_A, headers=None):
    all_headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **(headers or {})}
    status, _, raw = http_response(function.invoke(api_gateway_event(method, path, all_headers,
                                                                     json.dumps(body) if body else None)))
    return status, json.loads(raw)


def test_active_jobs_quota_answers_429_and_frees_up_when_a_job_ends(harness):
    limited = limited_api(harness, MAX_ACTIVE_JOBS=2)
    first = call(limited, "POST", "/v1/jobs", BODY)[1]
    call(limited, "POST", "/v1/jobs", BODY)
    status, answer = call(limited, "POST", "/v1/jobs", BODY)
    assert status == 429 and answer["error"]["code"] == "QUOTA_EXCEEDED" and "2 jobs" in answer["error"]["message"]
    assert call(limited, "POST", "/v1/jobs", BODY, key=KEY_B)[0] == 201  # quotas are per tenant
    call(limited, "DELETE", f"/v1/jobs/{first['jobId']}")
    assert call(limited, "POST", "/v1/jobs", BODY)[0] == 201
    one_off = {"name": "o", "type": "DELAYED", "delaySeconds": 5, "target": HOOK}
    assert call(limited, "POST", "/v1/jobs", one_off)[0] == 429
    active = call(limited, "GET", "/v1/jobs?state=ACTIVE")[1]["items"]
    call(limited, "DELETE", f"/v1/jobs/{active[0]['jobId']}")
    assert call(limited, "POST", "/v1/jobs", one_off)[0] == 201
    harness.advance(8)  # the one-off runs and completes: its place is given back
    assert call(limited, "POST", "/v1/jobs", BODY)[0] == 201


def test_creates_per_second_quota_answers_429_until_the_next_second(harness):
    limited = limited_api(harness, MAX_CREATES_PER_SECOND=3)
    statuses = [call(limited, "POST", "/v1/jobs", BODY)[0] for _ in range(5)]
    assert statuses == [201, 201, 201, 429, 429]
    harness.clock.advance_ms(1000)
    assert call(limited, "POST", "/v1/jobs", BODY)[0] == 201


def test_api_keys_authorization_headers_and_callback_tokens_never_reach_the_logs(harness, capsys):
    logged = io.StringIO()
    for handler in api.logger._logger.handlers:
        handler.setStream(logged)
    api.logger.setLevel("DEBUG")
    try:
        harness.create_job(BODY)
        harness.request("GET", "/v1/jobs")
        harness.request("GET", "/v1/jobs", key="wrong-secret-key")
        harness.request("POST", "/v1/executions/job_x.1/heartbeat", {}, key=None,
                        headers={"X-Callback-Token": "callback-secret"})
    finally:
        api.logger.setLevel("INFO")
    output = logged.getvalue() + capsys.readouterr().out
    assert "job created" in output and '"tenantId":"tenant-a"' in output.replace(" ", "")
    for secret in (KEY_A, "wrong-secret-key", "callback-secret", "Bearer"):
        assert secret not in output


def test_api_metrics_count_requests_and_errors_by_route(harness, capsys):
    harness.create_job(BODY)
    harness.request("GET", "/v1/jobs/job_missing")
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    by_route = {(line.get("route"), name) for line in lines for name in ("ApiRequests", "Api4xx") if name in line}
    assert ("create_job", "ApiRequests") in by_route
    assert ("get_job", "Api4xx") in by_route
