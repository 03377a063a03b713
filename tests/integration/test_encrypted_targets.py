"""Queues and topics encrypted with a customer-managed KMS key (SSE-KMS) as targets. SQS and SNS
ask KMS for a data key with the sender's credentials, so a send needs kms:GenerateDataKey and
kms:Decrypt on the key (the strict layer models those implicit calls: local/strict_aws/sse_kms.py). The
targets role may use a key tagged with the session's tenant, through SQS or SNS only; a key that
refuses (or is disabled) ends the execution DEAD at its first attempt, naming what to grant."""
import json

import boto3
import pytest
from botocore.exceptions import ClientError

from jobsched.domain.tenant_tags import TENANT_TAG_KEY
from jobsched.local.strict_aws import acting_as
from jobsched.settings import Env

from .harness import TENANT_A, TENANT_B
from .test_target_isolation import delayed, real_targets, received, tagged  # noqa: F401


def key_of(harness, tenant=None):
    kms = harness.session.client("kms")
    return kms.create_key(Tags=[{"TagKey": TENANT_TAG_KEY, "TagValue": tenant}] if tenant else [])["KeyMetadata"]


def encrypted_queue(harness, name, key_id, tenant=TENANT_A):
    return harness.sqs.create_queue(QueueName=name, tags={TENANT_TAG_KEY: tenant},
                                    Attributes={"KmsMasterKeyId": key_id})["QueueUrl"]


def test_a_tenant_sends_to_its_queue_under_its_tagged_key_and_not_under_another_tenants(real_targets):
    # Given tenant A's queue encrypted with a key tagged for tenant A, and a queue of tenant A under
    # a key tagged for tenant B
    harness = real_targets
    own_key, other_key = key_of(harness, TENANT_A), key_of(harness, TENANT_B)
    inbox = encrypted_queue(harness, "a-sealed", own_key["Arn"])
    wrong = encrypted_queue(harness, "a-sealed-b-key", other_key["KeyId"])
    # When tenant A schedules a job to each (retries allowed)
    retries = {"maxAttempts": 5, "initialDelayMs": 1000}
    sent = harness.create_job(delayed({"type": "SQS", "queueUrl": inbox}, payload={"n": 1}))
    refused = harness.create_job(delayed({"type": "SQS", "queueUrl": wrong}, retryPolicy=retries))
    harness.advance(30)
    # Then the message under its own key arrived
    assert [json.loads(m["Body"]) for m in received(harness, inbox)] == [{"n": 1}]
    assert [e["status"] for e in harness.executions_of(sent["jobId"])] == ["SUCCEEDED"]
    # and the send under the other tenant's key ended DEAD at its first attempt, naming the grant
    [dead] = harness.executions_of(refused["jobId"])
    assert (dead["status"], dead["attempt"]) == ("DEAD", 1), dead
    assert dead["error"].startswith("KMS.AccessDeniedException: ") and "kms:GenerateDataKey" in dead["error"]
    assert f"tag the key {TENANT_TAG_KEY}={TENANT_A}" in dead["error"] and other_key["KeyId"] in dead["error"]
    assert received(harness, wrong) == []
    assert any(d.endswith("(via sqs):kms:GenerateDataKey") for d in harness.strict.report().denied)


def test_a_disabled_key_or_an_untagged_one_ends_the_execution_at_once(real_targets):
    harness = real_targets
    disabled = key_of(harness, TENANT_A)
    harness.session.client("kms").disable_key(KeyId=disabled["KeyId"])
    untagged = key_of(harness)
    retries = {"maxAttempts": 5, "initialDelayMs": 1000}
    jobs = {code: harness.create_job(delayed({"type": "SQS", "queueUrl": encrypted_queue(harness, name, key["KeyId"])},
                                             retryPolicy=retries))
            for code, name, key in [("KMS.DisabledException", "off", disabled),
                                    ("KMS.AccessDeniedException", "untagged", untagged)]}
    harness.advance(30)
    for code, job in jobs.items():
        [dead] = harness.executions_of(job["jobId"])
        assert (dead["status"], dead["attempt"]) == ("DEAD", 1) and dead["error"].startswith(code), dead


def test_a_topic_under_a_key_is_reached_only_with_the_tenants_tagged_key(real_targets):
    harness = real_targets
    sns = harness.session.client("sns")
    inbox = harness.sqs.create_queue(QueueName="fanout")["QueueUrl"]
    inbox_arn = harness.sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topics = {}
    for tenant in (TENANT_A, TENANT_B):
        topic = sns.create_topic(Name=f"sealed-{tenant}", Tags=tagged(TENANT_A),
                                 Attributes={"KmsMasterKeyId": key_of(harness, tenant)["KeyId"]})["TopicArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn, Attributes={"RawMessageDelivery": "true"})
        topics[tenant] = harness.create_job(delayed({"type": "SNS", "topicArn": topic}, payload={"key": tenant}))
    harness.advance(10)
    assert [json.loads(m["Body"]) for m in received(harness, inbox)] == [{"key": TENANT_A}]
    assert [e["status"] for e in harness.executions_of(topics[TENANT_A]["jobId"])] == ["SUCCEEDED"]
    [dead] = harness.executions_of(topics[TENANT_B]["jobId"])
    assert dead["status"] == "DEAD" and dead["error"].startswith("KMSAccessDenied: "), dead


def test_the_layer_refuses_a_session_the_key_as_sqs_does_and_only_through_sqs(harness):
    # Given a tenant's session of the targets role and its queue under its tagged key
    key = key_of(harness, TENANT_A)
    inbox = encrypted_queue(harness, "a-sealed", key["KeyId"])
    with acting_as("worker"):
        credentials = harness.session.client("sts").assume_role(
            RoleArn=harness.envs["worker"][Env.TARGETS_ROLE_ARN], RoleSessionName="test-session", Tags=tagged(TENANT_A),
        )["Credentials"]
    as_tenant = boto3.session.Session(aws_access_key_id=credentials["AccessKeyId"],
                                      aws_secret_access_key=credentials["SecretAccessKey"],
                                      aws_session_token=credentials["SessionToken"], region_name="us-east-1")
    # Then a send works (SQS's data key, through SQS)
    as_tenant.client("sqs").send_message(QueueUrl=inbox, MessageBody="{}")
    # but the session may not use the key itself (kms:ViaService is SQS or SNS only)
    with pytest.raises(ClientError) as direct:
        as_tenant.client("kms").generate_data_key(KeyId=key["KeyId"], KeySpec="AES_256")
    assert direct.value.response["Error"]["Code"] == "AccessDeniedException"
    # and once the key is disabled, SQS answers as AWS does (botocore's KmsDisabled, the query code)
    harness.session.client("kms").disable_key(KeyId=key["KeyId"])
    other = encrypted_queue(harness, "a-sealed-2", key["KeyId"])
    sqs = as_tenant.client("sqs")
    with pytest.raises(sqs.exceptions.KmsDisabled) as disabled:
        sqs.send_message(QueueUrl=other, MessageBody="{}")
    assert disabled.value.response["Error"]["Code"] == "KMS.DisabledException"


def test_an_aws_managed_key_needs_no_grant(real_targets):
    harness = real_targets
    inbox = encrypted_queue(harness, "a-managed", "alias/aws/sqs")
    job = harness.create_job(delayed({"type": "SQS", "queueUrl": inbox}))
    harness.advance(10)
    assert [e["status"] for e in harness.executions_of(job["jobId"])] == ["SUCCEEDED"]
