"""Retry hygiene: a 4xx other than 408 and 429 is not retried unless the job asks; Retry-After on
429 and 503 sets the next attempt's wait, bounded by the policy's maximum delay."""
import email.utils
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobsched.adapters.http_target import HttpTargetInvoker, NOT_RETRIED_NOTE, parse_retry_after
from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
from jobsched.domain.retry import RetryPolicy
from jobsched.domain.schedule import one_time_schedule
from jobsched.service.outcomes import retry_delay


class Answer(BaseHTTPRequestHandler):
    status, headers = 200, {}

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(Answer.status)
        for name, value in Answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"no")

    def log_message(self, *args):
        pass


@pytest.fixture
def url():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/hook"
    httpd.shutdown()


def call(url, status, headers=None, retry_on_4xx=False):
    Answer.status, Answer.headers = status, headers or {}
    spec = JobSpec(name="t", schedule=one_time_schedule(0), target=Target(TargetType.HTTP, {"url": url}),
                   retry_on_4xx=retry_on_4xx)
    job = Job("tenant", "job_abc", spec, JobState.ACTIVE, 1, 1, 0, 0)
    return HttpTargetInvoker(allow_private=True).invoke(
        job, Dispatch(DispatchKind.FIRE, "tenant", "job_abc", "job_abc.0000000000001", 1, 1, 1), 1)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_a_4xx_other_than_408_and_429_is_not_retried(url, status):
    outcome = call(url, status)
    assert not outcome.ok and not outcome.retryable and NOT_RETRIED_NOTE in outcome.error
    assert call(url, status, retry_on_4xx=True).retryable  # unless the job asks


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
def test_408_429_and_5xx_are_retried(url, status):
    outcome = call(url, status)
    assert not outcome.ok and outcome.retryable and outcome.retry_after_ms is None


def test_retry_after_on_429_and_503_is_read(url):
    assert call(url, 429, {"Retry-After": "7"}).retry_after_ms == 7000
    # an HTTP date counts from the answer's own Date header (whole seconds)
    wait = call(url, 503, {"Retry-After": email.utils.formatdate(time.time() + 120, usegmt=True)}).retry_after_ms
    assert 118_000 <= wait <= 121_000
    assert call(url, 500, {"Retry-After": "7"}).retry_after_ms is None  # only 429 and 503 say it


@pytest.mark.parametrize("value, date, expected", [
    ("0", None, 0), (" 30 ", None, 30_000), ("soon", None, None), ("", None, None), (None, None, None),
    ("Wed, 21 Oct 2026 07:27:00 GMT", "Wed, 21 Oct 2026 07:28:00 GMT", 0),  # in the past: at once
])
def test_retry_after_values(value, date, expected):
    assert parse_retry_after(value, date) == expected


def test_the_wait_asked_for_is_bounded_by_the_policys_maximum_delay():
    policy = RetryPolicy(max_attempts=5, initial_delay_ms=1000, max_delay_ms=60_000)
    assert retry_delay(policy, 2, 0.5, 20_000) == 20_000
    assert retry_delay(policy, 2, 0.5, 3_600_000) == 60_000
    assert retry_delay(policy, 2, 0.5, None) == policy.delay_before(2, 0.5)
