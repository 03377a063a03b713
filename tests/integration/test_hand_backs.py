"""Hand-backs (handlers/worker.py): a record that cannot make progress for more than a second is
sent again as a new message, delayed, and the received one deleted, so that hand-backs never pile
up among a lane's in-flight messages (SQS answers receives past about 120,000 of them with nothing:
the lane would stall for every tenant). The strict layer counts them and refuses as SQS does."""
import json

import pytest
from botocore.exceptions import ClientError

from jobsched.domain.executions import Dispatch, DispatchKind, execution_id_for
from jobsched.domain.jobs import Priority
from jobsched.domain.schedule import parse_instant
from jobsched.service import packs as packs_service
from jobsched.service import worker as worker_service
from jobsched.settings import MAX_RECEIVE_COUNT
from jobsched.store.queues import Outgoing

from .harness import TENANT_A

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def lane_attributes(harness, url: str | None = None) -> dict[str, int]:
    totals: dict[str, int] = {}
    for lane in [url] if url else harness.lane_urls:
        attrs = harness.sqs.get_queue_attributes(QueueUrl=lane, AttributeNames=["All"])["Attributes"]
        for name in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                     "ApproximateNumberOfMessagesDelayed"):
            totals[name] = totals.get(name, 0) + int(attrs[name])
    return totals


def in_flight(harness) -> int:
    return lane_attributes(harness)["ApproximateNumberOfMessagesNotVisible"]


def jobs_due_in_two_minutes(harness, count: int) -> list[dict]:
    return [harness.create_job({"name": f"e{i}", "type": "DELAYED", "delaySeconds": 120, "target": HOOK})
            for i in range(count)]


def send_early(harness, jobs: list[dict]) -> None:
    """Each job's fire, visible now although due in two minutes (a delay rounded down twice, a
    restored snapshot): the worker hands it back until its due second."""
    for job in jobs:
        stored = harness.stores.jobs.get(TENANT_A, job["jobId"])
        due = parse_instant(job["nextFireAt"], "nextFireAt")
        dispatch = Dispatch(DispatchKind.FIRE, TENANT_A, job["jobId"], execution_id_for(job["jobId"], due), due,
                            stored.generation)
        harness.stores.lanes.send([Outgoing(Priority.NORMAL, dispatch, 0)])


def test_records_handed_back_for_minutes_leave_the_lane_s_in_flight_messages_and_the_lane_goes_on(harness):
    harness.strict.limits.sqs_in_flight = 3  # SQS's ~120,000, made small
    jobs = jobs_due_in_two_minutes(harness, 6)
    send_early(harness, jobs[:5])
    assert harness.deliver() == 5  # each arrives two minutes early and is handed back
    assert in_flight(harness) == 0  # delayed messages, not in-flight ones
    send_early(harness, jobs[5:])
    assert harness.deliver() == 1 and harness.poller.over_limit == 0  # the lane still delivers
    harness.advance(150, step_ms=5_000)
    assert harness.poller.over_limit == 0
    for job in jobs:  # each ran once at its due second: the early copy and the tick's dispatch met one claim
        assert len(harness.target.calls_for(job["jobId"])) == 1
        [execution] = harness.executions_of(job["jobId"])
        assert execution["status"] == "SUCCEEDED" and execution["attempt"] == 1
    assert in_flight(harness) == 0


def test_a_crash_between_the_re_send_and_the_delete_leaves_a_duplicate_that_the_claim_absorbs(harness):
    [job] = jobs_due_in_two_minutes(harness, 1)
    send_early(harness, [job])
    inner = harness.worker._handler

    def dies_before_its_answer(event, context):
        inner(event, context)  # the hand-back is sent again ...
        raise RuntimeError("the process died")  # ... and the received message is never deleted

    harness.worker._handler = dies_before_its_answer
    delayed = lane_attributes(harness, harness.lane_urls[1])["ApproximateNumberOfMessagesDelayed"]  # the tick's
    assert harness.poller.poll_once(harness.lane_urls[1]) == 1
    harness.worker._handler = inner
    counts = lane_attributes(harness, harness.lane_urls[1])
    assert counts["ApproximateNumberOfMessagesDelayed"] == delayed + 1  # the new message
    assert counts["ApproximateNumberOfMessagesNotVisible"] == 1  # the original, back after its visibility
    harness.advance(200, step_ms=5_000)  # the tick's dispatch, the re-sent copy and the original: one run
    assert len(harness.target.calls_for(job["jobId"])) == 1
    [execution] = harness.executions_of(job["jobId"])
    assert execution["status"] == "SUCCEEDED" and execution["attempt"] == 1
    # Copies that met a running attempt came back once its lease (300 s + 60 s) ended, as duplicates.
    harness.advance(400, step_ms=10_000)
    assert len(harness.target.calls_for(job["jobId"])) == 1
    assert sum(lane_attributes(harness).values()) == 0


def test_a_record_that_fails_every_receive_rests_in_the_dlq_after_five_receives_in_all(harness, monkeypatch):
    [job] = jobs_due_in_two_minutes(harness, 1)
    tried = []

    def broken(self, pack, *args, **kwargs):  # a fire riding in a pack (service/packs.py)
        tried.append(pack.entries[0].receives)
        raise ConnectionError("DynamoDB did not answer")

    def broken_alone(self, dispatch, *args, **kwargs):  # or sent alone: its writer found its bucket claimed
        tried.append(dispatch.receives)
        raise ConnectionError("DynamoDB did not answer")

    monkeypatch.setattr(packs_service.PackRunner, "run", broken)
    monkeypatch.setattr(worker_service.Worker, "process", broken_alone)
    harness.advance(125 + 30 + 60 + 120 + 240 + 60, step_ms=5_000)
    assert tried == list(range(MAX_RECEIVE_COUNT))  # each receive a new message carrying the count so far
    assert sum(lane_attributes(harness).values()) == 0
    dlq = harness.sqs.get_queue_url(QueueName=json.loads(harness.sqs.get_queue_attributes(
        QueueUrl=harness.lane_urls[1], AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"])
        ["deadLetterTargetArn"].rsplit(":", 1)[-1])["QueueUrl"]
    [message] = harness.sqs.receive_message(QueueUrl=dlq)["Messages"]
    rested = harness.stores.lanes.open(message["Body"])
    assert rested.job_id == job["jobId"] and rested.receives == 0  # moved back, it gets five receives again
    harness.advance(1000, step_ms=10_000)
    assert len(tried) == MAX_RECEIVE_COUNT


def test_the_strict_layer_refuses_receives_past_a_queue_s_in_flight_limit_as_sqs_does(harness):
    harness.strict.limits.sqs_in_flight = 2
    url = harness.lane_urls[2]
    for i in range(4):
        harness.sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    first = harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
    assert len(first) == 2
    with pytest.raises(ClientError) as refused:  # a short poll: OverLimit
        harness.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    assert refused.value.response["Error"]["Code"] == "OverLimit"
    assert harness.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", []) == []  # a long poll
    harness.sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    [second] = harness.sqs.receive_message(QueueUrl=url)["Messages"]  # one deleted: one more
    harness.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"], VisibilityTimeout=0)
    assert len(harness.sqs.receive_message(QueueUrl=url)["Messages"]) == 1  # visible again: not in flight
    harness.clock.advance_ms(harness.strict.in_flight.defaults[(url, "VisibilityTimeout")] * 1000 + 1000)
    assert len(harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]) == 2
