"""Issue 28, item 6: a job item has a total bound as DynamoDB counts it (attribute names count),
checked before any write: the largest legal pieces together answer 413 naming the field, never
a 500 from DynamoDB's 400 KB refusal."""
from boto3.dynamodb.conditions import Key

from jobsched.domain.item_size import MAX_ITEM_BYTES, item_bytes
from jobsched.domain.jobs import MAX_JOB_ITEM_BYTES
from jobsched.domain.jobs import tenant_partitions

from .harness import TENANT_A

PAYLOAD = "p" * (256 * 1024 - 2)  # with its quotes: exactly the 256 KB a payload may be


def step(i, depends=()):
    # The largest HTTP target a step may have: a 2,048-character URL and 8 KB of headers.
    url = "https://example.com/" + "u" * (2048 - len("https://example.com/"))
    headers = {f"X-H{j:02d}": "v" * (256 - len(f"X-H{j:02d}")) for j in range(32)}
    return {"name": f"s{i:03d}", "target": {"type": "HTTP", "url": url, "headers": headers},
            "dependsOn": list(depends)}


def flow(steps, payload=PAYLOAD, name="big"):
    return {"name": name, "type": "RATE", "schedule": "PT1H", "payload": payload, "steps": steps}


def stored_jobs(harness):
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    return [i for key in tenant_partitions(TENANT_A)  # the tenant's own key and its job keys
            for i in table.query(KeyConditionExpression=Key("tenantId").eq(key))["Items"] if i["jobId"].startswith("job_")]


def test_the_largest_legal_pieces_together_answer_413_naming_the_field_before_any_write(harness):
    status, body = harness.request("POST", "/v1/jobs", flow([step(i) for i in range(100)]),
                                   headers={"Idempotency-Key": "big-1"})
    assert status == 413, body
    assert body["error"]["details"][0]["field"] == "steps"  # 100 × 10 KB: the largest part
    status, body = harness.request("POST", "/v1/jobs", flow([step(i) for i in range(20)]))
    assert status == 413 and body["error"]["details"][0]["field"] == "payload"  # 256 KB against 200 KB
    assert stored_jobs(harness) == []
    # Nothing was written: the same Idempotency-Key with a body that fits creates the job.
    status, body = harness.request("POST", "/v1/jobs", flow([step(0)], payload={"small": 1}),
                                   headers={"Idempotency-Key": "big-1"})
    assert status == 201, body


def test_a_job_just_under_the_bound_is_stored_and_its_replacement_over_it_is_refused(harness):
    fits = [step(i) for i in range(12)]
    status, job = harness.request("POST", "/v1/jobs", flow(fits))
    assert status == 201, job
    [item] = stored_jobs(harness)
    assert item_bytes(item) <= MAX_JOB_ITEM_BYTES < MAX_ITEM_BYTES
    status, body = harness.request("PUT", f"/v1/jobs/{job['jobId']}", flow(fits + [step(i) for i in range(12, 30)]))
    assert status == 413 and body["error"]["details"][0]["field"] == "steps"  # 30 × 10 KB against 256 KB
    assert harness.request("GET", f"/v1/jobs/{job['jobId']}")[1]["version"] == job["version"]
