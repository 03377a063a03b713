"""The strict layer holds a send to its queue's own MaximumMessageSize (settable from 1,024 B to
SQS's 1 MiB), not to one global 1 MiB, counting body and attributes as SQS does."""
import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from jobsched.local import strict_aws
from jobsched.local.strict_aws import StrictAws


@pytest.fixture
def sqs():
    with mock_aws():
        client = boto3.session.Session().client("sqs", region_name="us-east-1")
        layer = StrictAws.billing_only({}, now_ms=lambda: 0, queue_attributes=True)
        previous = strict_aws.activate(layer)
        try:
            yield client
        finally:
            strict_aws.activate(previous)


def two_kb_with_attributes() -> dict:
    # 900 B of body (under the queue's size, which the emulator checks on the body alone) and
    # about 1.1 KB of attributes: 2 KB as SQS counts a message.
    return {"MessageBody": "b" * 900,
            "MessageAttributes": {"pad": {"DataType": "String", "StringValue": "a" * 1150}}}


def test_a_send_over_the_queues_own_maximum_message_size_is_refused(sqs):
    small = sqs.create_queue(QueueName="small", Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    with pytest.raises(ClientError) as refused:
        sqs.send_message(QueueUrl=small, **two_kb_with_attributes())
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "must be shorter than 1024 bytes" in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError, match="must be shorter than 1024 bytes"):
        sqs.send_message_batch(QueueUrl=small, Entries=[{"Id": "a", "MessageBody": "x"},
                                                        {"Id": "b", **two_kb_with_attributes()}])
    sqs.send_message(QueueUrl=small, MessageBody="x" * 1000)  # under it: sent


def test_a_queue_raised_to_a_larger_size_takes_the_larger_message(sqs):
    small = sqs.create_queue(QueueName="small", Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    with pytest.raises(ClientError):
        sqs.send_message(QueueUrl=small, **two_kb_with_attributes())
    sqs.set_queue_attributes(QueueUrl=small, Attributes={"MaximumMessageSize": "4096"})
    sqs.send_message(QueueUrl=small, **two_kb_with_attributes())
    default = sqs.create_queue(QueueName="default")["QueueUrl"]
    sqs.send_message(QueueUrl=default, MessageBody="x" * 300_000)  # 1 MiB by default
