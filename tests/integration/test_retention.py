"""Ended executions expire after the retention (DynamoDB TTL from their end); waiting ones do not;
an Idempotency-Key is honoured for its own lifetime, not DynamoDB's deletion lag."""
from .harness import FAIL
from jobsched.store.jobs import job_key

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
RETENTION_S = 30 * 86_400


def raw(harness, execution_id):
    table = harness.session.resource("dynamodb").Table(harness.settings.executions_table)
    return table.get_item(Key={"jobId": execution_id.split(".")[0], "executionId": execution_id})["Item"]


def test_an_ended_execution_expires_after_the_retention_and_a_waiting_one_never(harness):
    job = harness.create_job({"name": "r", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                              "retryPolicy": {"maxAttempts": 2, "initialDelayMs": 60_000}})
    harness.target.script[job["jobId"]] = [FAIL, FAIL]
    harness.advance(15)
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "FAILED" and "expiresAt" not in raw(harness, execution["executionId"])
    harness.advance(70)
    item = raw(harness, execution["executionId"])
    assert item["status"] == "DEAD" and item["expiresAt"] == item["finishedMs"] // 1000 + RETENTION_S
    assert harness.request("POST", f"/v1/executions/{execution['executionId']}/redrive")[0] == 202
    assert "expiresAt" not in raw(harness, execution["executionId"])  # waiting again: kept
    harness.advance(5)
    item = raw(harness, execution["executionId"])
    assert item["status"] == "SUCCEEDED" and item["expiresAt"] == item["finishedMs"] // 1000 + RETENTION_S


def test_a_cancelled_execution_expires_too(harness):
    job = harness.create_job({"name": "t", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    _, execution = harness.request("POST", f"/v1/jobs/{job['jobId']}/trigger")
    harness.request("POST", f"/v1/executions/{execution['executionId']}/cancel")
    item = raw(harness, execution["executionId"])
    assert item["status"] == "CANCELLED" and item["expiresAt"] == item["finishedMs"] // 1000 + RETENTION_S


def test_an_idempotency_key_past_its_expiry_is_free_again_before_dynamodb_deletes_it(harness):
    body = {"name": "once", "type": "RATE", "schedule": "PT1H", "target": HOOK}
    first = harness.request("POST", "/v1/jobs", body, headers={"Idempotency-Key": "k"})[1]
    harness.clock.advance_ms(23 * 3600 * 1000)
    assert harness.request("POST", "/v1/jobs", {**body, "name": "other"}, headers={"Idempotency-Key": "k"})[0] == 409
    harness.clock.advance_ms(2 * 3600 * 1000)  # 25 h: the record's own expiry has passed; TTL may lag days
    status, second = harness.request("POST", "/v1/jobs", {**body, "name": "other"}, headers={"Idempotency-Key": "k"})
    assert status == 201 and second["jobId"] != first["jobId"]


def jobs_item(harness, job_id):
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    return table.get_item(Key=job_key("tenant-a", job_id))["Item"]


def test_an_ended_one_time_job_expires_after_the_retention_and_a_recurring_one_never(harness):
    """Issue 28, item 8: ended one-time jobs were kept for ever (and every state-filtered list
    read past them). A one-time job that completes or is cancelled now expires after the
    retention from its end; its executions follow their own (the same length, from their end)."""
    done = harness.create_job({"name": "once", "type": "DELAYED", "delaySeconds": 10, "target": HOOK})
    cancelled = harness.create_job({"name": "later", "type": "DELAYED", "delaySeconds": 3600, "target": HOOK})
    recurring = harness.create_job({"name": "r", "type": "RATE", "schedule": "PT1H", "target": HOOK})
    assert "expiresAt" not in jobs_item(harness, done["jobId"])  # waiting: kept
    harness.advance(20)
    item = jobs_item(harness, done["jobId"])
    assert item["state"] == "COMPLETED" and item["expiresAt"] == item["updatedMs"] // 1000 + RETENTION_S
    for job in (cancelled, recurring):
        assert harness.request("DELETE", f"/v1/jobs/{job['jobId']}")[0] == 200
    item = jobs_item(harness, cancelled["jobId"])
    assert item["state"] == "CANCELLED" and item["expiresAt"] == item["updatedMs"] // 1000 + RETENTION_S
    item = jobs_item(harness, recurring["jobId"])
    assert item["state"] == "CANCELLED" and "expiresAt" not in item
