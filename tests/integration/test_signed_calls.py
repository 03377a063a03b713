"""Signed calls: real HTTP calls from the worker, verified the way a target would, with the
Standard Webhooks reference verifier (`standardwebhooks`), across rotations, their grace, tenants
that share one worker container, and KMS faults."""
import hashlib
import hmac
import json
from datetime import datetime

import boto3
import pytest
from botocore.exceptions import ClientError
from standardwebhooks import webhooks
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from jobsched.handlers import worker
from jobsched.local.events import Function, sqs_event
from jobsched.store.jobs import job_key

from .harness import KEY_B, QuietHandler, loopback
from .test_faults import take_messages

ARN = "arn:aws:sqs:us-east-1:123456789012:lane"


def verified(headers: dict, body: bytes, secret: str, now_s: int) -> bool:
    """What a target does: the reference verifier, its clock at the target's `now_s` (it refuses
    a timestamp more than five minutes away: a replay of an old call)."""
    class TargetTime(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.fromtimestamp(now_s, tz)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(webhooks, "datetime", TargetTime)
        try:
            Webhook(secret).verify(body, headers, json_parse=False)
            return True
        except WebhookVerificationError:
            return False


def verified_deprecated(header: str, body: bytes, secret: str) -> bool:
    """Round 2's header, still sent: t=<t>,v1=<hex> over "<t>.<body>"."""
    fields = [part.split("=", 1) for part in header.split(",")]
    expected = hmac.new(secret.encode(), f"{dict(fields)['t']}.".encode() + body, hashlib.sha256).hexdigest()
    return any(key == "v1" and hmac.compare_digest(expected, value) for key, value in fields)


class Target(QuietHandler):
    calls: list = []
    raw: list = []  # every header line as sent, repeated names included

    def on_post(self, body: bytes) -> None:
        Target.calls.append(({k.lower(): v for k, v in self.headers.items()}, body))
        Target.raw.append([(k.lower(), v) for k, v in self.headers.items()])


@pytest.fixture
def target_url():
    Target.calls, Target.raw = [], []
    with loopback(Target) as url:
        yield url


def new_worker(harness, session=None):
    """A worker container: its caches live as long as it does."""
    return Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, session or harness.session))


def call_once(harness, job_id, container=None, key="key-a"):
    """Trigger the job and run its message through a worker with the real HTTP target (a new
    container unless one is given)."""
    harness.clock.set_ms(harness.clock.now_ms() + 1000)  # a trigger's id is its millisecond: a new one
    calls = len(Target.calls)
    status, answer = harness.request("POST", f"/v1/jobs/{job_id}/trigger", key=key)
    assert status == 202, answer
    (container or new_worker(harness)).invoke(sqs_event(take_messages(harness), ARN))
    assert len(Target.calls) == calls + 1
    return Target.calls[-1]


def http_job(harness, url, key="key-a", **extra):
    return harness.create_job({"name": "signed", "type": "CRON", "schedule": "0 3 * * *", "payload": {"a": 1},
                               "target": {"type": "HTTP", "url": url}, **extra}, key=key)


def rotate(harness, key="key-a", **body):
    status, answer = harness.request("POST", "/v1/signing-secrets/rotate", body, key=key)
    assert status == 201, answer
    return answer


def now_s(harness) -> int:
    return harness.clock.now_ms() // 1000


def test_calls_carry_standard_webhooks_headers_that_the_reference_verifier_accepts(harness, target_url):
    job = http_job(harness, target_url)
    first = rotate(harness)
    assert first["secret"].startswith("whsec_") and first["previousValidUntil"] is None
    headers, body = call_once(harness, job["jobId"])
    execution_id = harness.executions_of(job["jobId"])[0]["executionId"]
    assert headers["webhook-id"] == f"{execution_id}:1" and headers["webhook-timestamp"] == str(now_s(harness))
    assert headers["webhook-signature"].startswith("v1,") and " " not in headers["webhook-signature"]
    assert body == b'{"a":1}' and verified(headers, body, first["secret"], now_s(harness))
    assert not verified(headers, body, rotate(harness, key=KEY_B)["secret"], now_s(harness))  # another secret
    assert not verified(headers, body, first["secret"], now_s(harness) + 3600)  # replayed an hour later
    assert not verified(headers, body + b" ", first["secret"], now_s(harness))  # a changed body
    # The id is signed: a captured call replayed as another execution or attempt fails.
    assert not verified({**headers, "webhook-id": f"{job['jobId']}.1:1"}, body, first["secret"], now_s(harness))
    assert not verified({**headers, "webhook-id": f"{execution_id}:2"}, body, first["secret"], now_s(harness))
    assert verified_deprecated(headers["x-jobsched-signature"], body, first["secret"])  # still sent


def test_both_secrets_sign_during_a_rotations_grace_and_only_the_new_one_after(harness, target_url):
    job = http_job(harness, target_url)
    first = rotate(harness)
    second = rotate(harness, graceSec=600)
    assert second["previousValidUntil"] is not None
    headers, body = call_once(harness, job["jobId"])
    assert headers["webhook-signature"].count("v1,") == 2 and headers["x-jobsched-signature"].count("v1=") == 2
    assert verified(headers, body, second["secret"], now_s(harness))
    assert verified(headers, body, first["secret"], now_s(harness))

    harness.clock.set_ms(harness.clock.now_ms() + 601_000)  # the grace is over
    headers, body = call_once(harness, job["jobId"])
    assert headers["webhook-signature"].count("v1,") == 1
    assert verified(headers, body, second["secret"], now_s(harness))
    assert not verified(headers, body, first["secret"], now_s(harness))


def test_a_rotation_takes_effect_for_the_next_call_of_a_running_container(harness, target_url):
    """Issue 26.3: one container serves every call, as a warm worker does."""
    job = http_job(harness, target_url)
    container = new_worker(harness)
    leaked = rotate(harness)
    headers, body = call_once(harness, job["jobId"], container)
    assert verified(headers, body, leaked["secret"], now_s(harness))

    fresh = rotate(harness, graceSec=0)  # revoking a leaked secret
    headers, body = call_once(harness, job["jobId"], container)  # one second later, same container
    assert verified(headers, body, fresh["secret"], now_s(harness))
    assert not verified(headers, body, leaked["secret"], now_s(harness))  # the revoked one signs nothing
    assert headers["webhook-signature"].count("v1,") == 1

    newer = rotate(harness, graceSec=3600)  # a planned rotation: both sign at once
    headers, body = call_once(harness, job["jobId"], container)
    assert verified(headers, body, newer["secret"], now_s(harness))
    assert verified(headers, body, fresh["secret"], now_s(harness))


def test_one_container_signs_each_tenants_calls_with_that_tenants_secret(harness, target_url):
    """Mutation survivor (issue 26): a secret cache keyed by anything less than the tenant."""
    job_a, job_b = http_job(harness, target_url), http_job(harness, target_url, key=KEY_B)
    plain = http_job(harness, target_url)  # tenant A's: signed too
    container = new_worker(harness)
    secret_a = rotate(harness)["secret"]
    headers, body = call_once(harness, job_a["jobId"], container)
    assert verified(headers, body, secret_a, now_s(harness))
    secret_b = rotate(harness, key=KEY_B)["secret"]
    headers, body = call_once(harness, job_b["jobId"], container, key=KEY_B)
    assert verified(headers, body, secret_b, now_s(harness)) and not verified(headers, body, secret_a, now_s(harness))
    headers, body = call_once(harness, plain["jobId"], container)
    assert verified(headers, body, secret_a, now_s(harness)) and not verified(headers, body, secret_b, now_s(harness))


def test_a_tenant_without_a_secret_gets_unsigned_calls_whoever_else_has_one(harness, target_url):
    job = http_job(harness, target_url)
    container = new_worker(harness)
    headers, _ = call_once(harness, job["jobId"], container)
    assert "webhook-signature" not in headers and "x-jobsched-signature" not in headers
    rotate(harness, key=KEY_B)
    headers, _ = call_once(harness, job["jobId"], container)
    assert "webhook-signature" not in headers and "x-jobsched-signature" not in headers


def counting_kms(fail=None):
    """A session whose KMS Decrypt calls are recorded (ciphertexts), and optionally refused."""
    session = boto3.session.Session(region_name="us-east-1")
    seen: list = []

    def decrypt(params, **kwargs):
        seen.append(params["CiphertextBlob"])
        if fail is not None and fail(len(seen)):
            raise ClientError({"Error": {"Code": fail.code, "Message": "refused"}}, "Decrypt")

    session.events.register("before-parameter-build.kms.Decrypt", decrypt)
    return session, seen


def sealed_blobs(harness, tenant_id="tenant-a"):
    import base64
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    item = table.get_item(Key={"tenantId": tenant_id, "jobId": "signing#secrets"})["Item"]
    return {name: base64.b64decode(item[name].removeprefix("kms:")) for name in ("current", "previous") if name in item}


def test_kms_is_called_once_per_ciphertext_a_container_meets_and_never_for_an_ended_grace(harness, target_url):
    """Issues 28.5 and 26.1: plaintexts are kept by ciphertext; a previous secret past its grace
    is never decrypted (before: on every cache miss, so a bad one broke signing until a second
    rotation)."""
    job = http_job(harness, target_url)
    session, decrypted = counting_kms()
    container = new_worker(harness, session)
    rotate(harness)
    for _ in range(3):
        call_once(harness, job["jobId"], container)
    assert len(decrypted) == 1  # the current secret, once
    rotate(harness, graceSec=60)
    call_once(harness, job["jobId"], container)
    assert len(decrypted) == 2  # only the new ciphertext: the previous one was opened before
    blobs = sealed_blobs(harness)

    harness.clock.set_ms(harness.clock.now_ms() + 61_000)  # the grace is over
    cold_session, cold = counting_kms()
    headers, body = call_once(harness, job["jobId"], new_worker(harness, cold_session))  # a cold container
    assert cold == [blobs["current"]] and blobs["previous"] not in cold
    assert headers["webhook-signature"].count("v1,") == 1


class Refuse:
    def __init__(self, code, first_n=1):
        self.code, self.first_n = code, first_n

    def __call__(self, n):
        return n <= self.first_n


@pytest.mark.parametrize("code", ["ThrottlingException", "AccessDeniedException"])
def test_a_kms_throttle_or_denial_is_a_failed_attempt_retried_under_the_jobs_policy(harness, target_url, code):
    """Issue 28.5: raised after the claim, it used to leave the execution RUNNING (LOST later,
    the message stranded); now the attempt is recorded FAILED and the retry signs the call."""
    job = http_job(harness, target_url, retryPolicy={"maxAttempts": 3, "backoff": "FIXED", "initialDelayMs": 2000})
    secret = rotate(harness)["secret"]
    session, decrypted = counting_kms(Refuse(code))
    container = new_worker(harness, session)
    harness.clock.set_ms(harness.clock.now_ms() + 1000)
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")[0] == 202
    container.invoke(sqs_event(take_messages(harness), ARN))
    assert Target.calls == []  # not called unsigned
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "FAILED" and len(decrypted) == 1
    assert execution["attempts"][0]["status"] == "FAILED" and "signing secret unavailable" in execution["attempts"][0]["error"]

    harness.clock.set_ms(harness.clock.now_ms() + 3000)  # the retry is due
    container.invoke(sqs_event(take_messages(harness), ARN))
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "SUCCEEDED" and execution["attempt"] == 2
    headers, body = Target.calls[-1]
    assert headers["webhook-id"] == f"{execution['executionId']}:2" and verified(headers, body, secret, now_s(harness))


def test_the_secret_is_stored_encrypted_and_never_shown_again(harness):
    rotated = rotate(harness)
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    item = table.get_item(Key={"tenantId": "tenant-a", "jobId": "signing#secrets"})["Item"]
    assert item["current"].startswith("kms:") and rotated["secret"] not in str(item)
    copy = table.get_item(Key={"tenantId": "tenant-a#signing#3", "jobId": "signing#copy"})["Item"]
    assert copy["current"] == item["current"] and copy["version"] == item["version"]
    status, _ = harness.request("GET", "/v1/signing-secrets/rotate")
    assert status in (404, 405)  # there is no route that reads a secret back
    assert harness.request("POST", "/v1/signing-secrets/rotate", {"graceSec": -1})[0] == 400
    assert harness.request("POST", "/v1/signing-secrets/rotate", {"graceSec": 10 ** 9})[0] == 400


def test_a_secret_made_before_copies_existed_keeps_signing_and_a_rotation_replaces_it_at_once(harness, target_url):
    """A tenant whose secret is in the record alone (made by the previous release, whose API may
    still write it during a deploy): it signs the deprecated header, read at most once a minute
    per container; the first rotation takes effect for the next call."""
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    store = harness.stores.signing

    def written_by_the_previous_release(secret):
        table.put_item(Item={"tenantId": "tenant-a", "jobId": "signing#secrets", "createdMs": 1,
                             "current": store._seal("tenant-a", secret)})

    job = http_job(harness, target_url)
    container = new_worker(harness)
    written_by_the_previous_release("whsec_legacy-secret_made-in-round-2")
    headers, body = call_once(harness, job["jobId"], container)
    assert "webhook-signature" not in headers  # not a whsec_<base64> secret
    assert verified_deprecated(headers["x-jobsched-signature"], body, "whsec_legacy-secret_made-in-round-2")
    written_by_the_previous_release("whsec_legacy-secret_made-again")
    harness.clock.set_ms(harness.clock.now_ms() + 61_000)
    headers, body = call_once(harness, job["jobId"], container)
    assert verified_deprecated(headers["x-jobsched-signature"], body, "whsec_legacy-secret_made-again")

    rotated = rotate(harness, graceSec=600)
    headers, body = call_once(harness, job["jobId"], container)
    assert verified(headers, body, rotated["secret"], now_s(harness))
    assert verified_deprecated(headers["x-jobsched-signature"], body, rotated["secret"])
    assert verified_deprecated(headers["x-jobsched-signature"], body, "whsec_legacy-secret_made-again")  # in grace


def test_a_late_copy_write_of_an_older_rotation_changes_nothing(harness, target_url):
    """Two rotations at once: the older one's copies may land after the newer one's."""
    from jobsched.store.signing import COPIES, SealedSecrets
    job = http_job(harness, target_url)
    rotate(harness)
    newest = rotate(harness, graceSec=0)
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    record = table.get_item(Key={"tenantId": "tenant-a", "jobId": "signing#secrets"})["Item"]
    harness.stores.signing._write_copies("tenant-a", SealedSecrets(1, record["previous"], None, None))  # late
    for k in range(COPIES):
        copy = table.get_item(Key={"tenantId": f"tenant-a#signing#{k}", "jobId": "signing#copy"})["Item"]
        assert copy["version"] == 2 and copy["current"] == record["current"]
    headers, body = call_once(harness, job["jobId"])
    assert verified(headers, body, newest["secret"], now_s(harness))


@pytest.mark.parametrize("name", ["webhook-id", "Webhook-Signature", "WEBHOOK-TIMESTAMP"])
def test_a_job_cannot_set_the_signed_call_headers(harness, name):
    status, answer = harness.request("POST", "/v1/jobs", {"name": "n", "type": "RATE", "schedule": "PT1M",
                                                          "target": {"type": "HTTP", "url": "http://127.0.0.1:9/hook",
                                                                     "headers": {name: "v1,forged"}}})
    assert status == 400 and [d["field"] for d in answer["error"]["details"]] == ["target.headers"], answer


def test_a_job_stored_with_a_signed_call_header_never_sends_it(harness, target_url):
    """A job stored before the names were reserved: its header is dropped, ours is sent."""
    job = http_job(harness, target_url)
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    item = table.get_item(Key=job_key("tenant-a", job["jobId"]))["Item"]
    [(name, text)] = [(k, v) for k, v in item.items() if isinstance(v, str) and target_url in v]  # the spec's JSON

    def with_headers(node):
        if isinstance(node, dict):
            if node.get("url") == target_url:
                return {**node, "headers": {"Webhook-Signature": "v1,forged", "X-Kept": "yes"}}
            return {k: with_headers(v) for k, v in node.items()}
        return node

    table.update_item(Key=job_key("tenant-a", job["jobId"]), UpdateExpression="SET #n = :t",
                      ExpressionAttributeNames={"#n": name},
                      ExpressionAttributeValues={":t": json.dumps(with_headers(json.loads(text)))})
    secret = rotate(harness)["secret"]
    headers, body = call_once(harness, job["jobId"])
    assert headers["x-kept"] == "yes" and ("webhook-signature", "v1,forged") not in Target.raw[-1]
    assert [name for name, _ in Target.raw[-1]].count("webhook-signature") == 1
    assert verified(headers, body, secret, now_s(harness))
