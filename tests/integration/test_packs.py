"""Packs (docs/architecture.md, "Packs"): the fires of one lane, segment and second ride in one
message, claimed by one write and recorded in one item. The crash points: a crash mid-pack
re-runs only the entries not yet recorded, with the same ids; a stale holder's checkpoint loses
its condition and is counted, never applied; an entry handed back out of its pack runs once."""
import threading

import pytest

from jobsched.domain.errors import ConditionLost
from jobsched.domain.executions import Dispatch, DispatchKind, execution_id_for
from jobsched.domain.packs import PackKey
from jobsched.handlers import worker as worker_handler
from jobsched.local.events import Function, sqs_event
from jobsched.service import flow as flow_service
from jobsched.service import worker as worker_service
from jobsched.store import packs as packs_store
from jobsched.store.queues import Outgoing

from .harness import TENANT_A, ProcessDied

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def drain(harness) -> list[dict]:
    messages = []
    for url in harness.lane_urls:
        while batch := harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                   AttributeNames=["All"]).get("Messages", []):
            messages += [{**m, "url": url} for m in batch]
    return messages


def delete(harness, messages: list[dict]) -> None:
    for m in messages:
        harness.sqs.delete_message(QueueUrl=m["url"], ReceiptHandle=m["ReceiptHandle"])


def event(messages: list[dict]) -> dict:
    """The event the lane's event source mapping would deliver (its queue's ARN)."""
    [url] = {m["url"] for m in messages}
    return sqs_event(messages, f"arn:aws:sqs:us-east-1:123456789012:{url.rsplit('/', 1)[-1]}")


def a_pack(harness, count: int, target: dict = HOOK, payload=None) -> tuple[list[dict], list[dict]]:
    """`count` every-minute jobs of one segment, their fires six minutes on sent as one pack (the
    writers' own direct dispatches taken off the lanes), the clock at their due second: the jobs
    and the pack's message, received. `payload(i)`: the i-th job's payload."""
    segment_of = harness.stores.lanes.segment_of
    jobs: list[dict] = []
    while len(jobs) < count:
        job = harness.create_job({"name": f"p{len(jobs)}", "type": "CRON", "schedule": "* * * * *",
                                  "target": target, "timeoutSec": 30,
                                  **({"payload": payload(len(jobs))} if payload else {})})
        if not jobs or segment_of(job["jobId"]) == segment_of(jobs[0]["jobId"]):
            jobs.append(job)
        else:
            assert harness.request("DELETE", f"/v1/jobs/{job['jobId']}")[0] in (200, 204)
        harness.clock.advance_ms(40)  # within the tenant's 50 creates a second, however many it takes
    # Their fires six minutes on: a job written just before its fire leaves its pack (YOUNG_JOB_MS).
    due = (harness.clock.now_ms() // 60_000 + 6) * 60_000
    dispatches = []
    for job in jobs:
        stored = harness.stores.jobs.get(TENANT_A, job["jobId"])
        dispatches.append(Dispatch(DispatchKind.FIRE, stored.tenant_id, stored.job_id,
                                   execution_id_for(stored.job_id, due), due, stored.generation, run=1))
    harness.stores.lanes.send([Outgoing(stored.spec.priority, d, 0) for d in dispatches])
    harness.clock.set_ms(due)
    received = drain(harness)
    # The writers' own dispatches (delayed until the due second) are taken off: this pack carries them.
    [message] = [m for m in received if len(harness.stores.lanes.seal.open_pack(m["Body"]).entries) == count]
    delete(harness, [m for m in received if m is not message])
    return jobs, [message]


def same_pack(harness, message: dict) -> list[dict]:
    """The copies of this pack's message on the lanes now (anything else received is printed)."""
    pack_id = harness.stores.lanes.seal.open_pack(message["Body"]).pack_id
    received = drain(harness)
    return [m for m in received if harness.stores.lanes.seal.open_pack(m["Body"]).pack_id == pack_id]


def worker_fn(harness) -> Function:
    return Function("worker", worker_handler.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                          harness.target))


def pack_item(harness, message: dict) -> dict:
    key = PackKey.parse(harness.stores.lanes.seal.open_pack(message["Body"]).pack_id)
    return harness.stores.executions._table.get_item(Key={"jobId": key.partition, "executionId": key.sort_key},
                                                     ConsistentRead=True)["Item"]


def test_one_message_one_claim_and_the_api_shows_every_entry(harness):
    jobs, messages = a_pack(harness, 4)
    assert worker_fn(harness).invoke(event(messages)) == {"batchItemFailures": []}
    item = pack_item(harness, messages[0])
    assert item["attempt"] == 1 and len(item["outcomes"]) == 4
    for job in jobs:
        [call] = harness.target.calls_for(job["jobId"])
        assert call.attempt == 1
        execution = harness.execution(call.execution_id)  # from the pack: no item of its own
        assert execution["status"] == "SUCCEEDED" and execution["attempt"] == 1
        assert harness.stores.executions.get(job["jobId"], call.execution_id) is None
        assert [e["executionId"] for e in harness.executions_of(job["jobId"])] == [call.execution_id]


def test_a_crash_mid_pack_runs_again_only_the_entries_not_recorded_with_the_same_ids(harness, monkeypatch):
    jobs, messages = a_pack(harness, 5)
    slow = {jobs[3]["jobId"], jobs[4]["jobId"]}
    recorded = threading.Event()
    real_checkpoint = packs_store.PacksStore.checkpoint

    def checkpoint(self, key, attempt, outcomes, release=False):
        real_checkpoint(self, key, attempt, outcomes, release)
        if outcomes:
            recorded.set()

    monkeypatch.setattr(packs_store.PacksStore, "checkpoint", checkpoint)
    real_invoke = harness.target.invoke
    died = []

    def invoke(job, dispatch, attempt, **kwargs):
        outcome = real_invoke(job, dispatch, attempt, **kwargs)  # the call takes effect ...
        if job.job_id in slow and len(died) < 2:
            assert recorded.wait(10)  # ... after the first checkpoint recorded the quick ones ...
            died.append(dispatch.execution_id)
            raise ProcessDied("the worker died before recording it")  # ... and is never recorded
        return outcome

    harness.target.invoke = invoke
    with pytest.raises(BaseException):
        worker_fn(harness).invoke(event(messages))
    assert len(died) == 2 and len(pack_item(harness, messages[0])["outcomes"]) == 3
    # The message comes back after its visibility; the pack's lease (30 s + 60 s) has ended.
    harness.clock.advance_ms(120_000)
    [again] = same_pack(harness, messages[0])
    assert worker_fn(harness).invoke(event([again])) == {"batchItemFailures": []}
    for job in jobs:
        calls = harness.target.calls_for(job["jobId"])
        assert len(calls) == (2 if job["jobId"] in slow else 1)
        assert {(c.execution_id, c.attempt) for c in calls} == {(calls[0].execution_id, 1)}  # same id, X-Attempt
        assert harness.execution(calls[0].execution_id)["status"] == "SUCCEEDED"
    assert pack_item(harness, messages[0])["attempt"] == 2


def test_a_stale_holders_checkpoint_loses_its_condition_and_is_never_applied(harness, monkeypatch):
    jobs, messages = a_pack(harness, 2)
    lost = []
    real_checkpoint = packs_store.PacksStore.checkpoint

    def checkpoint(self, key, attempt, outcomes, release=False):
        try:
            real_checkpoint(self, key, attempt, outcomes, release)
        except ConditionLost:
            lost.append((attempt, sorted(outcomes)))
            raise

    monkeypatch.setattr(packs_store.PacksStore, "checkpoint", checkpoint)
    taken_over_at, hooked = [], []

    def another_delivery_takes_the_pack_over():
        # The first holder's call hangs past its lease (30 s + 60 s); the message comes back to
        # another container, which claims the pack (attempt 2) and runs what is not recorded.
        hooked.append(harness.target.calls[-1].execution_id)
        harness.clock.advance_ms(100_000)
        taken_over_at.append(harness.clock.now_ms())
        assert worker_fn(harness).invoke(event(messages)) == {"batchItemFailures": []}

    harness.target.during_call = another_delivery_takes_the_pack_over
    assert worker_fn(harness).invoke(event(messages)) == {"batchItemFailures": []}
    # The first holder's checkpoint of the hung call lost its condition (counted: StalePackCheckpoints) ...
    assert [attempt for attempt, ids in lost if hooked[0] in ids] == [1]
    item = pack_item(harness, messages[0])
    assert item["attempt"] == 2
    # ... and was never applied: the outcome recorded is the second holder's.
    assert int(item["outcomes"][hooked[0]]["b"]) >= taken_over_at[0]
    for job in jobs:
        [execution] = harness.executions_of(job["jobId"])
        assert execution["status"] == "SUCCEEDED"


def test_an_entry_handed_back_out_of_its_pack_runs_once_through_a_crash_and_a_duplicate(harness, monkeypatch):
    jobs, messages = a_pack(harness, 3)
    held_job = jobs[1]["jobId"]
    real_admit = worker_service.Worker.admit
    real_hold_back = flow_service.FlowGate.hold_back
    held, sent = [], []

    def admit(self, job, lease_until_ms):
        if job.job_id == held_job and not held:
            held.append(job.job_id)
            return None  # its tenant holds its lane share: the entry leaves the pack (BACK)
        return real_admit(self, job, lease_until_ms)

    def hold_back(self, job, dispatch):
        if not sent:
            sent.append("died")
            raise ProcessDied("died after the BACK checkpoint, before the re-send")
        real_hold_back(self, job, dispatch)
        real_hold_back(self, job, dispatch)  # and a duplicate of the re-sent message
        sent.append(dispatch.execution_id)

    monkeypatch.setattr(worker_service.Worker, "admit", admit)
    monkeypatch.setattr(flow_service.FlowGate, "hold_back", hold_back)
    with pytest.raises(BaseException):
        worker_fn(harness).invoke(event(messages))
    assert harness.target.calls_for(held_job) == []
    harness.clock.advance_ms(120_000)
    [again] = same_pack(harness, messages[0])
    assert worker_fn(harness).invoke(event([again])) == {"batchItemFailures": []}
    assert len(sent) == 2  # sent again by the redelivered pack (twice: a duplicate)
    harness.clock.advance_ms(60_000)
    backs = drain(harness)
    assert len(backs) == 2
    assert worker_fn(harness).invoke(event(backs)) == {"batchItemFailures": []}
    [call] = harness.target.calls_for(held_job)  # once, whatever the crash and the duplicate
    assert harness.execution(call.execution_id)["status"] == "SUCCEEDED"
    for job in jobs:
        assert len(harness.target.calls_for(job["jobId"])) == 1
