"""Flow control within DynamoDB's limits (issue 28, items 2 and 3): every item it writes stays
small, and no partition key takes more than 1,000 write units in a second, however large the
key's maxConcurrency or ratePerSecond. Capacity is billed per item size as DynamoDB bills it
(aws_doubles.CapacityMeter)."""
import random

import boto3

from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.service.flow import FlowGate
from jobsched.store.aws import build_stores

from .aws_doubles import CapacityMeter, item_size

WU_PER_PARTITION = 1_000


def metered(harness, peek: bool = True):
    """Stores on a session whose DynamoDB calls are billed per partition key and second."""
    session = boto3.session.Session(region_name="us-east-1")
    meter = CapacityMeter(session, harness.clock, boto3.session.Session(region_name="us-east-1").client("dynamodb"),
                          peek=peek)
    return build_stores(harness.settings, session, harness.clock), meter


def flow_job(harness, control: dict):
    created = harness.create_job({"name": "f", "type": "CRON", "schedule": "0 3 * * *",
                                  "target": {"type": "HTTP", "url": "http://127.0.0.1:9/f"}, "flowControl": control})
    return harness.stores.jobs.get("tenant-a", created["jobId"], consistent=True)


def dispatches(job, count: int):
    return [Dispatch(DispatchKind.MANUAL, job.tenant_id, job.job_id, f"{job.job_id}.{n:013d}", n, job.generation)
            for n in range(count)]


def test_a_large_max_concurrency_keeps_every_item_small_and_every_key_below_its_write_rate(harness):
    # Given a key with 64 slots and 200 executions starting within one second
    job = flow_job(harness, {"key": "wide", "maxConcurrency": 64})
    stores, meter = metered(harness)
    gate = FlowGate(stores, harness.clock, random.Random(7).random)
    lease = harness.clock.now_ms() + 600_000
    # When each asks for a slot
    admitted = sum(gate.admit(job, d, lease)[0] for d in dispatches(job, 200))
    # Then exactly 64 start, and no item passes 1 KB: one write unit a start, where one map of
    # 64 slots is about 4 KB (and of 1,000 about 60 KB, 60 units a start: 16 starts a second)
    assert admitted == 64
    assert meter.largest_item[harness.settings.jobs_table] <= 1024, meter.largest_item
    peak, key = meter.peak_writes()
    assert peak < WU_PER_PARTITION, (peak, key)


def test_a_rate_above_what_one_item_takes_is_met_without_a_hot_key(harness):
    # Given a key allowed 1,010 starts a second and 1,030 executions asking within one second
    job = flow_job(harness, {"key": "fast", "ratePerSecond": 1_010})
    # A counter item is a key, a count and an expiry: far below 1 KB, one write unit a call, so
    # each call is billed without reading the item (half the calls, on a shared machine)
    counter = {"tenantId": {"S": "flowrate#tenant-a#fast#1700000000#2"}, "jobId": {"S": "~rate"},
               "used": {"N": "1010"}, "expiresAt": {"N": "1700000120"}}
    assert item_size(counter) < 1024
    stores, meter = metered(harness, peek=False)
    gate = FlowGate(stores, harness.clock, random.Random(3).random)
    lease = harness.clock.now_ms() + 600_000
    admitted = sum(gate.admit(job, d, lease)[0] for d in dispatches(job, 1_030))
    # Then the rate holds, nearly all of it is used, and no counter took 1,000 units in the
    # second (one counter would take 1,030: 1,010 starts and 20 failed conditions, billed)
    assert 990 <= admitted <= 1_010
    peak, key = meter.peak_writes()
    assert peak < WU_PER_PARTITION, (peak, key)


def test_a_full_slot_map_costs_no_read_and_one_failed_write_per_container(harness):
    # Given a key whose one slot is held by an attempt whose lease has not passed
    job = flow_job(harness, {"key": "one", "maxConcurrency": 1})
    stores, meter = metered(harness)
    gate = FlowGate(stores, harness.clock, random.Random(1).random)
    lease = harness.clock.now_ms() + 600_000
    first, *waiting = dispatches(job, 21)
    assert gate.admit(job, first, lease) == (True, True)
    # When 20 others reach the same container within the second
    assert not any(gate.admit(job, d, lease)[0] for d in waiting)
    # Then no read (the map comes back with the failed condition) and one failed write: the
    # container remembers the map full for a second instead of writing again for each
    assert sum(meter.reads.values()) == 0
    assert meter.failed_conditions == 1 + 1  # the first found no map yet and made it; one full
    # A second later the map is tried again
    harness.clock.set_ms(harness.clock.now_ms() + 1_000)
    assert gate.admit(job, waiting[0], lease) == (False, False)
    assert meter.failed_conditions == 3
