"""The worker's batch: every record of a batch runs at once, and a record handed back comes back
when it can make progress (the lease's end, or seconds for a transient error), not after the
lane's visibility timeout of 90 minutes."""
import threading

from jobsched.domain.executions import Dispatch, DispatchKind, scheduled_ms_of
from jobsched.domain.jobs import Priority
from jobsched.handlers import worker as worker_handler
from jobsched.local.events import Function, LanePoller, sqs_event
from jobsched.service import worker as worker_service
from jobsched.store import packs as packs_store
from jobsched.store.queues import Outgoing

from .harness import TENANT_A

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def lane_counts(harness) -> int:
    total = 0
    for url in harness.lane_urls:
        attrs = harness.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        total += sum(int(attrs[k]) for k in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                                              "ApproximateNumberOfMessagesDelayed"))
    return total


def due_batch(harness, count: int = 10):
    """`count` one-time jobs handed off and due: their messages, received from the lanes."""
    jobs = [harness.create_job({"name": f"b{i}", "type": "DELAYED", "delaySeconds": 90, "target": HOOK,
                                "payload": {"n": i}}) for i in range(count)]
    harness.advance(60)
    harness.clock.set_ms(harness.clock.now_ms() + 40_000)
    messages = []
    for url in harness.lane_urls:
        while batch := harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            messages += batch
    assert len(messages) == count
    return jobs, messages


def test_all_ten_records_of_a_batch_run_at_once(harness):
    jobs, messages = due_batch(harness)
    barrier = threading.Barrier(10, timeout=10)  # passes only when all ten calls are in flight together
    real_invoke = harness.target.invoke

    def invoke(*args, **kwargs):
        barrier.wait()
        return real_invoke(*args, **kwargs)

    harness.target.invoke = invoke
    fn = Function("worker", worker_handler.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                        harness.target))
    result = fn.invoke(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:lane"))
    assert result == {"batchItemFailures": []}, result
    assert all(len(harness.target.calls_for(job["jobId"])) == 1 for job in jobs)


def test_a_delivery_handed_back_for_a_live_lease_returns_when_the_lease_ends(harness):
    job = harness.create_job({"name": "slow", "type": "DELAYED", "delaySeconds": 30, "target": HOOK,
                              "timeoutSec": 300})

    def duplicate_delivery_during_the_call():
        call = harness.target.calls[-1]
        stored = harness.stores.jobs.get(TENANT_A, call.job_id)
        dispatch = Dispatch(DispatchKind.FIRE, TENANT_A, call.job_id, call.execution_id,
                            scheduled_ms_of(call.execution_id), stored.generation)
        harness.stores.lanes.send([Outgoing(Priority.NORMAL, dispatch, 0)])
        # another worker container gets the duplicate while this call is in flight: it finds the
        # execution RUNNING under a live lease and hands the message back
        other = Function("worker", worker_handler.make_handler(harness.envs["worker"], harness.clock,
                                                               harness.session, harness.target))
        LanePoller(harness.sqs, harness.lane_urls, other).drain()

    harness.target.during_call = duplicate_delivery_during_the_call
    harness.advance(31)
    assert harness.execution(harness.executions_of(job["jobId"])[0]["executionId"])["status"] == "SUCCEEDED"
    assert lane_counts(harness) == 1  # the duplicate, invisible until the lease (300 s + 60 s) ends
    harness.advance(370, step_ms=10_000)
    assert lane_counts(harness) == 0  # redelivered after the lease, dropped as a duplicate
    assert len(harness.target.calls_for(job["jobId"])) == 1


def test_a_transient_error_is_retried_in_seconds_not_after_the_visibility_timeout(harness, monkeypatch):
    job = harness.create_job({"name": "t", "type": "DELAYED", "delaySeconds": 30, "target": HOOK})
    # The fire rides in a pack: its first write is the pack's claim (store/packs.py).
    real = packs_store.PacksStore.claim
    failures = []

    def flaky(self, key, *args):
        if not failures:
            failures.append(key.pack_id)
            raise ConnectionError("DynamoDB did not answer")
        return real(self, key, *args)

    monkeypatch.setattr(packs_store.PacksStore, "claim", flaky)
    harness.advance(31)
    assert failures and harness.target.calls_for(job["jobId"]) == []
    harness.advance(35)  # back after 30 s (not after the lane's 90-minute visibility timeout)
    assert len(harness.target.calls_for(job["jobId"])) == 1


def test_a_batch_reads_its_jobs_in_one_consistent_request_and_a_job_deleted_meanwhile_is_not_run(harness):
    import boto3

    jobs, messages = due_batch(harness, 5)
    assert harness.request("DELETE", f"/v1/jobs/{jobs[0]['jobId']}")[0] in (200, 204)
    session = boto3.session.Session(region_name="us-east-1")
    reads = []
    for op in ("GetItem", "BatchGetItem"):
        session.events.register(f"provide-client-params.dynamodb.{op}",
                                lambda params, op=op, **_: reads.append((op, params)))
    payloads = {}
    real_invoke = harness.target.invoke

    def invoke(job, *args, **kwargs):
        payloads[job.job_id] = job.spec.payload
        return real_invoke(job, *args, **kwargs)

    harness.target.invoke = invoke
    fn = Function("worker", worker_handler.make_handler(harness.envs["worker"], harness.clock, session,
                                                        harness.target))
    assert fn.invoke(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:lane")) == {"batchItemFailures": []}
    job_reads = [(op, p) for op, p in reads if p.get("TableName", next(iter(p.get("RequestItems", {"": 0}))))
                 == harness.settings.jobs_table]
    assert [op for op, _ in job_reads] == ["BatchGetItem"]
    request = job_reads[0][1]["RequestItems"][harness.settings.jobs_table]
    assert request["ConsistentRead"] is True and "ProjectionExpression" not in request  # whole: payloads too
    assert harness.target.calls_for(jobs[0]["jobId"]) == []
    assert all(len(harness.target.calls_for(job["jobId"])) == 1 for job in jobs[1:])
    assert payloads == {job["jobId"]: {"n": i} for i, job in enumerate(jobs) if i > 0}


def test_when_the_batch_read_fails_each_attempt_reads_its_own_job(harness, monkeypatch):
    from jobsched.store.jobs import JobsStore
    jobs, messages = due_batch(harness, 4)

    def throttled(self, keys, whole=False):
        raise ConnectionError("DynamoDB did not answer")

    monkeypatch.setattr(JobsStore, "get_many", throttled)
    fn = Function("worker", worker_handler.make_handler(harness.envs["worker"], harness.clock, harness.session,
                                                        harness.target))
    assert fn.invoke(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:lane")) == {"batchItemFailures": []}
    assert all(len(harness.target.calls_for(job["jobId"])) == 1 for job in jobs)
