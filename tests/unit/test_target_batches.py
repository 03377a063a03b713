"""Batched target calls (store/target_batches.py): each entry's outcome from its batch's answer, a
whole-request refusal that one entry may cause retried entry by entry, requests cut at ten
entries and at the service's bytes."""
from dataclasses import replace

import boto3
from botocore.stub import ANY, Stubber

from jobsched.domain.executions import Dispatch, DispatchKind
from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
from jobsched.domain.schedule import one_time_schedule
from jobsched.store.target_batches import TargetBatches, _chunks, batch_key
from jobsched.store.targets import AwsTargetInvoker

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/inbox"
BUS = "arn:aws:events:us-east-1:123456789012:event-bus/b"


def calls_to(target: Target, count: int, payload=None) -> list:
    spec = JobSpec(name="t", schedule=one_time_schedule(0), target=target, payload=payload or {"n": 1})
    out = []
    for i in range(count):
        job = Job("tenant", f"job_{i}", spec, JobState.ACTIVE, 1, 1, 0, 0)
        out.append((job, Dispatch(DispatchKind.FIRE, "tenant", job.job_id, f"job_{i}.0000000000001", 1, 1, 1), 1))
    return out


def test_each_entry_gets_its_own_outcome_and_a_kms_refusal_is_not_retried():
    invoker = AwsTargetInvoker(boto3.session.Session(region_name="us-east-1"))
    calls = calls_to(Target(TargetType.SQS, {"queueUrl": QUEUE}), 3)
    with Stubber(invoker.client("sqs", QUEUE, 300)) as stub:
        stub.add_response("send_message_batch", {
            "Successful": [{"Id": "e0", "MessageId": "m0", "MD5OfMessageBody": "x"},
                           {"Id": "e2", "MessageId": "m2", "MD5OfMessageBody": "x"}],
            "Failed": [{"Id": "e1", "SenderFault": True, "Code": "KMS.DisabledException", "Message": "disabled"}]},
            {"QueueUrl": QUEUE, "Entries": ANY})
        first, second, third = TargetBatches(invoker).invoke_batch(calls)
    assert first.ok and first.output == {"messageId": "m0"} and third.output == {"messageId": "m2"}
    assert not second.ok and not second.retryable and "KMS.DisabledException" in second.error


def test_a_request_refused_for_an_entrys_size_is_sent_entry_by_entry():
    invoker = AwsTargetInvoker(boto3.session.Session(region_name="us-east-1"))
    calls = calls_to(Target(TargetType.SQS, {"queueUrl": QUEUE}), 2)
    with Stubber(invoker.client("sqs", QUEUE, 300)) as stub:
        stub.add_client_error("send_message_batch", "InvalidParameterValue", "Message must be shorter")
        stub.add_response("send_message", {"MessageId": "a"})
        stub.add_client_error("send_message", "InvalidParameterValue", "Message must be shorter")
        first, second = TargetBatches(invoker).invoke_batch(calls)
        stub.assert_no_pending_responses()
    assert first.ok and not second.ok and "InvalidParameterValue" in second.error


def test_a_refusal_of_the_whole_request_is_each_entrys_as_a_single_call_gets_it():
    invoker = AwsTargetInvoker(boto3.session.Session(region_name="us-east-1"))
    calls = calls_to(Target(TargetType.SQS, {"queueUrl": QUEUE}), 3)
    with Stubber(invoker.client("sqs", QUEUE, 300)) as stub:
        stub.add_client_error("send_message_batch", "AccessDenied", "not allowed")
        outcomes = TargetBatches(invoker).invoke_batch(calls)
    assert [(o.ok, o.retryable) for o in outcomes] == [(False, False)] * 3
    assert all("AccessDenied" in o.error for o in outcomes)


def test_put_events_failures_are_matched_to_their_entries_in_order():
    invoker = AwsTargetInvoker(boto3.session.Session(region_name="us-east-1"))
    target = Target(TargetType.EVENTBRIDGE, {"eventBusName": BUS, "source": "s", "detailType": "d"})
    calls = calls_to(target, 2)
    with Stubber(invoker.client("events", BUS, 300)) as stub:
        stub.add_response("put_events", {"FailedEntryCount": 1, "Entries": [
            {"ErrorCode": "ThrottlingException", "ErrorMessage": "slow down"}, {"EventId": "ev1"}]}, {"Entries": ANY})
        first, second = TargetBatches(invoker).invoke_batch(calls)
    assert not first.ok and first.retryable and "ThrottlingException" in first.error
    assert second.ok and second.output == {"eventId": "ev1"}


def test_requests_hold_ten_entries_and_the_services_bytes_and_keys_part_what_cannot_share_one():
    sizes = [(i, {}, 100_000) for i in range(25)]
    assert [len(c) for c in _chunks(sizes, 1_048_576)] == [10, 10, 5]
    assert [len(c) for c in _chunks(sizes, 262_144)] == [2] * 12 + [1]
    [(job, _, _)] = calls_to(Target(TargetType.SQS, {"queueUrl": QUEUE}), 1)
    assert batch_key(job) != batch_key(replace(job, tenant_id="other"))
    assert batch_key(job) != batch_key(replace(job, spec=replace(job.spec, timeout_sec=60)))
    assert batch_key(replace(job, spec=replace(job.spec, target=Target(TargetType.HTTP, {"url": "https://x"})))) is None


def test_calls_share_a_request_only_within_the_window_and_each_target_alone():
    from types import SimpleNamespace

    from jobsched.domain.clock import FakeClock
    from jobsched.service.packs import BATCH_WINDOW_MS, PackRunner

    queue = [(replace(d, due_ms=1_000 + offset), job, None) for offset, (job, d, _) in
             zip((0, 40, BATCH_WINDOW_MS, BATCH_WINDOW_MS + 1, 500), calls_to(Target(TargetType.SQS, {"queueUrl": QUEUE}), 5))]
    hook = [(d, job, None) for job, d, _ in calls_to(Target(TargetType.HTTP, {"url": "https://x/h"}), 2)]
    worker = SimpleNamespace(batch_key=batch_key)
    runner = PackRunner(worker, SimpleNamespace(packs=None, jobs=None, executions=None), None, FakeClock(0), pool=object())
    groups = runner._groups(queue + hook)
    # The webhook's calls one by one; the queue's: 0, 40 and 100 ms together, 101 ms and 500 ms apart
    assert sorted([d.due_ms - 1_000 for d, _, _ in g] for g in groups if g[0][1].spec.target.type is TargetType.SQS) \
        == [[0, 40, BATCH_WINDOW_MS], [BATCH_WINDOW_MS + 1], [500]]
    assert sum(1 for g in groups if g[0][1].spec.target.type is TargetType.HTTP and len(g) == 1) == 2
