"""One tenant is not one hot key of the state index: JobsByStateShard (store/jobs_state_index.py)
spreads a tenant's entries over STATE_SHARDS keys per state; a list by state merges them in job id
order with one job id as its cursor; the upgrade gives the jobs of the release before their shard."""
import io
import json

import pytest
from botocore.exceptions import ClientError

from jobsched.cli.main import main
from jobsched.domain.jobs import Job, JobState
from jobsched.store.dynamo import plain
from jobsched.store.job_lists import JOBS_BY_STATE_INDEX
from jobsched.store.jobs import JobsStore
from jobsched.store.jobs_state_index import (JOBS_BY_STATE_SHARD_INDEX, STATE_SHARD_ATTRIBUTE, STATE_SHARDS,
                                             UPGRADE_KEY, backfill_state_shards, state_shard)

from .harness import TENANT_A, ids_of_every_page, keep_old_state_index
from jobsched.store.jobs import job_key

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}


def rate_job(harness, name: str) -> dict:
    return harness.create_job({"name": name, "type": "RATE", "schedule": "PT1H", "target": HOOK})


def test_a_state_list_merges_the_shards_in_job_id_order_and_each_page_resumes_after_one_job_id(harness):
    jobs = [rate_job(harness, f"r-{i}") for i in range(12)]
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    shards = {table.get_item(Key=job_key(TENANT_A, j["jobId"]))["Item"][STATE_SHARD_ATTRIBUTE]
              for j in jobs}
    assert len(shards) > 4 and all(s.startswith(f"{TENANT_A}#ACTIVE#") for s in shards)  # spread, by job id
    created = sorted(j["jobId"] for j in jobs)
    assert ids_of_every_page(harness, "state=ACTIVE", 5) == created  # each once, in job id order
    for job in jobs[3:6]:
        assert harness.request("POST", f"/v1/jobs/{job['jobId']}/pause")[0] == 200
    paused = sorted(j["jobId"] for j in jobs[3:6])
    assert ids_of_every_page(harness, "state=PAUSED", 2) == paused  # the entry moved to the PAUSED keys
    assert ids_of_every_page(harness, "state=ACTIVE", 4) == [i for i in created if i not in paused]
    shard = table.get_item(Key=job_key(TENANT_A, paused[0]))["Item"][STATE_SHARD_ATTRIBUTE]
    assert shard == state_shard(TENANT_A, "PAUSED", paused[0])


def test_a_completion_moves_the_job_to_its_completed_shard(harness):
    ended = harness.create_job({"name": "once", "type": "DELAYED", "delaySeconds": 10, "target": HOOK})
    harness.advance(20)
    item = harness.session.resource("dynamodb").Table(harness.settings.jobs_table).get_item(
        Key=job_key(TENANT_A, ended["jobId"]))["Item"]
    assert item["state"] == "COMPLETED" and item[STATE_SHARD_ATTRIBUTE] == state_shard(TENANT_A, "COMPLETED",
                                                                                         ended["jobId"])
    assert ids_of_every_page(harness, "state=COMPLETED", 20) == [ended["jobId"]]
    assert ids_of_every_page(harness, "state=ACTIVE", 20) == []


def test_the_upgrade_gives_the_jobs_of_the_release_before_their_shard_resumably(harness, monkeypatch):
    # The release before wrote no stateShard: its jobs are in JobsByState only, until the upgrade
    # has given each its shard. Its ids were all hex: its jobs are on the tenant's own key.
    made = iter(range(100))
    monkeypatch.setattr("jobsched.service.creation.new_job_id", lambda now: f"job_{now:012x}{next(made):020x}")
    jobs = sorted(rate_job(harness, f"old-{i}")["jobId"] for i in range(7))
    monkeypatch.undo()
    keep_old_state_index(harness)  # the table of the release before: both indexes
    new = rate_job(harness, "new")["jobId"]  # this release's: on one of the tenant's shards, with its stateShard
    resource = harness.session.resource("dynamodb")
    table = resource.Table(harness.settings.jobs_table)
    for job_id in jobs:
        table.update_item(Key=job_key(TENANT_A, job_id), UpdateExpression="REMOVE stateShard")
    legacy = JobsStore(resource, harness.settings.jobs_table, state_index=JOBS_BY_STATE_INDEX)
    sharded = JobsStore(resource, harness.settings.jobs_table, state_index=JOBS_BY_STATE_SHARD_INDEX)
    assert sorted(j.job_id for j in legacy.list_in_state(TENANT_A, JobState.ACTIVE, 100, None).items) == jobs + [new]
    # Before the upgrade, a list through JobsByStateShard reads them from the tenant's own key
    # (the jobs without a stateShard), merged with the index's entries, page by page.
    assert [j.job_id for j in sharded.list_in_state(TENANT_A, JobState.ACTIVE, 100, None).items] == jobs + [new]
    first_page = sharded.list_in_state(TENANT_A, JobState.ACTIVE, 5, None)
    rest_page = sharded.list_in_state(TENANT_A, JobState.ACTIVE, 5, first_page.next_cursor)
    assert [j.job_id for j in first_page.items + rest_page.items] == jobs + [new] and rest_page.next_cursor is None

    first = backfill_state_shards(table, pages=1, page_size=5)  # stopped after one page
    assert not first["done"] and not table.get_item(Key=UPGRADE_KEY)["Item"]["done"]
    out = io.StringIO()  # the operator's command goes on from the recorded position
    assert main(["--json", "upgrade", "--table", harness.settings.jobs_table, "state-shards"], out=out) == 0
    rest = json.loads(out.getvalue())
    assert rest["done"] and table.get_item(Key=UPGRADE_KEY)["Item"]["done"]
    assert first["written"] + rest["written"] == len(jobs)  # the job on a shard key already had its own
    assert [j.job_id for j in sharded.list_in_state(TENANT_A, JobState.ACTIVE, 100, None).items] == jobs + [new]
    assert backfill_state_shards(table)["written"] == 0  # repeatable: nothing left to write
    # Once the record says done, a list reads the index alone: a job without its shard is not listed.
    table.update_item(Key=job_key(TENANT_A, jobs[0]), UpdateExpression="REMOVE stateShard")
    assert [j.job_id for j in sharded.list_in_state(TENANT_A, JobState.ACTIVE, 100, None).items] == jobs[1:] + [new]


def test_the_upgrade_writes_the_shard_of_the_state_a_job_has_now(harness, monkeypatch):
    # A job paused between the upgrade's read and its write: the write's condition (the state it
    # read) fails, the job is read again, and it gets the PAUSED shard.
    job_id = rate_job(harness, "moving")["jobId"]
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    table.update_item(Key=job_key(TENANT_A, job_id), UpdateExpression="REMOVE stateShard")
    scan = table.scan

    def scan_then_pause(**kwargs):
        answer = scan(**kwargs)
        table.update_item(Key=job_key(TENANT_A, job_id), UpdateExpression="SET #s = :p",
                          ExpressionAttributeNames={"#s": "state"}, ExpressionAttributeValues={":p": "PAUSED"})
        return answer

    monkeypatch.setattr(table, "scan", scan_then_pause)
    assert backfill_state_shards(table)["written"] == 1
    item = table.get_item(Key=job_key(TENANT_A, job_id))["Item"]
    assert item[STATE_SHARD_ATTRIBUTE] == state_shard(TENANT_A, "PAUSED", job_id)


def test_one_tenants_completions_in_one_second_spread_over_the_shards(harness, monkeypatch):
    # Completions of one tenant: while the table has JobsByState (one key, 2 WCU each) the 501st
    # of a second is throttled; on JobsByStateShard (after `-c stateIndex=JobsByStateShard`
    # deletes the old index) each completion writes 1 WCU on one of 32 ACTIVE keys and 1 on one
    # of 32 COMPLETED keys, and none is near its 1,000.
    keep_old_state_index(harness)  # the table of the release before: both indexes
    template = harness.strict.template.tables[harness.settings.jobs_table]
    resource = harness.session.resource("dynamodb")
    store = JobsStore(resource, harness.settings.jobs_table, state_index=JOBS_BY_STATE_SHARD_INDEX)
    table = resource.Table(harness.settings.jobs_table)
    model = plain(table.get_item(Key=job_key(TENANT_A, rate_job(harness, "m")["jobId"]))["Item"])
    jobs = []
    for i in range(800):
        job_id = f"job_{i:06d}"
        # Ids of jobs made before the tenant's keys were sharded: on the tenant's own key.
        item = {**model, "tenantId": TENANT_A, "jobId": job_id,
                STATE_SHARD_ATTRIBUTE: state_shard(TENANT_A, "ACTIVE", job_id)}
        if i % 400 == 0:
            harness.clock.advance_ms(1000)  # 400 puts a second: the table's key has room
        table.put_item(Item=item)
        jobs.append(Job.from_item(item))
    harness.clock.advance_ms(1000)
    for job in jobs[:500]:
        assert store.mark_completed(job, harness.clock.now_ms())
    with pytest.raises(ClientError, match="IndexWriteKeyRangeThroughputExceeded"):
        store.mark_completed(jobs[500], harness.clock.now_ms())  # JobsByState's one key is full
    monkeypatch.delitem(template, JOBS_BY_STATE_INDEX)  # the next deployment's table
    harness.clock.advance_ms(1000)
    for job in jobs[500:]:
        assert store.mark_completed(job, harness.clock.now_ms())
    ledger = harness.strict.ledger.partitions
    index = f"{harness.settings.jobs_table}/{JOBS_BY_STATE_SHARD_INDEX}["
    peaks = {k: u.peak_wcu for k, u in ledger.items() if k.startswith(index)}
    assert len(peaks) == 2 * STATE_SHARDS and max(peaks.values()) < 60  # 300 each way over 32 keys a state
    assert not any(u.throttled for k, u in ledger.items() if k.startswith(index))
