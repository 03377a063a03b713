"""A tenant's jobs over 32 keys of the Jobs table (domain/jobs.py job_partition): a new job id
says its item lives on one of its tenant's shards; an id made before the shards, on the tenant's own key."""
import collections

from jobsched.domain.jobs import (JOB_KEY_SHARDS, Job, JobState, keyed_by_shard, job_partition, new_job_id,
                                  tenant_of, tenant_partitions)
from jobsched.domain.ownership import home_index, is_marked, marked_job_id

from tests.unit.test_job_snapshots import job as a_job

LEGACY = "job_0195f0a2b00c1d2e3f40516273849a5b6c7d"[:36]  # as new_job_id made them before: all hex


def test_a_new_job_id_is_time_ordered_and_names_one_of_its_tenants_shards():
    ids = [new_job_id(1_795_000_000_000 + n) for n in range(200)]
    assert all(len(i) == 36 and keyed_by_shard(i) for i in ids)
    assert ids == sorted(ids)  # creation order, as before
    for job_id in ids:
        partition = job_partition("tenant-a", job_id)
        tenant, shard = partition.split("#")
        assert tenant == "tenant-a" and 0 <= int(shard) < JOB_KEY_SHARDS
        assert job_partition("tenant-a", job_id) == partition  # stable: every reader finds it
        assert tenant_of(partition) == "tenant-a"
        assert partition in tenant_partitions("tenant-a")


def test_an_id_made_before_the_shards_stays_on_its_tenants_own_key():
    assert not keyed_by_shard(LEGACY)
    assert job_partition("tenant-a", LEGACY) == "tenant-a" == tenant_of("tenant-a")
    assert tenant_partitions("tenant-a")[0] == "tenant-a" and len(tenant_partitions("tenant-a")) == JOB_KEY_SHARDS + 1
    # Only the exact form: the mark elsewhere, or a longer id, is not a shard's.
    assert not keyed_by_shard(LEGACY[:16] + "k" + LEGACY[17:] + "0")
    assert not keyed_by_shard("job_k" + LEGACY[5:])


def test_one_tenants_new_jobs_spread_over_every_shard():
    counts = collections.Counter(job_partition("t", new_job_id(1_795_000_000_000)) for _ in range(6400))
    assert len(counts) == JOB_KEY_SHARDS and "t" not in counts
    assert max(counts.values()) < 2 * 6400 / JOB_KEY_SHARDS  # no key takes twice its share


def test_a_region_marked_id_keeps_its_shard_mark_and_its_home():
    job_id = marked_job_id(new_job_id(1_795_000_000_000), 3)
    assert is_marked(job_id) and home_index(job_id) == 3 and keyed_by_shard(job_id)
    legacy = marked_job_id(LEGACY, 2)
    assert is_marked(legacy) and home_index(legacy) == 2 and not keyed_by_shard(legacy)


def test_a_job_item_is_keyed_by_its_shard_and_read_back_with_its_tenant():
    job = a_job({"k": 1})
    job = Job(tenant_id="tenant-a", job_id=new_job_id(1_795_000_000_000), spec=job.spec, state=JobState.ACTIVE,
              generation=1, version=1, created_ms=1, updated_ms=1)
    item = job.to_item()
    assert item["tenantId"] == job_partition("tenant-a", job.job_id) != "tenant-a"
    back = Job.from_item(item)
    assert back.tenant_id == "tenant-a" and back.job_id == job.job_id and back.to_item() == item
    assert Job.for_hand_off(item).tenant_id == "tenant-a"
