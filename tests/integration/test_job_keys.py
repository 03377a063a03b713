"""One tenant's jobs over 32 keys of the Jobs table (domain/jobs.py job_partition), through the
API, the tick and the worker under the strict AWS layer; jobs made before the shards stay on their
tenant's own key and keep working beside the new ones."""
import pytest

from jobsched.domain.jobs import JOB_KEY_SHARDS, JobState, job_partition, keyed_by_shard
from jobsched.store.job_lists import JOBS_BY_STATE_INDEX
from jobsched.store.jobs import JobsStore, job_key
from jobsched.store.jobs_state_index import JOBS_BY_STATE_SHARD_INDEX

from .harness import TENANT_A, ids_of_every_page, keep_old_state_index

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}


def legacy_id(now_ms: int, n: int = 0) -> str:
    """An id as new_job_id made them before the shards: all hex after "job_"."""
    return f"job_{now_ms:012x}{n:020x}"


@pytest.fixture
def old_and_new(harness, monkeypatch):
    """Three jobs created by the release before the shards (their ids all hex, their items on the
    tenant's key), then five of this release's, all through the API."""
    made = iter(range(100))
    monkeypatch.setattr("jobsched.service.creation.new_job_id", lambda now: legacy_id(now, next(made)))
    old = [harness.create_job({"name": f"old-{i}", "type": "RATE", "schedule": "PT1H", "target": HOOK})["jobId"]
           for i in range(3)]
    monkeypatch.undo()
    new = [harness.create_job({"name": f"new-{i}", "type": "RATE", "schedule": "PT1H", "target": HOOK})["jobId"]
           for i in range(5)]
    return old, new


def test_a_new_job_lives_on_one_of_its_tenants_shards_and_an_old_one_where_it_was(harness, old_and_new):
    old, new = old_and_new
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    for job_id in new:
        assert keyed_by_shard(job_id)
        item = table.get_item(Key=job_key(TENANT_A, job_id), ConsistentRead=True)["Item"]
        assert item["tenantId"] == job_partition(TENANT_A, job_id) != TENANT_A
        assert "Item" not in table.get_item(Key={"tenantId": TENANT_A, "jobId": job_id})  # not on the tenant's key
        status, shown = harness.request("GET", f"/v1/jobs/{job_id}")
        assert status == 200 and shown["jobId"] == job_id and TENANT_A + "#" not in str(shown)  # never its key
    for job_id in old:
        assert table.get_item(Key={"tenantId": TENANT_A, "jobId": job_id})["Item"]["tenantId"] == TENANT_A
        assert harness.request("GET", f"/v1/jobs/{job_id}")[0] == 200


def test_the_list_merges_the_tenants_keys_in_creation_order_page_by_page(harness, old_and_new):
    old, new = old_and_new
    assert sorted(old + new)[:3] == old  # in one millisecond, an old id sorts before a new one ("k")
    for limit in (1, 2, 3, 100):
        assert ids_of_every_page(harness, "", limit) == sorted(old + new)  # none skipped or repeated
    # A state list through either index: JobsByStateShard (keyed by the tenant and state) and the
    # old JobsByState (keyed by the item's partition: the tenant's key, then each shard in turn).
    assert harness.request("POST", f"/v1/jobs/{new[1]}/pause")[0] == 200
    assert harness.request("POST", f"/v1/jobs/{old[0]}/pause")[0] == 200
    assert ids_of_every_page(harness, "state=PAUSED", 1) == sorted([old[0], new[1]])
    keep_old_state_index(harness)  # a table that keeps JobsByState (`-c stateIndex=JobsByState`)
    resource = harness.session.resource("dynamodb")
    for index in (JOBS_BY_STATE_SHARD_INDEX, JOBS_BY_STATE_INDEX):
        store = JobsStore(resource, harness.settings.jobs_table, state_index=index)
        seen, cursor = [], None
        for _ in range(50):  # a list that repeats a page would never end
            page = store.list_in_state(TENANT_A, JobState.ACTIVE, 2, cursor)
            seen += [j.job_id for j in page.items]
            cursor = page.next_cursor
            if not cursor:
                break
        assert sorted(seen) == sorted(old[1:] + new[:1] + new[2:]) and len(seen) == len(set(seen)), index


def test_old_and_new_one_time_jobs_fire_once_and_complete_on_their_own_keys(harness, monkeypatch):
    monkeypatch.setattr("jobsched.service.creation.new_job_id", lambda now: legacy_id(now))
    old = harness.create_job({"name": "old", "type": "ONE_TIME", "runAt": "2030-01-01T00:00:30Z", "target": HOOK})
    monkeypatch.undo()
    new = harness.create_job({"name": "new", "type": "ONE_TIME", "runAt": "2030-01-01T00:00:30Z", "target": HOOK})
    harness.advance(40)
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    for job in (old, new):
        assert len(harness.target.calls_for(job["jobId"])) == 1
        item = table.get_item(Key=job_key(TENANT_A, job["jobId"]), ConsistentRead=True)["Item"]
        assert item["state"] == "COMPLETED"  # the worker's completion found the item where it lives
    assert ids_of_every_page(harness, "state=COMPLETED", 1) == [old["jobId"], new["jobId"]]


def test_one_tenants_completions_in_one_second_spread_over_its_keys(harness):
    """The strict layer bills each write to its key: a tenant's completions land on its 32 keys."""
    store = JobsStore(harness.session.resource("dynamodb"), harness.settings.jobs_table,
                      state_index=JOBS_BY_STATE_SHARD_INDEX)
    jobs = []
    for i in range(64):
        harness.clock.advance_ms(40)  # within the tenant's 50 creates a second
        jobs.append(harness.create_job({"name": f"j{i}", "type": "RATE", "schedule": "PT1H", "target": HOOK})["jobId"])
    harness.clock.advance_ms(1000)
    for job_id in jobs:
        assert store.mark_completed(store.get(TENANT_A, job_id, consistent=True), harness.clock.now_ms())
    table = harness.settings.jobs_table
    keys = {k for k, u in harness.strict.ledger.partitions.items()
            if k.startswith(f"{table}[{TENANT_A}#") and u.peak_wcu}
    assert 16 <= len(keys) <= JOB_KEY_SHARDS  # 64 jobs over 32 keys, not one
