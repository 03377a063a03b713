"""The Python client's retries and answers with a scripted transport: Retry-After on 429 and 503
is honoured (never sooner, a quarter more at most), bounded; no answer is retried only where a
repeat cannot act twice; an answer from a newer server (a field or a value this version does not
know) still reads."""
import json
import re

import pytest

from jobsched.api import schemas
from jobsched.client import (Client, InvalidRequestError, Response, Retries, ServiceUnavailableError, RateLimitError,
                             dump)

from .api_answers import JOB

class Scripted:
    """Answers in turn (a Response, or an exception to raise), recording each request."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests = []

    def __call__(self, method, url, headers, body, timeout):
        self.requests.append((method, url, dict(headers), body))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def answer(status, body=None, **headers):
    return Response(status, {k.replace("_", "-"): v for k, v in headers.items()},
                    json.dumps(body).encode() if body is not None else b"")


def throttled(status=503, **headers):
    return answer(status, {"error": {"code": "THROTTLED", "message": "retry shortly", "details": []}}, **headers)


def client_with(transport, **retries):
    slept = []
    options = {"jitter": lambda: 0.0, **retries}
    return Client("http://api", "key", transport=transport, retries=Retries(sleep=slept.append, **options)), slept


def test_retry_after_on_503_and_429_is_waited_for_then_the_answer_is_returned():
    transport = Scripted(throttled(503, Retry_After="2"), throttled(429), answer(200, JOB))
    client, slept = client_with(transport)
    assert client.jobs.get("job_1").jobId == "job_1"
    assert slept == [2.0, 1.0]  # the 503's Retry-After; the 429 named none: the backoff (0.5 s doubled)
    assert len(transport.requests) == 3


def test_the_jitter_adds_at_most_a_quarter_and_never_waits_less_than_asked():
    client, slept = client_with(Scripted(throttled(Retry_After="4"), answer(200, JOB)), jitter=lambda: 0.999)
    client.jobs.get("job_1")
    assert 4.0 <= slept[0] < 5.0


def test_an_http_date_retry_after_is_read_against_the_clock():
    client, slept = client_with(Scripted(throttled(Retry_After="Thu, 01 Jan 2026 00:00:03 GMT"), answer(200, JOB)),
                                now=lambda: 1767225600.0)  # 2026-01-01T00:00:00Z
    client.jobs.get("job_1")
    assert slept == [3.0]
    # against the answer's own Date when it has one: a skewed local clock does not count
    client, slept = client_with(Scripted(throttled(Retry_After="Thu, 01 Jan 2026 00:00:03 GMT",
                                                   Date="Thu, 01 Jan 2026 00:00:01 GMT"), answer(200, JOB)),
                                now=lambda: 0.0)
    client.jobs.get("job_1")
    assert slept == [2.0]


def test_the_retries_are_bounded_and_a_long_retry_after_is_not_waited_for():
    client, slept = client_with(Scripted(*[throttled()] * 4), max_retries=3)
    with pytest.raises(ServiceUnavailableError) as unavailable:
        client.jobs.get("job_1")
    assert unavailable.value.code == "THROTTLED" and slept == [0.5, 1.0, 2.0]
    client, slept = client_with(Scripted(throttled(429, Retry_After="3600")))
    with pytest.raises(RateLimitError) as limited:
        client.jobs.get("job_1")
    assert slept == [] and limited.value.headers["Retry-After"] == "3600"


def test_no_answer_is_retried_for_a_create_with_its_key_but_not_for_a_post_without_one():
    transport = Scripted(ConnectionRefusedError("refused"), answer(201, JOB))
    client, slept = client_with(transport)
    client.jobs.create({"name": "n"})
    assert transport.requests[0][2]["Idempotency-Key"] == transport.requests[1][2]["Idempotency-Key"]
    client, slept = client_with(Scripted(ConnectionResetError("reset")))
    with pytest.raises(ServiceUnavailableError) as unreachable:
        client.executions.cancel("job_1.1")  # cancel carries no key: a repeat is not known to be harmless
    assert unreachable.value.status == 0 and unreachable.value.code == "UNREACHABLE" and slept == []


def test_other_errors_are_raised_at_once_with_their_envelope():
    body = {"error": {"code": "VALIDATION_ERROR", "message": "invalid request",
                      "details": [{"field": "schedule", "message": "not a cron expression"}]}}
    client, slept = client_with(Scripted(answer(422, body)))
    with pytest.raises(InvalidRequestError) as invalid:
        client.jobs.create({"name": "n"})
    assert slept == [] and invalid.value.fields == {"schedule": "not a cron expression"}
    assert invalid.value.envelope == body
    assert str(invalid.value) == "422 VALIDATION_ERROR: invalid request (schedule: not a cron expression)"


def test_an_answer_from_a_newer_server_reads_and_dumps_back_as_sent():
    newer = {**JOB, "state": "ARCHIVED", "someNewField": {"a": 1},
             "retryPolicy": {**JOB["retryPolicy"], "newKnob": 2}}
    client, _ = client_with(Scripted(answer(200, newer)))
    job = client.jobs.get("job_1")
    assert isinstance(job, schemas.Job) and job.state == "ARCHIVED" and job.someNewField == {"a": 1}
    assert dump(job) == newer


def test_requests_are_the_apis_models_sent_as_it_reads_them():
    from jobsched.client import BackfillRequest, JobRequest

    transport = Scripted(answer(201, JOB), answer(202, {"count": 0, "executionIds": []}))
    client, _ = client_with(transport)
    client.jobs.create(JobRequest(name="n", type="RATE", schedule="PT5M",
                                  target={"type": "HTTP", "url": "https://example.com/h"}))
    # Only the fields given: the API's defaults apply on its side
    assert json.loads(transport.requests[0][3]) == {"name": "n", "type": "RATE", "schedule": "PT5M",
                                                    "target": {"type": "HTTP", "url": "https://example.com/h"}}
    client.jobs.backfill("job/1", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z")
    method, url, _, body = transport.requests[1]
    assert url == "http://api/v1/jobs/job%2F1/backfill"  # an id is one path segment, whatever it holds
    assert json.loads(body) == {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}
    with pytest.raises(TypeError):
        client.jobs.create(BackfillRequest.model_validate({"from": "a", "to": "b"}))


def test_the_client_has_a_call_for_every_route_of_the_api():
    """Each route of the API's table (api/routes.py), by method and path, is some call of the
    client: a route added to the API without one fails here."""
    from jobsched.api.routes import ROUTES
    from jobsched.client import BulkRequest

    transport = Scripted(*[answer(200, {})] * 64)
    client, _ = client_with(transport)
    calls = [
        lambda: client.jobs.create({}), lambda: client.jobs.create_batch([{}]), lambda: client.jobs.list(),
        lambda: client.jobs.bulk(BulkRequest(action="PAUSE")), lambda: client.jobs.get("j"),
        lambda: client.jobs.replace("j", {}), lambda: client.jobs.delete("j"), lambda: client.jobs.pause("j", "r"),
        lambda: client.jobs.backfill("j", "a", "b"), lambda: client.jobs.resume("j"), lambda: client.jobs.trigger("j"),
        lambda: client.executions.list("j"), lambda: client.jobs.stats("j"), lambda: client.jobs.occurrences("j"),
        lambda: client.executions.get("e"), lambda: client.executions.cancel("e"),
        lambda: client.callbacks.heartbeat("e", "t"), lambda: client.callbacks.complete("e", "t"),
        lambda: client.callbacks.fail("e", "t"), lambda: client.dead_letters.list(),
        lambda: client.executions.redrive("e"), lambda: client.preview("PT5M"),
        lambda: client.calendars.put("c", []), lambda: client.calendars.list(), lambda: client.calendars.get("c"),
        lambda: client.calendars.delete("c"), lambda: client.signing.rotate(), lambda: client.health(),
    ]
    for call in calls:
        try:
            result = call()
            if hasattr(result, "pages"):
                next(result.pages())
        except Exception:  # noqa: BLE001 - {} is no valid answer; the request was sent, which is the point
            pass
    templates = {(r.method, re.sub(r"\{[^}]+\}", "[^/]+", r.path)) for r in ROUTES if r.name != "openapi"}
    sent = {(method, url[len("http://api"):].split("?")[0]) for method, url, _, _ in transport.requests}
    missing = {t for t in templates if not any(m == t[0] and re.fullmatch(t[1], p) for m, p in sent)}
    assert not missing, missing
