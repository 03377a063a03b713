"""Issue 28, item 7: an invocation that fails as a whole (Lambda's time limit, out of memory, a
crash) used to bring all ten records back only after the lane's 5,400 s visibility timeout. The
handler now cuts its records' visibility to what the batch can take, and stops before its limit,
handing back what still runs; fake clock, moto's SQS on the same clock."""
import threading

from jobsched.handlers import worker
from jobsched.local.events import sqs_event

from .aws_doubles import FunctionKilled, MortalContext

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


class WorkerContext(MortalContext):
    """The worker's Lambda context, its remaining time counted on the fake clock."""
    function_name = "jobsched-worker"
    memory_limit_in_mb = 512
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-worker"
    aws_request_id = "test"
    log_group_name = ""
    log_stream_name = "local"


def due_messages(harness, count, timeout_sec=30):
    """`count` one-off jobs due now, their lane messages received (not deleted) as the ESM would."""
    jobs = [harness.create_job({"name": f"j{i}", "type": "DELAYED", "delaySeconds": 70, "target": HOOK,
                                "timeoutSec": timeout_sec}) for i in range(count)]
    harness.ticks_enabled = True
    harness.tick_all()
    harness.clock.advance_ms(60_000)
    harness.tick_all()
    harness.clock.advance_ms(20_000)
    url = next(u for u in harness.lane_urls if "Normal" in u)
    messages = harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                           AttributeNames=["All"]).get("Messages", [])
    assert len(messages) == count
    arn = harness.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return jobs, url, sqs_event(messages, arn)


def visible(harness, url):
    return harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])


def test_a_crashed_invocation_brings_its_records_back_when_their_leases_end_not_after_90_minutes(harness):
    jobs, url, event = due_messages(harness, 3, timeout_sec=30)
    handler = worker.make_handler(harness.envs["worker"], harness.clock, harness.session, harness.target)

    def die():
        raise FunctionKilled("Runtime exited: out of memory")

    harness.target.during_call = die
    try:
        handler(event, WorkerContext(harness.clock, 900_000))
        raise AssertionError("the invocation was meant to die")
    except FunctionKilled:
        pass
    harness.clock.advance_ms(60_000)
    assert visible(harness, url) == []  # the attempts' leases (30 s + 60 s) have not ended yet
    harness.clock.advance_ms(40_000)  # 100 s after the crash: back, not after 5,400 s
    assert len(visible(harness, url)) == 3


def test_an_invocation_near_its_limit_hands_back_what_still_runs_and_reports_the_rest(harness):
    jobs, url, event = due_messages(harness, 2, timeout_sec=30)
    handler = worker.make_handler(harness.envs["worker"], harness.clock, harness.session, harness.target)
    context = WorkerContext(harness.clock, 120_000)
    release = threading.Event()

    original = harness.target.invoke

    def invoke(job, dispatch, attempt, *args, **kwargs):
        if job.job_id == jobs[1]["jobId"]:
            for _ in range(1000):  # the other record ends first (its own thread)
                if [e["status"] for e in harness.executions_of(jobs[0]["jobId"])] == ["SUCCEEDED"]:
                    break
                release.wait(0.01)
            release.wait(0.3)  # and its thread returns
            harness.clock.advance_ms(115_000)  # this call outlives the invocation's time
            release.wait(30)
        return original(job, dispatch, attempt, *args, **kwargs)

    harness.target.invoke = invoke
    answer = {}
    runner = threading.Thread(target=lambda: answer.update(handler(event, context)))
    runner.start()
    runner.join(20)  # the handler returns on its own before the limit; a real wait only if it does not
    finished_in_time = not runner.is_alive()
    release.set()
    runner.join()
    assert finished_in_time, "the handler waited past its invocation's limit"
    by_id = {r["messageId"]: r for r in event["Records"]}
    failed = [by_id[f["itemIdentifier"]] for f in answer["batchItemFailures"]]
    assert [harness.stores.lanes.open(r["body"]).job_id for r in failed] == [jobs[1]["jobId"]]
    for record in event["Records"]:  # what the event source mapping does with the answer
        if record not in failed:
            harness.sqs.delete_message(QueueUrl=url, ReceiptHandle=record["receiptHandle"])
    harness.clock.advance_ms(2_000)
    # The record handed back is visible again at once (its live lease then sends it back until
    # it ends), not after the lane's visibility timeout.
    assert [m["MessageId"] for m in visible(harness, url)] == [failed[0]["messageId"]]
