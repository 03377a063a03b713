"""A fuzz of the whole HTTP surface, driven by the OpenAPI document the API serves.

schemathesis generates requests for every route (path parameters, query strings, headers and
bodies, both conforming to the document and not); each goes through the real API handler as an
API Gateway event. Any 5xx, or an answer that is not the API's JSON error shape, fails. The
budget in `make test` is small (FUZZ_EXAMPLES per route); run it longer with
`FUZZ_EXAMPLES=2000 make test` or `pytest tests/integration/test_fuzz_http_surface.py`."""
import base64
import json
import os
from urllib.parse import urlencode, urlsplit

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation import GenerationMode

from jobsched.api.openapi import openapi_document

from .harness import KEY_A, KEY_B

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
SCHEMA = schemathesis.openapi.from_dict(openapi_document())
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]

FORGED_CURSORS = [
    base64.urlsafe_b64encode(json.dumps(key).encode()).decode() for key in (
        {"tenantId": "tenant-a", "jobId": 7},
        {"tenantId": ["tenant-a"], "jobId": "job_"},
        {"tenantId": "tenant-a", "jobId": "j" * 5000},
        {"jobId": "job_x", "executionId": {"S": "x"}},
        {"jobId": "job_x", "executionId": "e", "deadLetterTenant": "tenant-a", "deadAtMs": "soon"},
        {"jobId": "job_x", "executionId": "e", "deadLetterTenant": "tenant-a", "deadAtMs": 1e300},
    )
] + ["%%%", "e30", "bnVsbA==", "W10=", "x" * 5000]
NASTY_TEXT = st.sampled_from(["", "٣", "²", "１０", "-1", "99999999999999999999999", "\x00", "a" * 3000, "9" * 19,
                              "\"3\"", "W/\"1\"", "NaN"])


def send(harness, request: dict) -> tuple[int, object]:
    parts = urlsplit(request["url"])
    query = urlencode(request.get("params") or {}, doseq=True)
    path = parts.path + (f"?{query}" if query else "") if not parts.query else f"{parts.path}?{parts.query}"
    headers = {k: v for k, v in (request.get("headers") or {}).items() if isinstance(v, str)}
    if "json" in request:
        body = json.dumps(request["json"])
    else:
        data = request.get("data")
        body = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return harness.request(request["method"], path, body, key=None, headers=headers)


def assert_clean(status, answer, what):
    assert status < 500, (what, status, answer)
    if status >= 400:
        assert isinstance(answer, dict) and isinstance(answer.get("error"), dict), (what, status, answer)
        assert answer["error"]["message"] and isinstance(answer["error"]["details"], list), (what, answer)


@pytest.mark.parametrize("operation", OPERATIONS, ids=[f"{op.method.upper()} {op.path}" for op in OPERATIONS])
def test_no_request_to_any_route_answers_a_5xx(harness, operation):
    keys = st.sampled_from([KEY_A, KEY_A, KEY_A, KEY_B, None])
    strategy = st.one_of(operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
                         operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=strategy, key=keys, cursor=st.none() | st.sampled_from(FORGED_CURSORS),
           limit=st.none() | NASTY_TEXT, if_match=st.none() | NASTY_TEXT)
    def run(case, key, cursor, limit, if_match):
        request = case.as_transport_kwargs(base_url="http://127.0.0.1")
        headers = request.setdefault("headers", {})
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        if if_match is not None:
            headers["If-Match"] = if_match
        params = request.setdefault("params", {})
        if cursor is not None:
            params["cursor"] = cursor
        if limit is not None:
            params["limit"] = limit
        status, answer = send(harness, request)
        assert_clean(status, answer, (request["method"], request["url"], params, headers))

    run()


def test_an_exception_inside_a_route_is_a_500_in_the_error_shape_and_counted(harness, monkeypatch, capsys):
    from jobsched.service import jobs

    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(jobs.JobsService, "list", broken)
    status, answer = harness.request("GET", "/v1/jobs")
    assert status == 500 and answer["error"]["code"] == "INTERNAL", answer
    assert "a bug" not in json.dumps(answer)
    printed = capsys.readouterr().out
    assert '"Api5xx":[1.0]' in printed.replace(" ", "")
