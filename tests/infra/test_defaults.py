"""The default deployment: `cdk synth` with no context, as infra/app.py makes it (cdk-nag included).
The `template` fixture is the local stack's (container grants, `-c encryption=kms`), so what the
default leaves out is asserted here, on the app's own synthesis."""
import json

import pytest

from jobsched.local.stack import function_name
from jobsched.settings import Env

from .test_regions import synth_app
from .test_template import _as_list, _statements, resources


@pytest.fixture(scope="module")
def default(tmp_path_factory):
    [(name, stack)] = synth_app(tmp_path_factory.mktemp("default"), {}).items()
    assert name == "Jobsched"
    return stack["template"]


def test_the_default_deployment_keeps_its_kms_key_and_aws_owned_keys_are_an_option(default, tmp_path_factory):
    """encryption=kms by default (a stack deployed with its key keeps it: its tenants' signing
    secrets are sealed with it); `-c encryption=aws-owned`, for a new deployment: DynamoDB's
    AWS-owned key, SSE-SQS on every queue, no key, no KMS grant but the targets role's (tenants'
    own SSE-KMS targets)."""
    assert len(resources(default, "AWS::KMS::Key")) == 1
    for table in resources(default, "AWS::DynamoDB::Table").values():
        assert table["Properties"]["SSESpecification"]["SSEEnabled"] is True, table
    [(_, stack)] = synth_app(tmp_path_factory.mktemp("aws-owned"), {"encryption": "aws-owned"}).items()
    owned = stack["template"]
    assert not resources(owned, "AWS::KMS::Key") and not resources(owned, "AWS::KMS::ReplicaKey")
    tables = resources(owned, "AWS::DynamoDB::Table")
    assert len(tables) == 5
    for table in tables.values():
        # No SSESpecification (or SSEEnabled false): DynamoDB's AWS-owned key, no KMS charge.
        assert not table["Properties"].get("SSESpecification", {}).get("SSEEnabled"), table
    queues = resources(owned, "AWS::SQS::Queue")
    assert queues
    for queue in queues.values():
        assert queue["Properties"].get("SqsManagedSseEnabled") is True and "KmsMasterKeyId" not in queue["Properties"]
    for topic in resources(owned, "AWS::SNS::Topic").values():
        assert "KmsMasterKeyId" not in topic["Properties"]
    for logical, fn in resources(owned, "AWS::Lambda::Function").items():
        handler = fn["Properties"].get("Handler", "")
        if not handler.startswith("jobsched."):
            continue
        assert Env.SIGNING_KEY_ID not in fn["Properties"]["Environment"]["Variables"], handler
        kms = [s for s in _statements(owned, logical) if any(a.startswith("kms:") for a in _as_list(s["Action"]))]
        assert not kms, (function_name(handler), kms)


def test_the_task_events_alarms_come_only_with_container_clusters(default, template):
    """Nothing invokes the task-events function without `-c ecsClusters` (its rule comes with them):
    its errors and on-failure queue are alarmed only then."""
    def alarmed(tpl):
        return {rid for rid in resources(tpl, "AWS::CloudWatch::Alarm") if rid.replace("_", "").lower().startswith("alarmstaskevents")}

    def ecs_rules(tpl):
        return [r for r in resources(tpl, "AWS::Events::Rule").values()
                if "aws.ecs" in json.dumps(r["Properties"].get("EventPattern", {}))]

    assert not ecs_rules(default) and alarmed(default) == set()
    assert ecs_rules(template) and len(alarmed(template)) == 2  # the test template grants a cluster
    alarms = {tpl_id: len(resources(tpl, "AWS::CloudWatch::Alarm")) for tpl_id, tpl in (("d", default), ("t", template))}
    assert alarms["t"] - alarms["d"] == 2
