"""A fuzz of the whole HTTP surface, driven by the OpenAPI document the API serves.

schemathesis generates requests for every route (path parameters, query strings, headers and
bodies, both conforming to the document and not); each goes through the real API handler as an
API Gateway event. Every answer is checked by schemathesis against the document: no 5xx, a status
code, a content type and a body the document declares for the route; a request the document
calls valid is not refused as malformed (positive data: no 400), and one it calls invalid is
not accepted (negative data: no 2xx). Any answer that is not the API's JSON error shape fails too.

The run is the same each time (hypothesis derandomized: a fixed seed, no example database) and
bounded (FUZZ_EXAMPLES per route and mode, 15 by default: about a minute); run it longer with
`FUZZ_EXAMPLES=2000 pytest tests/integration/test_fuzz_http_surface.py`."""
import base64
import json
import os
from urllib.parse import urlencode, urlsplit

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.config._checks import NegativeDataRejectionConfig, PositiveDataAcceptanceConfig
from schemathesis.core.transport import Response
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (content_type_conformance, negative_data_rejection,
                                               positive_data_acceptance, response_schema_conformance,
                                               status_code_conformance)

from jobsched.api.openapi import openapi_document
from jobsched.local.events import api_gateway_event, http_response

from .harness import KEY_A, KEY_B

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "15"))
SCHEMA = schemathesis.openapi.from_dict(openapi_document())
# Valid as far as a document can tell: a job or execution id that does not exist (404), a state
# that forbids the action (409), what only the domain can judge (a cron expression, a time zone,
# an instant past the end of time: 422) and a tenant's quota (429) are still answers to it. A 400
# (malformed) is not.
SCHEMA.config.checks.positive_data_acceptance = PositiveDataAcceptanceConfig(
    expected_statuses=["2XX", 401, 404, 409, 413, 422, 429])
SCHEMA.config.checks.negative_data_rejection = NegativeDataRejectionConfig(
    expected_statuses=[400, 401, 404, 409, 413, 422, 429])
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
DOCUMENT_CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
                   response_schema_conformance]

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


def send(harness, request: dict) -> tuple[int, dict[str, str], bytes]:
    """The request as API Gateway hands it to the API function, and the function's answer."""
    parts = urlsplit(request["url"])
    query = urlencode(request.get("params") or {}, doseq=True)
    path = parts.path + (f"?{query}" if query else "") if not parts.query else f"{parts.path}?{parts.query}"
    headers = {k: v for k, v in (request.get("headers") or {}).items() if isinstance(v, str)}
    if "json" in request:
        body = json.dumps(request["json"])
    else:
        data = request.get("data")
        body = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return http_response(harness.api.invoke(api_gateway_event(request["method"], path, headers, body,
                                                              api=harness.api_type)))


def check_against_the_document(case, request: dict, answer: tuple[int, dict[str, str], bytes], checks) -> None:
    status, headers, raw = answer
    sent = requests.Request(request["method"], request["url"], params=request.get("params"),
                            headers=request.get("headers"), json=request.get("json"), data=request.get("data"))
    case.validate_response(Response(status, {k: [v] for k, v in headers.items()}, raw, sent.prepare(), 0.0, True),
                           checks=checks)
    answer_body = json.loads(raw) if raw else None
    assert_clean(status, answer_body, (request["method"], request["url"], request.get("params"), headers))


def assert_clean(status, answer, what):
    assert status < 500, (what, status, answer)
    if status >= 400:
        assert isinstance(answer, dict) and isinstance(answer.get("error"), dict), (what, status, answer)
        assert answer["error"]["message"] and isinstance(answer["error"]["details"], list), (what, answer)


# A job's body is checked against the document's schema, but a schema-valid job may still be
# refused as malformed (400): which schedule fields go with which type, target or steps, a
# timeoutSec over 840 for a target other than ECS_TASK are cross-field rules the document states
# in words only. Its answers are checked against the document all the same.
NOT_DESCRIBED_WHOLE = {("POST", "/v1/jobs"), ("PUT", "/v1/jobs/{jobId}"), ("POST", "/v1/jobs/batch")}
# A batch answers 200 with a result per job: a job the document calls invalid is refused in its own
# result (4xx), never the batch as a whole (shared/API.md: one job's bad input never fails the others).
PER_JOB_ANSWERS = {("POST", "/v1/jobs/batch")}


def refused_somewhere(answer: tuple[int, dict[str, str], bytes]) -> bool:
    status, _, raw = answer
    if status != 200:
        return 400 <= status < 500
    return any(result["status"] >= 400 for result in json.loads(raw)["results"])
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def each_operation(run) -> None:
    """Every operation on one stack (a stack per operation was most of the run's time); each
    operation's failure is reported with its name, after all have run."""
    failures = []
    for operation in OPERATIONS:
        try:
            run(operation)
        except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - schemathesis raises a group
            failures.append(f"{operation.method.upper()} {operation.path}: {exc!r}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_every_route_answers_as_its_document_says(harness, mode):
    """Requests as the document describes them (a tenant's key): valid ones are not refused as
    malformed, invalid ones are not accepted, and every answer is one the document declares."""
    positive = mode is GenerationMode.POSITIVE

    def run_operation(operation):
        if not positive and not operation.body and not any(True for _ in operation.iter_parameters()):
            return  # nothing to get wrong: the route takes no input
        acceptance = positive_data_acceptance if positive else negative_data_rejection
        if positive and (operation.method.upper(), operation.path) in NOT_DESCRIBED_WHOLE:
            acceptance = None
        per_job = not positive and (operation.method.upper(), operation.path) in PER_JOB_ANSWERS
        if per_job:
            acceptance = None  # checked per job below

        @FUZZ
        @given(case=operation.as_strategy(generation_mode=mode))
        def run(case):
            request = case.as_transport_kwargs(base_url="http://127.0.0.1")
            headers = request.setdefault("headers", {})
            if "Authorization" in headers:  # the scheme's header, with a key that exists (none: left out)
                headers["Authorization"] = f"Bearer {KEY_A}"
            if positive:
                (request.get("params") or {}).pop("cursor", None)  # opaque: only a page's nextCursor is one
            checks = [*DOCUMENT_CHECKS, *([acceptance] if acceptance else [])]
            answer = send(harness, request)
            check_against_the_document(case, request, answer, checks)
            assert not per_job or refused_somewhere(answer), (request, answer)

        run()

    each_operation(run_operation)


def test_no_request_to_any_route_answers_a_5xx(harness):
    """What no document describes on top: other tenants' and no keys, forged cursors, numbers in
    other digits; the answer is still one the document declares, never a 5xx."""
    keys = st.sampled_from([KEY_A, KEY_A, KEY_A, KEY_B, None])

    def run_operation(operation):
        strategy = st.one_of(operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
                             operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))

        @FUZZ
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
            check_against_the_document(case, request, send(harness, request), DOCUMENT_CHECKS)

        run()

    each_operation(run_operation)


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
