"""Signed calls: real HTTP calls from the worker, verified the way a target would (a few lines,
with a replay window), across a rotation and its grace."""
import hashlib
import hmac

import pytest

from jobsched.handlers import worker
from jobsched.local.events import Function, sqs_event

from .harness import QuietHandler, loopback
from .test_faults import take_messages

ARN = "arn:aws:sqs:us-east-1:123456789012:lane"


def verify(header: str, body: bytes, secret: str, now_s: int, window_s: int = 300) -> bool:
    """What a target does: check the timestamp is recent, then any v1 signature."""
    fields = [part.split("=", 1) for part in header.split(",")]
    t = int(dict(fields)["t"])
    if abs(now_s - t) > window_s:
        return False  # a replay of an old call
    expected = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return any(key == "v1" and hmac.compare_digest(expected, value) for key, value in fields)


class Target(QuietHandler):
    calls: list = []

    def on_post(self, body: bytes) -> None:
        Target.calls.append((self.headers.get("X-Jobsched-Signature"), body))


@pytest.fixture
def target_url():
    Target.calls = []
    with loopback(Target) as url:
        yield url


def call_once(harness, job_id):
    """Trigger the job and run its message through a worker with the real HTTP target."""
    harness.clock.set_ms(harness.clock.now_ms() + 1000)  # a trigger's id is its millisecond: a new one
    calls = len(Target.calls)
    assert harness.request("POST", f"/v1/jobs/{job_id}/trigger")[0] == 202
    real = Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session))
    real.invoke(sqs_event(take_messages(harness), ARN))
    assert len(Target.calls) == calls + 1
    return Target.calls[-1]


def test_calls_are_signed_with_the_tenants_secret_and_both_secrets_during_a_rotation(harness, target_url):
    job = harness.create_job({"name": "signed", "type": "CRON", "schedule": "0 3 * * *", "payload": {"a": 1},
                              "target": {"type": "HTTP", "url": target_url}})
    status, first = harness.request("POST", "/v1/signing-secrets/rotate", {})
    assert status == 201 and first["secret"].startswith("whsec_") and first["previousValidUntil"] is None
    header, body = call_once(harness, job["jobId"])
    now = harness.clock.now_ms() // 1000
    assert body == b'{"a":1}' and verify(header, body, first["secret"], now)
    assert not verify(header, body, "whsec_wrong", now)  # a wrong secret fails
    assert not verify(header, body, first["secret"], now + 3600)  # a replay an hour later fails
    assert not verify(header, body + b" ", first["secret"], now)  # a changed body fails

    status, second = harness.request("POST", "/v1/signing-secrets/rotate", {"graceSec": 600})
    assert status == 201 and second["previousValidUntil"] is not None
    header, body = call_once(harness, job["jobId"])  # a new container: no cached secrets
    now = harness.clock.now_ms() // 1000
    assert header.count("v1=") == 2  # in grace: both sign
    assert verify(header, body, second["secret"], now) and verify(header, body, first["secret"], now)

    harness.clock.set_ms(harness.clock.now_ms() + 601_000)  # the grace is over
    header, body = call_once(harness, job["jobId"])
    now = harness.clock.now_ms() // 1000
    assert header.count("v1=") == 1 and verify(header, body, second["secret"], now)
    assert not verify(header, body, first["secret"], now)


def test_the_secret_is_stored_encrypted_and_never_shown_again(harness):
    status, rotated = harness.request("POST", "/v1/signing-secrets/rotate", {})
    assert status == 201
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    item = table.get_item(Key={"tenantId": "tenant-a", "jobId": "signing#secrets"})["Item"]
    assert item["current"].startswith("kms:") and rotated["secret"] not in str(item)
    status, _ = harness.request("GET", "/v1/signing-secrets/rotate")
    assert status in (404, 405)  # there is no route that reads a secret back
    assert harness.request("POST", "/v1/signing-secrets/rotate", {"graceSec": -1})[0] == 400
    assert harness.request("POST", "/v1/signing-secrets/rotate", {"graceSec": 10 ** 9})[0] == 400


def test_a_tenant_without_a_secret_gets_unsigned_calls_and_tenants_do_not_share_secrets(harness, target_url):
    job = harness.create_job({"name": "plain", "type": "CRON", "schedule": "0 3 * * *",
                              "target": {"type": "HTTP", "url": target_url}})
    header, _ = call_once(harness, job["jobId"])
    assert header is None
    status, other = harness.request("POST", "/v1/signing-secrets/rotate", {}, key="key-b")  # tenant B's
    assert status == 201
    header, body = call_once(harness, job["jobId"])
    assert header is None  # tenant B's secret never signs tenant A's calls
