"""Job snapshots (docs/architecture.md, "The worker reads no job"): the tick's hand-off puts each
fire's job in its pack entry, the worker runs the pack without reading a job, and a change answered
after the hand-off (pause, update, delete) stops the fire through the fence it writes in the pack's
partition."""
import json

import boto3

from jobsched.domain.packs import FENCE_PREFIX, SNAPSHOT_TRUST_MS, Pack, partition_of
from jobsched.handlers import worker as worker_handler
from jobsched.local.events import Function, sqs_event

from .test_faults import take_messages

MINUTE = 60_000
HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def handed_off(harness, count: int, extra: dict | None = None) -> tuple[list[dict], int]:
    """`count` jobs due every minute, created minutes ahead (their fires ride one pack), the tick
    that hands 00:03 off run 0.56 s into 00:01: (the jobs, 00:03). The clock is left at 00:01:00.56."""
    start = harness.clock.now_ms()
    due = (start // MINUTE + 3) * MINUTE
    jobs = [harness.create_job({"name": f"s{i}", "type": "CRON", "schedule": "* * * * *", "target": HOOK,
                                "payload": {"n": i}, **(extra or {})}) for i in range(count)]
    harness.advance((due - 2 * MINUTE - start) / 1000 - 0.001)
    harness.clock.set_ms(due - 2 * MINUTE + 560)
    harness.tick_all()
    return jobs, due


def the_pack_of(harness, due: int) -> list[dict]:
    """The lane messages due at `due` (taken off their lanes); the earlier fires are dropped."""
    harness.clock.set_ms(due)
    return [m for m in take_messages(harness) if harness.stores.lanes.seal.open_pack(m["Body"]).due_ms == due]


def run_worker(harness, messages) -> list[tuple[str, dict]]:
    """The worker handler on its own session; returns its DynamoDB reads (operation, parameters)."""
    session = boto3.session.Session(region_name="us-east-1")
    reads = []
    for op in ("GetItem", "BatchGetItem", "Query"):
        session.events.register(f"provide-client-params.dynamodb.{op}",
                                lambda params, op=op, **_: reads.append((op, params)))
    fn = Function("worker", worker_handler.make_handler(harness.envs["worker"], harness.clock, session,
                                                        harness.target))
    assert fn.invoke(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:lane")) == {"batchItemFailures": []}
    return reads


def job_reads(harness, reads) -> list[str]:
    table = harness.settings.jobs_table
    return [op for op, p in reads if p.get("TableName") == table or table in p.get("RequestItems", {})]


def fence_reads(reads) -> list[dict]:
    return [p for op, p in reads if op == "Query"
            and p.get("ExpressionAttributeValues", {}).get(":lo", {}).get("S", "").startswith(FENCE_PREFIX)]


def calls_at(harness, job: dict, due: int) -> list[int]:
    return [c.at_ms for c in harness.target.calls_for(job["jobId"]) if c.execution_id == f"{job['jobId']}.{due}"]


def test_a_pack_of_handed_off_fires_runs_without_reading_a_job(harness):
    jobs, due = handed_off(harness, 6)
    messages = the_pack_of(harness, due)
    # Given the six fires in packs (one a segment), each entry carrying its job as the tick read it
    packs = [harness.stores.lanes.seal.open_pack(m["Body"]) for m in messages]
    assert all(p.pack_id is not None for p in packs) and sum(len(p.entries) for p in packs) == 6
    assert len(packs) < 6  # some pack holds more than one
    assert all(d.snapshot is not None and json.loads(d.snapshot["schedule"])["type"] == "CRON"
               for p in packs for d in p.entries)
    # When the worker runs them at their due second
    reads = run_worker(harness, messages)
    # Then it reads no job: one strongly consistent Query of each pack partition's fences, and
    # every fire ran with its payload
    assert job_reads(harness, reads) == []
    fences = fence_reads(reads)
    assert sorted(f["ExpressionAttributeValues"][":p"]["S"] for f in fences) == \
        sorted(partition_of(int(p.pack_id.split("#")[0]), due // 1000) for p in packs)
    assert all(f["ConsistentRead"] is True for f in fences)
    assert all(calls_at(harness, job, due) == [due] for job in jobs)
    assert sorted(c.payload["n"] for job in jobs for c in harness.target.calls_for(job["jobId"])
                  if c.execution_id.endswith(str(due))) == [0, 1, 2, 3, 4, 5]


def test_a_pack_later_than_its_snapshots_trust_reads_its_jobs(harness):
    jobs, due = handed_off(harness, 3)
    messages = the_pack_of(harness, due)
    # Given the pack is delivered long after its due second (past SNAPSHOT_TRUST_MS)
    harness.clock.set_ms(due + SNAPSHOT_TRUST_MS + 1_000)
    reads = run_worker(harness, messages)
    # Then the worker reads its jobs (a consistent batch read a pack), and no fences
    assert set(job_reads(harness, reads)) == {"BatchGetItem"}
    assert fence_reads(reads) == []
    assert all(len(calls_at(harness, job, due)) == 1 for job in jobs)


def test_an_update_answered_after_the_hand_off_stops_the_old_fire(harness):
    jobs, due = handed_off(harness, 2)
    # Given the fires of 00:03 handed off with their snapshots, and then one job updated (00:01:30)
    harness.clock.set_ms(due - 90_000)
    status, _ = harness.request("PUT", f"/v1/jobs/{jobs[0]['jobId']}",
                                {"name": "s0", "type": "CRON", "schedule": "0 0 1 1 *", "target": HOOK})
    assert status == 200
    # When the pack runs at 00:03
    reads = run_worker(harness, the_pack_of(harness, due))
    # Then the updated job's old fire is not run (its fence sent the worker to read it), the other
    # one's is, and only the updated job was read
    assert calls_at(harness, jobs[0], due) == []
    assert calls_at(harness, jobs[1], due) == [due]
    table = harness.settings.jobs_table
    read = [k["jobId"]["S"] for op, p in reads if op == "BatchGetItem" for k in p["RequestItems"][table]["Keys"]]
    assert read == [jobs[0]["jobId"]]


def test_a_fence_only_rises(harness):
    packs = harness.stores.packs
    packs.fence(0, 1_000, "job_x", 5)
    packs.fence(0, 1_000, "job_x", 3)  # a lower one, landing second, changes nothing
    assert packs.fences(0, 1_000) == {"job_x": 5}
    packs.fence(0, 1_000, "job_x", 7)
    assert packs.fences(0, 1_000) == {"job_x": 7}
    # and a partition's fences are not packs to its readers
    assert packs.partition(0, 1_000, consistent=True) == ({}, [])


def test_a_job_that_pauses_itself_after_failures_carries_no_snapshot(harness):
    _, due = handed_off(harness, 1, {"pauseAfterFailures": 3})
    messages = the_pack_of(harness, due)
    entries = [d for m in messages for d in harness.stores.lanes.seal.open_pack(m["Body"]).entries]
    assert entries and all(d.snapshot is None for d in entries)
    reads = run_worker(harness, messages)
    assert job_reads(harness, reads)  # its failure count moves without a new generation: read


def test_a_fence_without_a_change_costs_a_read_not_a_fire(harness):
    jobs, due = handed_off(harness, 2)
    # Given a fence for one job's fire but no change after it (a change that failed after its
    # fences were written)
    job = harness.stores.jobs.get("tenant-a", jobs[0]["jobId"], consistent=True)
    messages = the_pack_of(harness, due)
    segment = harness.stores.lanes.seal.open_pack(messages[0]["Body"]).pack_id.split("#")[0]
    for m in messages:
        pack = harness.stores.lanes.seal.open_pack(m["Body"])
        if any(d.job_id == job.job_id for d in pack.entries):
            segment = pack.pack_id.split("#")[0]
    harness.stores.packs.fence(int(segment), due // 1000, job.job_id, job.generation + 1)
    # When the pack runs
    reads = run_worker(harness, messages)
    # Then the fenced job is read again, and both fire
    assert job_reads(harness, reads) == ["BatchGetItem"]
    assert all(calls_at(harness, j, due) == [due] for j in jobs)


def test_a_bucket_claimed_while_a_change_is_written_is_fenced_after_it(harness, monkeypatch):
    from jobsched.store.jobs import JobsStore

    start = harness.clock.now_ms()
    due = (start // MINUTE + 3) * MINUTE
    job = harness.create_job({"name": "c", "type": "CRON", "schedule": "* * * * *", "target": HOOK})
    harness.advance((due - 2 * MINUTE - start) / 1000 - 0.001)  # 00:03's bucket not claimed yet
    harness.clock.set_ms(due - 2 * MINUTE + 300)
    # Given an update whose fences are written before 00:03's and 00:04's buckets are claimed, and
    # the ticks that claim them and hand their fires off (with the job as it was) between those
    # fences and the job's write
    real_save = JobsStore.save
    ticked = []

    def tick_first(self, before, after):
        if not ticked:
            # (two runs: the fences written before the job's write reach one bucket past the
            # claimed ones; the second batch, after the write, covers what a tick claimed beyond)
            ticked.append(True)
            for at in (due - 2 * MINUTE + 560, due - MINUTE + 560):
                harness.clock.set_ms(at)
                harness.tick_all()
        return real_save(self, before, after)

    monkeypatch.setattr(JobsStore, "save", tick_first)
    status, _ = harness.request("PUT", f"/v1/jobs/{job['jobId']}",
                                {"name": "c", "type": "CRON", "schedule": "0 0 1 1 *", "target": HOOK})
    assert status == 200 and ticked
    # When the pack of 00:04 runs
    messages = the_pack_of(harness, due + MINUTE)
    assert any(d.snapshot is not None for m in messages for d in harness.stores.lanes.seal.open_pack(m["Body"]).entries)
    run_worker(harness, messages)
    # Then the old fire does not run: the bucket claimed meanwhile was fenced after the write
    assert calls_at(harness, job, due + MINUTE) == []


def test_a_pause_whose_fences_failed_is_repeated_and_stops_the_fire(harness, monkeypatch):
    from jobsched.store.packs import PacksStore

    jobs, due = handed_off(harness, 1)
    harness.clock.set_ms(due - 90_000)
    # Given a pause answered without its fences (a previous version's API during an upgrade)
    real_fence = PacksStore.fence
    monkeypatch.setattr(PacksStore, "fence", lambda *args, **kwargs: None)
    assert harness.request("POST", f"/v1/jobs/{jobs[0]['jobId']}/pause")[0] == 200
    monkeypatch.setattr(PacksStore, "fence", real_fence)
    # When the pause is repeated (harmless: the job is PAUSED already), then the pack runs
    assert harness.request("POST", f"/v1/jobs/{jobs[0]['jobId']}/pause")[0] == 200
    run_worker(harness, the_pack_of(harness, due))
    # Then the fire handed off before the pause does not run
    assert calls_at(harness, jobs[0], due) == []


def test_a_failed_fence_query_reads_the_jobs_instead(harness, monkeypatch):
    from jobsched.store.packs import PacksStore

    jobs, due = handed_off(harness, 2)

    def refused(*args, **kwargs):
        raise RuntimeError("ProvisionedThroughputExceededException")

    monkeypatch.setattr(PacksStore, "fences", refused)
    reads = run_worker(harness, the_pack_of(harness, due))
    # Then the pack does not wait for a retry: its entries read their jobs and fire on time
    assert set(job_reads(harness, reads)) == {"BatchGetItem"}
    assert all(calls_at(harness, job, due) == [due] for job in jobs)


def test_a_timer_left_in_another_segment_carries_no_snapshot(harness):
    from jobsched.domain.timers import Timer, TimerKind, minute_of, segment_of
    from jobsched.service.handoff import HandOff
    from jobsched.store.aws import build_stores

    # Given a job whose segment moved with a change of the segment count (its timer in the old one)
    segments = harness.settings.segments
    job = None
    while job is None or segment_of(job["jobId"], segments) == segment_of(job["jobId"], segments + 1):
        job = harness.create_job({"name": "m", "type": "CRON", "schedule": "* * * * *", "target": HOOK})
    items: dict = {}
    stored = harness.stores.jobs.get_many([("tenant-a", job["jobId"])], whole=True, items=items)[("tenant-a",
                                                                                                   job["jobId"])]
    due = (minute_of(harness.clock.now_ms()) + 2) * MINUTE
    old = segment_of(job["jobId"], segments)
    stores = build_stores(harness.settings, harness.session, harness.clock)
    sent = []
    stores.lanes.send = lambda outgoing: sent.extend(outgoing) or 1
    # When a hand-off under the new count hands its timer off
    for count, expect in ((segments + 1, False), (segments, True)):
        sent.clear()
        timer = Timer(due, TimerKind.FIRE, "tenant-a", job["jobId"], stored.generation, old)
        HandOff(stores, harness.clock, count).hand_off([timer], {("tenant-a", job["jobId"]): stored},
                                                      claimed_through=minute_of(due), snapshots=items)
        entries = [o.dispatch for o in sent if o.dispatch.due_ms == due]
        # Then it carries no snapshot (the API fences the job's new segment's partitions), and the
        # same timer under the count it was written with does
        assert entries and all((d.snapshot is not None) is expect for d in entries), (count, entries)
