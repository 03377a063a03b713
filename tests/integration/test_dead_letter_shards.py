"""The dead-letter index is spread over shards per tenant (issue 28, item 4): a tenant whose
endpoint is down cannot make one index partition hot; the list route merges the shards newest
first, pages without gaps or repeats, still lists dead letters written before sharding, and
never another tenant's."""
from jobsched.store.dead_letters import DEAD_LETTERS_INDEX, DEAD_LETTER_SHARDS, dead_letter_partition
from .harness import FAIL, KEY_B

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def dead_jobs(harness, count: int) -> list[str]:
    jobs = [harness.create_job({"name": f"d{n}", "type": "DELAYED", "delaySeconds": 10, "target": HOOK,
                                "retryPolicy": {"maxAttempts": 1}}) for n in range(count)]
    for job in jobs:
        harness.target.script[job["jobId"]] = [FAIL]
    harness.advance(20)
    return [job["jobId"] for job in jobs]


def index_partitions(harness) -> dict[str, str]:
    table = harness.session.resource("dynamodb").Table(harness.settings.executions_table)
    items = table.scan(IndexName=DEAD_LETTERS_INDEX)["Items"]  # a test table of a few items
    return {i["executionId"]: i["deadLetterTenant"] for i in items}


def listed(harness, limit: int, key=None) -> list[dict]:
    items, cursor = [], None
    for _ in range(50):
        path = f"/v1/dead-letters?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        status, page = harness.request("GET", path, **({"key": key} if key else {}))
        assert status == 200, page
        items += page["items"]
        cursor = page.get("nextCursor")
        if not cursor:
            return items
    raise AssertionError("the list never ended")


def test_a_tenants_dead_letters_spread_over_index_partitions_and_list_as_one(harness):
    jobs = dead_jobs(harness, 12)
    partitions = index_partitions(harness)
    assert len(partitions) == 12
    # Spread by execution id: no single index partition takes every dead letter of the tenant
    assert len(set(partitions.values())) >= 6, partitions
    assert all(p == dead_letter_partition("tenant-a", e) for e, p in partitions.items())
    # Listed newest first in pages of 5, none missing, none twice (they all died in one second)
    items = listed(harness, 5)
    assert sorted(e["jobId"] for e in items) == sorted(jobs) and len(items) == 12
    dead_at = [e["finishedAt"] for e in items]
    assert dead_at == sorted(dead_at, reverse=True)
    assert listed(harness, 5, key=KEY_B) == []


def test_dead_letters_written_before_sharding_are_still_listed_and_a_look_alike_tenant_is_not(harness):
    [job] = dead_jobs(harness, 1)
    table = harness.session.resource("dynamodb").Table(harness.settings.executions_table)
    [execution] = harness.executions_of(job)
    # Before sharding, the index partition was the tenant id itself
    table.update_item(Key={"jobId": job, "executionId": execution["executionId"]},
                      UpdateExpression="SET deadLetterTenant = :t", ExpressionAttributeValues={":t": "tenant-a"})
    # A tenant whose id spells one of tenant-a's shard values ("tenant-a#3" is shard 3's)
    table.put_item(Item={"jobId": "job_other", "executionId": "job_other.1", "tenantId": "tenant-a#3",
                         "status": "DEAD", "attempt": 1, "scheduledMs": 1, "generation": 1, "finishedMs": 2,
                         "deadLetterTenant": "tenant-a#3", "deadAtMs": 2})
    assert DEAD_LETTER_SHARDS > 3
    assert [e["executionId"] for e in listed(harness, 10)] == [execution["executionId"]]
