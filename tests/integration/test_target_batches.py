"""Batched target calls (docs/architecture.md, "Batched target calls"): a pack's entries due at the
same instant for one tenant's queue, topic or bus go out in SendMessageBatch, PublishBatch or
PutEvents requests of up to ten, each message as a single call would send it, each entry with its
own outcome. Through the strict layer (IAM from the template, SQS's and SNS's batch limits)."""
import json
from collections import Counter

import pytest
from botocore.client import BaseClient

from jobsched.handlers import worker as worker_handler
from jobsched.local.events import Function

from .harness import TENANT_A
from .test_packs import a_pack, event, pack_item
from .test_target_isolation import queue_of, tagged

TARGET_OPERATIONS = ("SendMessage", "SendMessageBatch", "Publish", "PublishBatch", "PutEvents")


@pytest.fixture
def calls(monkeypatch, harness):
    """The target calls made, by operation (every client, the tenants' sessions' included; the
    worker's own sends to its lanes, a retry's for one, are not target calls)."""
    counted: Counter = Counter()
    real = BaseClient._make_api_call

    def counting(self, operation, params):
        if operation in TARGET_OPERATIONS and params.get("QueueUrl") not in harness.lane_urls:
            counted[operation] += 1
        return real(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counting)
    return counted


def real_worker(harness) -> Function:
    """The worker as deployed: its real target router, in the tenants' sessions."""
    return Function("worker", worker_handler.make_handler(harness.envs["worker"], harness.clock, harness.session))


def received(harness, url) -> list[dict]:
    messages = []
    while batch := harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                               MessageAttributeNames=["All"]).get("Messages", []):
        messages += batch
    return messages


def test_a_packs_entries_for_one_queue_go_out_ten_a_request_each_as_its_own_message(harness, calls):
    inbox = queue_of(harness, "a-inbox", TENANT_A)
    jobs, messages = a_pack(harness, 23, {"type": "SQS", "queueUrl": inbox}, payload=lambda i: {"n": i})
    calls.clear()
    assert real_worker(harness).invoke(event(messages)) == {"batchItemFailures": []}
    # Three requests (10, 10, 3), no single send
    assert calls == Counter({"SendMessageBatch": 3})
    got = received(harness, inbox)
    assert sorted(json.loads(m["Body"])["n"] for m in got) == list(range(23))
    # Each message carries its own execution id and attempt, as a single send's would
    ids = {m["MessageAttributes"]["executionId"]["StringValue"] for m in got}
    assert len(ids) == 23 and {m["MessageAttributes"]["attempt"]["StringValue"] for m in got} == {"1"}
    outcomes = pack_item(harness, messages[0])["outcomes"]
    assert len(outcomes) == 23
    for job in jobs:
        [execution] = harness.executions_of(job["jobId"])
        assert execution["status"] == "SUCCEEDED" and execution["executionId"] in ids


def test_one_message_the_queue_refuses_fails_alone_and_the_others_are_sent(harness, calls):
    # A queue that takes messages of at most 1,024 bytes: one job's payload is larger
    inbox = queue_of(harness, "small-inbox", TENANT_A)
    harness.sqs.set_queue_attributes(QueueUrl=inbox, Attributes={"MaximumMessageSize": "1024"})
    jobs, messages = a_pack(harness, 4, {"type": "SQS", "queueUrl": inbox},
                            payload=lambda i: {"n": i, "pad": "x" * (2000 if i == 2 else 1)})
    calls.clear()
    real_worker(harness).invoke(event(messages))
    # The batch is refused whole (as SQS refuses it), then each message is sent on its own
    assert calls["SendMessageBatch"] == 1 and calls["SendMessage"] == 4
    assert sorted(json.loads(m["Body"])["n"] for m in received(harness, inbox)) == [0, 1, 3]
    statuses = {job["name"]: harness.executions_of(job["jobId"])[0] for job in jobs}
    assert all(statuses[f"p{i}"]["status"] == "SUCCEEDED" for i in (0, 1, 3))
    failed = statuses["p2"]
    assert failed["status"] != "SUCCEEDED" and "InvalidParameterValue" in str(failed["error"]), failed


def test_a_topics_entries_go_out_in_one_publish_batch(harness, calls):
    sns = harness.session.client("sns")
    topic = sns.create_topic(Name="a-topic", Tags=tagged(TENANT_A))["TopicArn"]
    inbox = queue_of(harness, "topic-inbox", TENANT_A)
    arn = harness.sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
    jobs, messages = a_pack(harness, 6, {"type": "SNS", "topicArn": topic}, payload=lambda i: {"n": i})
    calls.clear()
    assert real_worker(harness).invoke(event(messages)) == {"batchItemFailures": []}
    assert calls == Counter({"PublishBatch": 1})
    assert sorted(json.loads(m["Body"])["n"] for m in received(harness, inbox)) == list(range(6))
    assert all(harness.executions_of(j["jobId"])[0]["status"] == "SUCCEEDED" for j in jobs)


def test_a_buses_entries_go_out_in_one_put_events(harness, calls):
    events = harness.session.client("events")
    bus = events.create_event_bus(Name="a-bus", Tags=tagged(TENANT_A))["EventBusArn"]
    target = {"type": "EVENTBRIDGE", "eventBusName": bus, "source": "acme.jobs", "detailType": "tick"}
    jobs, messages = a_pack(harness, 5, target, payload=lambda i: {"n": i})
    calls.clear()
    assert real_worker(harness).invoke(event(messages)) == {"batchItemFailures": []}
    assert calls == Counter({"PutEvents": 1})
    for job in jobs:
        [execution] = harness.executions_of(job["jobId"])
        assert execution["status"] == "SUCCEEDED"
