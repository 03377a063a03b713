"""Regions (issue 25): `-c regions=...` synthesizes one scheduler stack per region, offline."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobsched.domain.jobs import Priority
from jobsched.local.stack import function_name
from jobsched.settings import FUNCTION_ENV, Env, Settings
from jobsched_infra.config import ConfigError
from jobsched_infra.regions import MRSC_REGION_SETS, lane_name, plan

from ..conftest import _template_inputs_digest, kept_json
from .test_template import resources

ROOT = Path(__file__).resolve().parents[2]
REGIONS = ["us-east-1", "eu-west-1", "ap-northeast-1", "us-west-2", "eu-central-1"]
OWNERSHIP = ["us-east-1", "us-east-2", "us-west-2"]
SEGMENTS = 4
DATA_TABLES = {
    "Jobsched-Jobs": [("tenantId", "HASH"), ("jobId", "RANGE")],
    "Jobsched-Timers": [("bucket", "HASH"), ("sk", "RANGE")],
    "Jobsched-Executions": [("jobId", "HASH"), ("executionId", "RANGE")],
    "Jobsched-Segments": [("segment", "HASH")],
    "Jobsched-ApiKeys": [("keyHash", "HASH")],
}
CERTIFICATES = {r: f"arn:aws:acm:{r}:123456789012:certificate/{i:08d}-0000-0000-0000-000000000000"
                for i, r in enumerate(REGIONS)}
# Each region's functions call the ownership table's two replicas (us-east-2 is the witness): their own
# region's first, else the nearer one (Tokyo: Oregon), and fail over to the other.
ENDPOINTS = {"us-east-1": ("us-east-1", "us-west-2"), "us-west-2": ("us-west-2", "us-east-1"),
             "eu-west-1": ("us-east-1", "us-west-2"), "eu-central-1": ("us-east-1", "us-west-2"),
             "ap-northeast-1": ("us-west-2", "us-east-1")}
# What store/ownership.py calls, and nothing more (no Query, no BatchGetItem).
OWNERSHIP_ACTIONS = {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Scan"}


# The apps synthesized by synth_app, per context, until the code they are made from changes.
APPS_CACHE = ROOT / ".build" / "test-template" / "apps"


def synth_app(outdir: Path, context: dict) -> dict[str, dict]:
    """infra/app.py as `cdk synth -c ...` runs it (the CLI passes context in CDK_CONTEXT_JSON), in a
    process of its own; cdk-nag runs in it and fails it on an unacknowledged finding. Kept in
    .build/test-template/apps per context and inputs: a test worker that needs the same context as
    the other (a module's tests run on both) waits for its synthesis under the context's lock and
    reads it, and a later run reads it while the code is unchanged."""
    named = hashlib.sha256(json.dumps(context, sort_keys=True).encode()).hexdigest()[:16]
    return kept_json(APPS_CACHE / f"app-{named}-{_template_inputs_digest()}.json", APPS_CACHE / f".lock-{named}",
                     lambda: _synth_app(outdir, context), f"app-{named}-*.json")


def _synth_app(outdir: Path, context: dict) -> dict[str, dict]:
    cdk_json = json.loads((ROOT / "cdk.json").read_text())
    env = {**os.environ, "CDK_OUTDIR": str(outdir), "AWS_EC2_METADATA_DISABLED": "true",
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
           "CDK_CONTEXT_JSON": json.dumps({**cdk_json["context"], **context})}
    env.pop("CDK_DEFAULT_ACCOUNT", None)
    done = subprocess.run([sys.executable, str(ROOT / "infra" / "app.py")], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((outdir / "validation-report.json").read_text())
    assert all(p["conclusion"] == "success" for p in report["pluginReports"])
    manifest = json.loads((outdir / "manifest.json").read_text())
    return {name: {"env": a["environment"], "template": json.loads((outdir / a["properties"]["templateFile"]).read_text()),
                   "deps": a.get("dependencies", [])}
            for name, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    # With the stack's own key (`-c encryption=kms`): the multi-Region key and its replicas.
    return synth_app(tmp_path_factory.mktemp("regions5"), {
        "encryption": "kms", "regions": ",".join(REGIONS), "ownershipRegions": ",".join(OWNERSHIP), "segments": SEGMENTS,
        "domainName": "api.example.com", "hostedZoneId": "Z123EXAMPLE",
        "certificateArns": ",".join(f"{r}={a}" for r, a in CERTIFICATES.items())})


def functions_of(template):
    return {function_name(r["Properties"]["Handler"]): (k, r["Properties"])
            for k, r in resources(template, "AWS::Lambda::Function").items()
            if r["Properties"].get("Handler", "").startswith("jobsched.")}


def statements_of(template, logical_id):
    role = template["Resources"][logical_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    return [s for p in resources(template, "AWS::IAM::Policy").values() if {"Ref": role} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def render(value) -> str:
    """An ARN as a string: the partition and account pseudo parameters as <p> and <a>."""
    if isinstance(value, str):
        return value.replace("arn:aws:", "arn:<p>:")
    if value == {"Ref": "AWS::Partition"}:
        return "<p>"
    if value == {"Ref": "AWS::AccountId"}:
        return "<a>"
    if "Fn::Join" in value:
        return "".join(render(part) for part in value["Fn::Join"][1])
    return json.dumps(value)


def as_list(value):
    return value if isinstance(value, list) else [value]


def test_one_stack_per_region_in_its_region_each_running_the_whole_scheduler(five):
    assert set(five) == {f"Jobsched-{r}" for r in REGIONS}
    for region in REGIONS:
        stack = five[f"Jobsched-{region}"]
        assert stack["env"] == f"aws://unknown-account/{region}"
        assert set(functions_of(stack["template"])) == set(FUNCTION_ENV)
        assert len(resources(stack["template"], "AWS::ApiGatewayV2::Api")) == 1
        assert len(resources(stack["template"], "AWS::CloudWatch::Dashboard")) == 1
        assert len(resources(stack["template"], "AWS::Lambda::EventSourceMapping")) == 3
        assert stack["template"]["Outputs"]["ApiUrl"]


def test_data_tables_are_global_tables_with_a_replica_in_every_region_defined_once(five):
    globals_ = {}
    for name, stack in five.items():
        assert not resources(stack["template"], "AWS::DynamoDB::Table")
        for table in resources(stack["template"], "AWS::DynamoDB::GlobalTable").values():
            globals_.setdefault(table["Properties"]["TableName"], []).append((name, table["Properties"]))
    data = {k: v for k, v in globals_.items() if k in DATA_TABLES}
    assert set(data) == set(DATA_TABLES) and all(len(v) == 1 for v in data.values())
    # The last region's stack holds them (its replica key is made after the others': regions.py).
    assert {v[0][0] for v in data.values()} == {f"Jobsched-{REGIONS[-1]}"}
    [own_key] = resources(five[f"Jobsched-{REGIONS[-1]}"]["template"], "AWS::KMS::ReplicaKey")
    for table_name, [(_, props)] in data.items():
        assert [(k["AttributeName"], k["KeyType"]) for k in props["KeySchema"]] == DATA_TABLES[table_name]
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props.get("MultiRegionConsistency", "EVENTUAL") == "EVENTUAL"
        assert props["SSESpecification"] == {"SSEEnabled": True, "SSEType": "KMS"}
        assert sorted(r["Region"] for r in props["Replicas"]) == sorted(REGIONS)
        for replica in props["Replicas"]:
            assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
            # Each replica under the multi-Region key's replica in its own region.
            key = replica["SSESpecification"]["KMSMasterKeyId"]
            if replica["Region"] == REGIONS[-1]:
                assert key == {"Fn::GetAtt": [own_key, "Arn"]}
            else:
                assert render(key) == f"arn:<p>:kms:{replica['Region']}:<a>:key/" + json.dumps({"Ref": own_key})
        ttl = props.get("TimeToLiveSpecification")
        if table_name in ("Jobsched-Jobs", "Jobsched-Timers", "Jobsched-Executions"):
            assert ttl == {"AttributeName": "expiresAt", "Enabled": True}
        else:
            assert ttl is None
    assert [g["IndexName"] for g in data["Jobsched-Jobs"][0][1]["GlobalSecondaryIndexes"]] == ["JobsByStateShard"]
    assert [g["IndexName"] for g in data["Jobsched-Executions"][0][1]["GlobalSecondaryIndexes"]] == ["DeadLetters"]
    # Every stack's functions name the same tables (the home stack by a reference to its definition).
    for stack in five.values():
        for _, props in functions_of(stack["template"]).values():
            name = props["Environment"]["Variables"][Env.JOBS_TABLE]
            if isinstance(name, dict):
                name = stack["template"]["Resources"][name["Ref"]]["Properties"]["TableName"]
            assert name == "Jobsched-Jobs"


def test_the_ownership_table_is_strongly_consistent_in_three_regions_of_one_set(five):
    found = [(name, t["Properties"]) for name, s in five.items()
             for t in resources(s["template"], "AWS::DynamoDB::GlobalTable").values()
             if t["Properties"]["TableName"] == "Jobsched-Ownership"]
    [(home, props)] = found
    assert home == "Jobsched-us-east-1"
    assert props["MultiRegionConsistency"] == "STRONG"
    assert props["KeySchema"] == [{"AttributeName": "segment", "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [{"AttributeName": "segment", "AttributeType": "N"}]
    assert "TimeToLiveSpecification" not in props  # MRSC has no TTL
    replicas = {r["Region"] for r in props["Replicas"]}
    witnesses = {w["Region"] for w in props.get("GlobalTableWitnesses", [])}
    # us-east-2 holds no stack of the deployment: a witness there, replicas where functions are.
    assert replicas == {"us-east-1", "us-west-2"} and witnesses == {"us-east-2"}
    assert (replicas | witnesses) <= set(MRSC_REGION_SETS["US"]) and len(replicas | witnesses) == 3


def test_every_function_is_told_its_regions_lease_table_and_timing(five):
    for index, region in enumerate(REGIONS):
        for function, (_, props) in functions_of(five[f"Jobsched-{region}"]["template"]).items():
            env = props["Environment"]["Variables"]
            assert env[Env.REGIONS] == ",".join(REGIONS)
            assert env[Env.THIS_REGION] == region
            assert env[Env.OWNERSHIP_TABLE] == "Jobsched-Ownership"
            assert env[Env.OWNERSHIP_REGIONS] == ",".join(ENDPOINTS[region])
            assert env[Env.LEASE_MS] == "90000" and env[Env.CLOCK_BOUND_MS] == "2000"
            assert env[Env.SEGMENTS] == str(SEGMENTS)  # per region; global = index x SEGMENTS + local
            settings = Settings.from_env({k: v if isinstance(v, str) else "x" for k, v in env.items()}, function)
            assert settings.multi_region and settings.region_index == index
            assert settings.ownership_regions == ENDPOINTS[region]


def test_the_lease_grants_name_the_ownership_table_in_both_replica_regions_and_nothing_broader(five):
    for region in REGIONS:
        template = five[f"Jobsched-{region}"]["template"]
        for function, (logical, _) in functions_of(template).items():
            leases = [s for s in statements_of(template, logical) if "Ownership" in json.dumps(s["Resource"])]
            if function == "authorizer":  # the API's key check reads the ApiKeys table alone
                assert leases == []
                continue
            [statement] = leases
            assert set(as_list(statement["Action"])) == OWNERSHIP_ACTIONS
            # Both replicas (failover needs the other one granted too), never the witness.
            assert sorted(render(r) for r in as_list(statement["Resource"])) == sorted(
                f"arn:<p>:dynamodb:{replica}:<a>:table/Jobsched-Ownership" for replica in ENDPOINTS[region])
            for other in statements_of(template, logical):
                if any(a.startswith("dynamodb:") for a in as_list(other["Action"])):
                    assert other["Resource"] != "*"


def test_the_api_may_invoke_exactly_the_other_regions_api_functions(five):
    for region in REGIONS:
        template = five[f"Jobsched-{region}"]["template"]
        functions = functions_of(template)
        logical, api = functions["api"]
        # Named, so that the other regions' APIs can forward to it (the same name in every template).
        assert api["FunctionName"] == f"Jobsched-{region}-api"
        assert api["Environment"]["Variables"][Env.REGION_API_FUNCTION] == "Jobsched-{region}-api"
        [statement] = [s for s in statements_of(template, logical) if "lambda:InvokeFunction" in as_list(s["Action"])]
        assert as_list(statement["Action"]) == ["lambda:InvokeFunction"]
        assert sorted(render(r) for r in as_list(statement["Resource"])) == sorted(
            f"arn:<p>:lambda:{other}:<a>:function:Jobsched-{other}-api" for other in REGIONS if other != region)
        for function, (other_logical, props) in functions.items():
            if function != "api":
                assert "FunctionName" not in props
                assert not [s for s in statements_of(template, other_logical)
                            if "lambda:InvokeFunction" in as_list(s["Action"])], function


def test_every_stack_ticks_every_global_segment(five):
    for region in REGIONS:
        template = five[f"Jobsched-{region}"]["template"]
        rules = [r["Properties"] for r in resources(template, "AWS::Events::Rule").values()
                 if "ScheduleExpression" in r["Properties"]]
        segments = sorted(json.loads(r["Targets"][0]["Input"])["segment"] for r in rules)
        assert segments == list(range(len(REGIONS) * SEGMENTS))
        assert all(r["Name"] == f"Jobsched-{region}-tick-{json.loads(r['Targets'][0]['Input'])['segment']}"
                   and len(r["Name"]) <= 64 for r in rules)
        _, tick = functions_of(template)["tick"]
        assert tick["ReservedConcurrentExecutions"] == 2 * len(REGIONS) * SEGMENTS


def test_no_function_sends_to_another_regions_lanes(five):
    for region in REGIONS:
        template = five[f"Jobsched-{region}"]["template"]
        names = {q["Properties"].get("QueueName") for q in resources(template, "AWS::SQS::Queue").values()
                 if "RedrivePolicy" in q["Properties"]}
        assert names == {lane_name(region, p) for p in Priority}
        functions = functions_of(template)
        for function, (logical, _) in functions.items():
            remote = set()
            for s in statements_of(template, logical):
                if "sqs:SendMessage" in as_list(s["Action"]):
                    for resource in as_list(s["Resource"]):
                        if "Fn::Join" in resource:  # the own lanes are Fn::GetAtt of the queues
                            remote.add(render(resource))
            # every region dispatches only the segments it holds, into its own lanes
            assert remote == set(), function


def test_one_multi_region_key_a_replica_in_each_other_region(five):
    [primary] = resources(five["Jobsched-us-east-1"]["template"], "AWS::KMS::Key").values()
    assert primary["Properties"]["MultiRegion"] is True and primary["Properties"]["EnableKeyRotation"] is True
    for region in REGIONS[1:]:
        template = five[f"Jobsched-{region}"]["template"]
        assert not resources(template, "AWS::KMS::Key")
        [replica] = resources(template, "AWS::KMS::ReplicaKey").values()
        assert "PrimaryKeyArn" in replica["Properties"]
        _, api = functions_of(template)["api"]
        assert api["Environment"]["Variables"][Env.SIGNING_KEY_ID] == {"Ref": next(iter(
            resources(template, "AWS::KMS::ReplicaKey")))}
    # The tables' stack is deployed after every replica key's.
    assert set(five[f"Jobsched-{REGIONS[-1]}"]["deps"]) >= {f"Jobsched-{r}" for r in REGIONS[:-1]}


def test_a_latency_record_with_a_health_check_per_region(five):
    for region in REGIONS:
        template = five[f"Jobsched-{region}"]["template"]
        [check] = resources(template, "AWS::Route53::HealthCheck").values()
        config = check["Properties"]["HealthCheckConfig"]
        assert config["Type"] == "HTTPS" and config["ResourcePath"] == "/v1/health"
        assert f".execute-api.{region}." in json.dumps(config["FullyQualifiedDomainName"])
        [record] = resources(template, "AWS::Route53::RecordSet").values()
        props = record["Properties"]
        assert props["Name"] == "api.example.com." and props["Region"] == region and props["SetIdentifier"] == region
        assert props["HostedZoneId"] == "Z123EXAMPLE"
        assert props["HealthCheckId"] == {"Fn::GetAtt": [next(iter(resources(template, "AWS::Route53::HealthCheck"))),
                                                         "HealthCheckId"]}
        [domain] = resources(template, "AWS::ApiGatewayV2::DomainName").values()
        assert domain["Properties"]["DomainNameConfigurations"][0]["CertificateArn"] == CERTIFICATES[region]


def test_without_a_domain_no_dns_and_the_default_ownership_regions(tmp_path):
    stacks = synth_app(tmp_path, {"regions": "us-west-2,us-east-1,us-east-2", "encryption": "aws-owned"})
    assert set(stacks) == {"Jobsched-us-west-2", "Jobsched-us-east-1", "Jobsched-us-east-2"}
    for name, stack in stacks.items():
        template = stack["template"]
        assert not any(r["Type"].startswith("AWS::Route53::") for r in template["Resources"].values())
        assert "ApiUrl" in template["Outputs"] and "DomainUrl" not in template["Outputs"]
        assert not resources(template, "AWS::KMS::Key") and not resources(template, "AWS::KMS::ReplicaKey")
        for _, props in functions_of(template).values():
            # Three replicas: its own first, then the nearer of the other two.
            own = name.removeprefix("Jobsched-")
            assert props["Environment"]["Variables"][Env.OWNERSHIP_REGIONS] == {
                "us-west-2": "us-west-2,us-east-2,us-east-1", "us-east-1": "us-east-1,us-east-2,us-west-2",
                "us-east-2": "us-east-2,us-east-1,us-west-2"}[own]
    [ownership] = [t["Properties"] for s in stacks.values()
                   for t in resources(s["template"], "AWS::DynamoDB::GlobalTable").values()
                   if t["Properties"]["TableName"] == "Jobsched-Ownership"]
    assert {r["Region"] for r in ownership["Replicas"]} == {"us-west-2", "us-east-1", "us-east-2"}
    assert "GlobalTableWitnesses" not in ownership


@pytest.mark.parametrize("regions, ownership, segments, message", [
    (REGIONS, (), 4, "ownershipRegions"),  # no three of them in one set
    (REGIONS, ("us-east-1", "eu-west-1", "us-west-2"), 4, "one MRSC Region set"),
    (REGIONS, ("us-east-1", "us-west-2"), 4, "exactly three"),
    (REGIONS, ("us-east-1", "us-east-2", "us-west-2"), 26, "segments"),  # 5 x 26 > 128 rules
    (["us-east-1"], ("us-east-1", "us-east-2", "us-west-2"), 4, "regions"),
])
def test_a_plan_aws_would_refuse_fails_synthesis_naming_the_setting(regions, ownership, segments, message):
    with pytest.raises(ConfigError, match=message):
        plan(tuple(regions), tuple(ownership), segments)


def test_cfn_lint_passes_on_each_kind_of_regions_template(five, tmp_path):
    paths = []
    # The first region's (the signing key's primary, the ownership table), a middle one's (a
    # replica key) and the last one's (the global tables): the others are the middle one's kind.
    names = list(five)
    for name, stack in ((n, five[n]) for n in dict.fromkeys([names[0], names[len(names) // 2], names[-1]])):
        path = tmp_path / f"{name}.template.json"
        path.write_text(json.dumps(stack["template"]))
        paths.append(str(path))
    # W3005: the CDK adds a DependsOn on each function's role next to its GetAtt (test_template.py).
    run = subprocess.run([str(Path(sys.executable).parent / "cfn-lint"), *paths, "--format", "parseable",
                          "--ignore-checks", "W3005"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
