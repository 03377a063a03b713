"""A tenant reaches only the AWS targets granted to it, and IAM (the strict layer evaluating the
template's policies) enforces it: the worker calls targets in a session of the targets role tagged
with the job's tenant, and the role allows a target action only on resources tagged with the same
tenant. The code's check stays a second line (the API refuses targets IAM can never allow)."""
import json

import boto3
import pytest
from botocore.exceptions import ClientError

from jobsched.domain.tenant_tags import TENANT_TAG_KEY
from jobsched.handlers import api
from jobsched.local.events import Function
from jobsched.local.strict_aws import acting_as
from jobsched.settings import Env
from jobsched.store.targets import RENEW_BEFORE_SECONDS, SESSION_SECONDS

from .harness import KEY_B, TENANT_A, TENANT_B


@pytest.fixture
def real_targets(harness):
    """The worker as deployed: its real target router (no recording double)."""
    from jobsched.handlers import worker

    harness.worker = Function("worker", worker.make_handler(harness.envs["worker"], harness.clock, harness.session))
    harness.poller._worker = harness.worker
    return harness


def tagged(tenant):
    return [{"Key": TENANT_TAG_KEY, "Value": tenant}]


def queue_of(harness, name, tenant):
    return harness.sqs.create_queue(QueueName=name, tags={TENANT_TAG_KEY: tenant})["QueueUrl"]


def received(harness, url):
    return harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])


def executions_of(harness, job_id, key):
    status, body = harness.request("GET", f"/v1/jobs/{job_id}/executions?limit=100", key=key)
    assert status == 200, body
    return body["items"]


def delayed(target, name="t", **extra):
    return {"name": name, "type": "DELAYED", "delaySeconds": 5, "target": target, **extra}


def test_a_tenant_sends_to_its_own_tagged_queue_and_is_denied_another_tenants(real_targets):
    # Given tenant A's queue, tagged jobsched:tenant=tenant-a
    harness = real_targets
    inbox = queue_of(harness, "a-inbox", TENANT_A)
    # When tenant A and tenant B each schedule a job that sends to it
    own = harness.create_job(delayed({"type": "SQS", "queueUrl": inbox}, payload={"from": "a"}))
    other = harness.create_job(delayed({"type": "SQS", "queueUrl": inbox}, payload={"from": "b"},
                                       retryPolicy={"maxAttempts": 5, "initialDelayMs": 1000}), key=KEY_B)
    harness.advance(10)
    # Then only tenant A's message arrived
    assert [json.loads(m["Body"]) for m in received(harness, inbox)] == [{"from": "a"}]
    assert [e["status"] for e in harness.executions_of(own["jobId"])] == ["SUCCEEDED"]
    # and tenant B's execution ended DEAD at its first attempt (IAM says no every time), naming why
    [denied] = executions_of(harness, other["jobId"], KEY_B)
    assert (denied["status"], denied["attempt"]) == ("DEAD", 1), denied
    assert "AccessDenied" in denied["error"] and f"{TENANT_TAG_KEY}={TENANT_B}" in denied["error"]
    assert any(d.startswith("Jobsched-TargetAccess") and d.endswith(":sqs:SendMessage")
               for d in harness.strict.report().denied)


@pytest.mark.parametrize("kind", ["SNS", "EVENTBRIDGE"])
def test_topics_and_buses_are_reached_only_by_the_tenant_they_are_tagged_with(real_targets, kind):
    harness = real_targets
    inbox = queue_of(harness, "a-inbox", TENANT_A)
    inbox_arn = harness.sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    if kind == "SNS":
        sns = harness.session.client("sns")
        topic = sns.create_topic(Name="a-topic", Tags=tagged(TENANT_A))["TopicArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn, Attributes={"RawMessageDelivery": "true"})
        target = {"type": "SNS", "topicArn": topic}
    else:
        events = harness.session.client("events")
        events.create_event_bus(Name="a-bus", Tags=tagged(TENANT_A))
        events.put_rule(Name="all", EventBusName="a-bus", EventPattern=json.dumps({"source": ["app"]}))
        events.put_targets(Rule="all", EventBusName="a-bus", Targets=[{"Id": "q", "Arn": inbox_arn}])
        target = {"type": "EVENTBRIDGE", "eventBusName": "a-bus", "source": "app", "detailType": "tick"}
    own = harness.create_job(delayed(target))
    other = harness.create_job(delayed(target), key=KEY_B)
    harness.advance(10)
    assert len(received(harness, inbox)) == 1
    assert [e["status"] for e in harness.executions_of(own["jobId"])] == ["SUCCEEDED"]
    [denied] = executions_of(harness, other["jobId"], KEY_B)
    assert denied["status"] == "DEAD" and f"{TENANT_TAG_KEY}={TENANT_B}" in denied["error"], denied


def test_an_untagged_resource_of_the_account_is_reached_by_no_tenant(real_targets):
    # Least privilege by default: before, the worker's role could send to any queue of the account.
    harness = real_targets
    untagged = harness.sqs.create_queue(QueueName="someone-elses")["QueueUrl"]
    job = harness.create_job(delayed({"type": "SQS", "queueUrl": untagged}))
    harness.advance(10)
    assert received(harness, untagged) == []
    assert harness.executions_of(job["jobId"])[0]["status"] == "DEAD"


def test_the_worker_assumes_a_tenants_role_once_per_container_not_per_execution(real_targets):
    # Given a tenant's job that fires every five minutes to its own queue (an execution in each
    # quarter of the renewal window: the count of executions is not the point, their 20 to 3)
    harness = real_targets
    inbox = queue_of(harness, "a-inbox", TENANT_A)
    job = harness.create_job({"name": "r", "type": "RATE", "schedule": "PT5M",
                              "target": {"type": "SQS", "queueUrl": inbox}})
    # When it runs for 100 minutes (the session lasts an hour and is renewed 15 minutes before)
    harness.advance(100 * 60, step_ms=10_000)
    executions = harness.executions_of(job["jobId"])
    # Then every execution succeeded (none met expired credentials)
    assert len(executions) >= 19 and {e["status"] for e in executions} == {"SUCCEEDED"}
    # with one AssumeRole per renewal period, not one per execution
    renewals = 100 * 60 // (SESSION_SECONDS - RENEW_BEFORE_SECONDS)
    assert harness.strict.report().assumed_roles == 1 + renewals == 3


def test_the_trust_policy_takes_the_worker_with_exactly_the_tenant_tag_and_nobody_else(harness):
    role = harness.envs["worker"][Env.TARGETS_ROLE_ARN]
    sts = harness.session.client("sts")

    def assume(function, tags, duration=3600):
        with acting_as(function):
            return sts.assume_role(RoleArn=role, RoleSessionName="test-session", DurationSeconds=duration, Tags=tags)

    assert assume("worker", tagged(TENANT_A))["Credentials"]["AccessKeyId"]
    for function, tags in [("worker", []),  # no tenant tag: refused by the trust policy
                           ("worker", tagged(TENANT_A) + [{"Key": "team", "Value": "x"}]),  # another tag key
                           ("api", tagged(TENANT_A)), ("tick", tagged(TENANT_A))]:  # not the worker
        with pytest.raises(ClientError) as refused:
            assume(function, tags)
        assert refused.value.response["Error"]["Code"] == "AccessDenied", (function, tags)
    with pytest.raises(ClientError) as too_long:  # role chaining: at most an hour
        assume("worker", tagged(TENANT_A), duration=7200)
    assert too_long.value.response["Error"]["Code"] == "ValidationError"


def test_the_workers_own_role_reaches_no_target_and_a_session_ends_when_it_expires(harness):
    inbox = queue_of(harness, "a-inbox", TENANT_A)
    with acting_as("worker"), pytest.raises(ClientError) as denied:
        harness.sqs.send_message(QueueUrl=inbox, MessageBody="{}")
    assert denied.value.response["Error"]["Code"] == "AccessDenied"
    with acting_as("worker"):
        credentials = harness.session.client("sts").assume_role(
            RoleArn=harness.envs["worker"][Env.TARGETS_ROLE_ARN], RoleSessionName="test-session", DurationSeconds=900,
            Tags=tagged(TENANT_A))["Credentials"]
    as_tenant = boto3.session.Session(aws_access_key_id=credentials["AccessKeyId"],
                                      aws_secret_access_key=credentials["SecretAccessKey"],
                                      aws_session_token=credentials["SessionToken"],
                                      region_name="us-east-1").client("sqs")
    as_tenant.send_message(QueueUrl=inbox, MessageBody="{}")
    # The lanes are denied to a tenant's session even if someone tagged them for the tenant.
    lane = harness.lane_urls[0]
    harness.sqs.tag_queue(QueueUrl=lane, Tags={TENANT_TAG_KEY: TENANT_A})
    with pytest.raises(ClientError) as lane_denied:
        as_tenant.send_message(QueueUrl=lane, MessageBody="{}")
    assert lane_denied.value.response["Error"]["Code"] == "AccessDenied"
    harness.clock.advance_ms(900_000)
    with pytest.raises(ClientError) as expired:
        as_tenant.send_message(QueueUrl=inbox, MessageBody="{}")
    assert expired.value.response["Error"]["Code"] == "ExpiredToken"


def test_a_target_in_another_account_outside_the_patterns_is_refused_at_creation(harness):
    elsewhere = {"type": "SQS", "queueUrl": "https://sqs.eu-west-1.amazonaws.com/210987654321/orders"}
    status, answer = harness.request("POST", "/v1/jobs", delayed(elsewhere), key=KEY_B)
    assert status == 422 and answer["error"]["details"][0]["field"] == "target.queueUrl", answer
    status, answer = harness.request("POST", "/v1/jobs", delayed(
        {"type": "SNS", "topicArn": "arn:aws:sns:us-east-1:210987654321:t"}), key=KEY_B)
    assert status == 422 and answer["error"]["details"][0]["field"] == "target.topicArn", answer
    # This account's resources may be granted by their tag (unknown until the call): accepted.
    status, _ = harness.request("POST", "/v1/jobs", delayed(
        {"type": "SQS", "queueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/mine"}), key=KEY_B)
    assert status == 201
    # A deployment's targetArnPatterns grant the other account's queue: accepted.
    harness.api = Function("api", api.make_handler(
        {**harness.envs["api"], Env.TARGET_ARN_PATTERNS: "arn:aws:sqs:eu-west-1:210987654321:ord*"},
        harness.clock, harness.session))
    status, answer = harness.request("POST", "/v1/jobs", delayed(elsewhere), key=KEY_B)
    assert status == 201, answer
