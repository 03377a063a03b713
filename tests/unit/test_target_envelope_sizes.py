"""SNS and EventBridge count the envelope in their size limit (issue 28, item 12): what the
invoker would send over it is not sent (it would be refused, every retry too) and the attempt
fails, not retryable; the sizes are counted as those services count them."""
from jobsched.domain.target_envelopes import (EVENTBRIDGE_MAX_ENTRY_BYTES, SNS_MAX_MESSAGE_BYTES,
                                              eventbridge_entry_bytes, largest_payload_bytes, sns_message_bytes)
from jobsched.domain.executions import Dispatch, DispatchKind, ExecutionStatus
from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
from jobsched.domain.json_text import size_bytes
from jobsched.domain.schedule import one_time_schedule
from jobsched.store.targets import AwsTargetInvoker

T0 = 1_700_000_000_000
TOPIC = "arn:aws:sns:us-east-1:123456789012:tenant-topic"
BUS = {"eventBusName": "tenant-bus", "source": "tenant.app", "detailType": "tick"}


class Recording:
    def __init__(self) -> None:
        self.calls = []

    def client(self, service, **kwargs):
        return self

    def publish(self, **kwargs):
        self.calls.append(kwargs)
        return {"MessageId": "m"}

    def put_events(self, **kwargs):
        self.calls.append(kwargs)
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"}]}


def job_with(target: Target, payload) -> Job:
    spec = JobSpec(name="s", schedule=one_time_schedule(T0), target=target, payload=payload)
    return Job("tenant-a", "job_0000000000010000000000000000000", spec, JobState.ACTIVE, 1, 1, T0, T0)


def invoke(target: Target, payload):
    session = Recording()
    job = job_with(target, payload)
    dispatch = Dispatch(DispatchKind.FIRE, "tenant-a", job.job_id, f"{job.job_id}.{T0}", T0, 1)
    return AwsTargetInvoker(session).invoke(job, dispatch, 1), session.calls


def test_an_sns_message_over_the_limit_with_its_attributes_is_not_published():
    # A payload under 256 KB alone, over it with the attributes SNS counts
    payload = "x" * (SNS_MAX_MESSAGE_BYTES - 2 - 40)
    assert size_bytes(payload) <= SNS_MAX_MESSAGE_BYTES
    outcome, calls = invoke(Target(TargetType.SNS, {"topicArn": TOPIC}), payload)
    assert calls == [] and not outcome.ok and outcome.retryable is False
    assert outcome.status is ExecutionStatus.FAILED and "262144-byte limit" in outcome.error


def test_an_eventbridge_entry_over_the_limit_with_its_envelope_is_not_put():
    payload = "x" * (EVENTBRIDGE_MAX_ENTRY_BYTES - 2 - 50)
    outcome, calls = invoke(Target(TargetType.EVENTBRIDGE, BUS), payload)
    assert calls == [] and not outcome.ok and outcome.retryable is False


def test_the_largest_payload_the_api_accepts_fits_with_the_longest_envelope():
    for target in (Target(TargetType.SNS, {"topicArn": TOPIC}), Target(TargetType.EVENTBRIDGE, BUS)):
        largest = largest_payload_bytes(target.type, target.config)
        payload = "x" * (largest - 2)  # a JSON string: two quotes
        assert size_bytes(payload) == largest
        outcome, calls = invoke(target, payload)
        assert outcome.ok and len(calls) == 1, outcome
        sent = calls[0]
        if target.type is TargetType.SNS:
            assert sns_message_bytes(sent["Message"], sent["MessageAttributes"]) <= SNS_MAX_MESSAGE_BYTES
        else:
            entry = sent["Entries"][0]
            assert eventbridge_entry_bytes(entry["Source"], entry["DetailType"], entry["Detail"]) \
                <= EVENTBRIDGE_MAX_ENTRY_BYTES


def test_the_largest_sns_payload_fits_with_the_longest_ids_and_the_trace_context():
    # The longest job id and execution id, and the traceparent attribute SNS counts too
    from jobsched.domain.target_envelopes import LONGEST_EXECUTION_ID, LONGEST_JOB_ID

    target = Target(TargetType.SNS, {"topicArn": TOPIC})
    payload = "x" * (largest_payload_bytes(target.type, target.config) - 2)
    spec = JobSpec(name="s", schedule=one_time_schedule(T0), target=target, payload=payload)
    job = Job("tenant-a", "j" * LONGEST_JOB_ID, spec, JobState.ACTIVE, 1, 1, T0, T0)
    dispatch = Dispatch(DispatchKind.FIRE, "tenant-a", job.job_id, "e" * LONGEST_EXECUTION_ID, T0, 1)
    session = Recording()
    outcome = AwsTargetInvoker(session).invoke(job, dispatch, 99)
    assert outcome.ok and len(session.calls) == 1, outcome
    assert "traceparent" in session.calls[0]["MessageAttributes"]
