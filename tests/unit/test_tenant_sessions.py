"""The worker's per-tenant sessions of the targets role: one AssumeRole per tenant per container
until shortly before the session ends, never one per execution (store/targets.py)."""
import re

import boto3
import pytest
from botocore.exceptions import ClientError

from jobsched.domain.clock import FakeClock
from jobsched.domain.executions import Dispatch, DispatchKind, ExecutionStatus
from jobsched.domain.jobs import Job, JobSpec, JobState, Target, TargetType
from jobsched.domain.schedule import one_time_schedule
from jobsched.domain.tenant_tags import TENANT_TAG_KEY
from jobsched.store.targets import (RENEW_BEFORE_SECONDS, SESSION_SECONDS, AwsTargetInvoker, TargetSessionUnavailable,
                                    TenantSessions, session_name)

ROLE = "arn:aws:iam::123456789012:role/targets"


class FakeSts:
    def __init__(self, refuse: bool = False) -> None:
        self.calls = []
        self.refuse = refuse

    def assume_role(self, **params):
        self.calls.append(params)
        if self.refuse:
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "AssumeRole")
        n = len(self.calls)
        return {"Credentials": {"AccessKeyId": f"ASIA{n}", "SecretAccessKey": "s", "SessionToken": "t"}}


def sessions(sts, clock, **kwargs):
    return TenantSessions(boto3.session.Session(region_name="us-east-1"), ROLE, clock.now_ms, sts=sts, **kwargs)


def test_a_tenants_session_is_assumed_once_and_renewed_before_it_ends():
    clock, sts = FakeClock(0), FakeSts()
    tenants = sessions(sts, clock)
    first = tenants.session_for("acme")
    for _ in range(100):
        assert tenants.session_for("acme") is first
    assert len(sts.calls) == 1
    assert sts.calls[0]["Tags"] == [{"Key": TENANT_TAG_KEY, "Value": "acme"}]
    assert sts.calls[0]["RoleArn"] == ROLE and sts.calls[0]["DurationSeconds"] == SESSION_SECONDS == 3600
    clock.advance_ms((SESSION_SECONDS - RENEW_BEFORE_SECONDS) * 1000 - 1)
    assert tenants.session_for("acme") is first
    clock.advance_ms(1)  # 15 minutes before the end: a new session
    assert tenants.session_for("acme") is not first and len(sts.calls) == 2


def test_the_least_recently_used_tenant_goes_when_the_cache_is_full():
    clock, sts = FakeClock(0), FakeSts()
    tenants = sessions(sts, clock, max_tenants=2)
    for tenant in ("a", "b", "a", "c"):  # c evicts b (a was used after b)
        tenants.session_for(tenant)
    assert len(sts.calls) == 3
    tenants.session_for("a")
    assert len(sts.calls) == 3
    tenants.session_for("b")
    assert len(sts.calls) == 4


@pytest.mark.parametrize("tenant", ["acme", "a", "Tenant Ä/1", "x" * 300, "a#b!c"])
def test_session_names_are_valid_for_sts_and_differ_per_tenant(tenant):
    name = session_name(tenant)
    assert re.fullmatch(r"[\w+=,.@-]{2,64}", name, re.ASCII)
    assert name != session_name(tenant + "x")


def test_a_refused_assume_role_fails_the_attempt_retryably_and_an_untaggable_tenant_not_at_all():
    clock = FakeClock(0)
    with pytest.raises(TargetSessionUnavailable):
        sessions(FakeSts(refuse=True), clock).session_for("acme")
    invoker = AwsTargetInvoker(boto3.session.Session(region_name="us-east-1"), sessions(FakeSts(refuse=True), clock))
    spec = JobSpec(name="t", schedule=one_time_schedule(0),
                   target=Target(TargetType.SQS, {"queueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/q"}))
    dispatch = Dispatch(DispatchKind.FIRE, "acme", "job_abc", "job_abc.0000000000001", 1, 1)
    outcome = invoker.invoke(Job("acme", "job_abc", spec, JobState.ACTIVE, 1, 1, 0, 0), dispatch, 1)
    assert not outcome.ok and outcome.retryable and "Throttling" in outcome.error
    untaggable = invoker.invoke(Job("a#b", "job_abc", spec, JobState.ACTIVE, 1, 1, 0, 0), dispatch, 1)
    assert not untaggable.ok and not untaggable.retryable and untaggable.status is ExecutionStatus.FAILED
