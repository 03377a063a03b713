"""Assertions on the synthesized CloudFormation template."""
import json

import pytest

from jobsched.domain.jobs import Priority
from jobsched.domain.lane_shares import parse_caps
from jobsched.local.stack import function_name
from jobsched.settings import FUNCTION_ENV, WORKER_BATCH_SIZE, Env, Settings

from ..conftest import TEST_SEGMENTS


def resources(template, kind):
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def test_tables_keys_billing_recovery_and_ttl(template):
    tables = resources(template, "AWS::DynamoDB::Table")
    keys = {
        tuple((k["AttributeName"], k["KeyType"]) for k in t["Properties"]["KeySchema"]): t["Properties"]
        for t in tables.values()
    }
    assert set(keys) == {
        (("tenantId", "HASH"), ("jobId", "RANGE")),
        (("bucket", "HASH"), ("sk", "RANGE")),
        (("jobId", "HASH"), ("executionId", "RANGE")),
        (("segment", "HASH"),),
        (("keyHash", "HASH"),),
    }
    for props in keys.values():
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    timers = keys[(("bucket", "HASH"), ("sk", "RANGE"))]
    assert timers["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}


def test_three_lanes_each_with_its_own_dlq(template):
    queues = resources(template, "AWS::SQS::Queue")
    lanes = {k: q for k, q in queues.items() if "RedrivePolicy" in q.get("Properties", {})}
    assert len(lanes) == 3 and len(queues) == 7  # and the task events function's on-failure queue
    dlqs = {q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0] for q in lanes.values()}
    assert len(dlqs) == 3 and dlqs <= set(queues)
    for lane in lanes.values():
        assert lane["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 5
        # visibility timeout covers the worker's timeout six times over
        assert lane["Properties"]["VisibilityTimeout"] == 6 * 900


def test_one_rule_per_segment_each_minute_naming_its_segment(template):
    rules = {k: r for k, r in resources(template, "AWS::Events::Rule").items() if "ScheduleExpression" in r["Properties"]}
    assert len(rules) == TEST_SEGMENTS
    segments = sorted(json.loads(r["Properties"]["Targets"][0]["Input"])["segment"] for r in rules.values())
    assert segments == list(range(TEST_SEGMENTS))
    for rule in rules.values():
        assert rule["Properties"]["ScheduleExpression"] == "cron(* * * * ? *)"
        assert rule["Properties"]["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == 0


def tick_function(template):
    return next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                if r["Properties"]["Handler"] == "jobsched.handlers.tick.handler")


def test_lambda_never_retries_a_failed_tick_itself(template):
    [config] = [c for c in resources(template, "AWS::Lambda::EventInvokeConfig").values()
                if c["Properties"]["FunctionName"] == {"Ref": tick_function(template)}]
    assert config["Properties"]["MaximumRetryAttempts"] == 0
    assert config["Properties"]["MaximumEventAgeInSeconds"] == 60


def test_one_invoke_permission_serves_every_tick_rule_at_the_largest_segment_count():
    import os
    from pathlib import Path

    from jobsched.local.synth import cached_template
    from jobsched.sizing import MAX_SEGMENTS

    # Synthesized once while the code it is made from holds (the test suite's template cache).
    big = cached_template(Path(os.environ["JOBSCHED_TEMPLATE_CACHE"]), segments=MAX_SEGMENTS, progress=lambda said: None)
    rules = {k: r for k, r in resources(big, "AWS::Events::Rule").items() if "ScheduleExpression" in r["Properties"]}
    assert len(rules) == MAX_SEGMENTS
    assert len(big["Resources"]) < 500  # CloudFormation's limit per stack
    tick = tick_function(big)
    permissions = [p["Properties"] for p in resources(big, "AWS::Lambda::Permission").values()
                   if p["Properties"]["FunctionName"] == {"Fn::GetAtt": [tick, "Arn"]}]
    assert len(permissions) == 1 and permissions[0]["Principal"] == "events.amazonaws.com"
    source = json.dumps(permissions[0]["SourceArn"])
    for rule in rules.values():
        name = rule["Properties"]["Name"]
        assert name.startswith("Jobsched-tick-") and len(name) <= 64
    assert "rule/Jobsched-tick-*" in source


def test_concurrency_is_isolated_between_api_tick_and_lanes(template):
    functions = {r["Properties"]["Handler"].split(".")[-2]: r["Properties"]
                 for r in resources(template, "AWS::Lambda::Function").values()}
    assert functions["api"]["ReservedConcurrentExecutions"] == 50
    assert functions["tick"]["ReservedConcurrentExecutions"] == 2 * TEST_SEGMENTS
    assert "ReservedConcurrentExecutions" not in functions["worker"]
    caps = {}
    for mapping in resources(template, "AWS::Lambda::EventSourceMapping").values():
        queue = mapping["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]
        caps[queue] = mapping["Properties"]["ScalingConfig"]["MaximumConcurrency"]
    by_lane = {next(p for p in ("High", "Normal", "Low") if p in q): c for q, c in caps.items()}
    assert by_lane["High"] > by_lane["Normal"] > by_lane["Low"] >= 2
    # Lane shares: the worker bounds a tenant's and a host's containers out of these very caps.
    worker_env = functions["worker"]["Environment"]["Variables"]
    assert parse_caps(worker_env[Env.LANE_CAPS]) == {Priority(lane.upper()): cap for lane, cap in by_lane.items()}
    assert worker_env[Env.LANE_TENANT_PERCENT] == worker_env[Env.LANE_HOST_PERCENT] == "50"
    settings = Settings.from_env(worker_env | {name: "x" for name in FUNCTION_ENV["worker"] if name not in worker_env}
                                 | {Env.SEGMENTS: "1"}, "worker")
    assert settings.lane_caps and settings.lane_tenant_percent == 50
    # One succeeded attempt in a hundred gets its log line (every other outcome always does)
    assert worker_env[Env.ATTEMPT_LOG_PERCENT] == "1" and settings.attempt_log_percent == 1


def _targets_role(template):
    [(logical, role)] = [(k, r) for k, r in resources(template, "AWS::IAM::Role").items() if "TargetAccess" in k]
    statements = [s for p in resources(template, "AWS::IAM::Policy").values()
                  if {"Ref": logical} in p["Properties"]["Roles"]
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    return logical, role, statements


def test_a_tenants_session_is_denied_the_stacks_own_lanes_dlqs_functions_and_alarm_topic(template):
    _, _, statements = _targets_role(template)
    denied = {}
    for statement in statements:
        if statement["Effect"] == "Deny":
            targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            denied.setdefault(statement["Action"], []).extend(json.dumps(t) for t in targets)
    assert len(denied["sqs:SendMessage"]) == 7 and sum("Dlq" in t for t in denied["sqs:SendMessage"]) == 3
    assert sum("TaskEventsFailed" in t for t in denied["sqs:SendMessage"]) == 1
    assert sum("Lane" in t for t in denied["sqs:SendMessage"]) == 6
    assert len(denied["lambda:InvokeFunction"]) == 1 and "function:Jobsched-*" in denied["lambda:InvokeFunction"][0]
    assert len(denied["sns:Publish"]) == 2  # the alarm topic and the absence-alert topic


def test_targets_are_allowed_only_on_resources_tagged_with_the_sessions_tenant(template):
    # The worker's own role reaches no target: it may only assume the targets role.
    worker = next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                  if function_name(r["Properties"]["Handler"]) == "worker")
    logical, role, statements = _targets_role(template)
    worker_statements = _statements(template, worker)
    worker_actions = {a for s in worker_statements for a in _as_list(s["Action"])}
    assert not worker_actions & {"events:PutEvents", "lambda:InvokeFunction"}
    # Absence alerts: the worker's own sns:Publish is on the deployment's alert topic alone.
    [publish] = [s for s in worker_statements if "sns:Publish" in _as_list(s["Action"])]
    assert _as_list(publish["Action"]) == ["sns:Publish"] and "AlertTopic" in publish["Resource"]["Ref"]
    env = template["Resources"][worker]["Properties"]["Environment"]["Variables"]
    assert env[Env.ALERT_TOPIC_ARN] == publish["Resource"]
    sends = [s for s in worker_statements if "sqs:SendMessage" in _as_list(s["Action"])]
    assert all("Lane" in s["Resource"]["Fn::GetAtt"][0] for s in sends)  # its own lanes, by name
    [assume] = [s for s in worker_statements if "sts:AssumeRole" in _as_list(s["Action"])]
    assert sorted(assume["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    assert assume["Resource"] == {"Fn::GetAtt": [logical, "Arn"]}
    # Trust: the worker's role only, with exactly the tenant tag.
    [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"AWS": {"Fn::GetAtt": [template["Resources"][worker]["Properties"]["Role"]
                                                         ["Fn::GetAtt"][0], "Arn"]}}
    assert trust["Condition"] == {"Null": {"aws:RequestTag/jobsched:tenant": "false"},
                                  "ForAllValues:StringEquals": {"aws:TagKeys": ["jobsched:tenant"]}}
    assert role["Properties"]["MaxSessionDuration"] == 3600  # role chaining caps a session at an hour
    # (Container tasks' statements: test_container_tasks_are_granted_only_what_the_operator_lists.)
    allows = [s for s in statements if s["Effect"] == "Allow" and not _container_statement(s)
              and s["Action"] != ["kms:GenerateDataKey", "kms:Decrypt"]]
    assert sorted(s["Action"] for s in allows) == ["events:PutEvents", "lambda:InvokeFunction", "sns:Publish",
                                                   "sqs:SendMessage"]
    for statement in allows:  # no targetArnPatterns in this deployment: every allow needs the tag
        assert statement["Condition"] == {"StringEquals": {
            "aws:ResourceTag/jobsched:tenant": "${aws:PrincipalTag/jobsched:tenant}"}}


def _as_list(value):
    return value if isinstance(value, list) else [value]


def test_encrypted_targets_keys_are_usable_through_sqs_and_sns_when_tagged_with_the_sessions_tenant(template):
    """SSE-KMS targets: SQS and SNS ask KMS for data keys with the session's credentials."""
    _, _, statements = _targets_role(template)
    [keys] = [s for s in statements if "kms:GenerateDataKey" in _as_list(s["Action"])]
    assert (keys["Effect"], keys["Action"]) == ("Allow", ["kms:GenerateDataKey", "kms:Decrypt"])
    assert json.dumps(keys["Resource"]).endswith(':kms:*:", {"Ref": "AWS::AccountId"}, ":key/*"]]}')
    assert keys["Condition"] == {
        "StringLike": {"kms:ViaService": ["sqs.*.amazonaws.com", "sns.*.amazonaws.com"]},
        "StringEquals": {"aws:ResourceTag/jobsched:tenant": "${aws:PrincipalTag/jobsched:tenant}"}}


def test_target_keys_are_a_context_setting_with_a_clear_error():
    from jobsched_infra.config import ConfigError, StackConfig

    class Node:
        def __init__(self, **context):
            self.context = context

        def try_get_context(self, key):
            return self.context.get(key)

    assert StackConfig.from_context(Node()).target_keys == "tagged"
    patterns = "arn:aws:kms:eu-west-1:210987654321:key/shared-*"
    config = StackConfig.from_context(Node(targetKeys="none", targetKeyArnPatterns=patterns))
    assert (config.target_keys, config.target_key_arn_patterns) == ("none", (patterns,))
    with pytest.raises(ConfigError, match="targetKeys"):
        StackConfig.from_context(Node(targetKeys="all"))
    with pytest.raises(ConfigError, match="targetKeyArnPatterns"):
        StackConfig.from_context(Node(targetKeyArnPatterns="arn:aws:sqs:us-east-1:1:q"))


def test_worker_consumes_every_lane_with_partial_batch_failures(template):
    mappings = resources(template, "AWS::Lambda::EventSourceMapping")
    assert len(mappings) == 3
    for mapping in mappings.values():
        assert mapping["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["Properties"]["BatchSize"] == WORKER_BATCH_SIZE


def test_every_record_of_a_batch_fits_one_worker_invocation(template):
    """The worker runs a batch's records at once (a thread each: handlers/worker.py), so the
    function's limit must hold the longest attempt plus the time to record its result."""
    from jobsched.api.models import MAX_TIMEOUT_SEC
    from jobsched.handlers.worker import BATCH_SIZE

    assert BATCH_SIZE == WORKER_BATCH_SIZE
    [worker] = [f for f in resources(template, "AWS::Lambda::Function").values()
                if function_name(f["Properties"]["Handler"]) == "worker"]
    assert worker["Properties"]["Timeout"] >= MAX_TIMEOUT_SEC + 60


def test_functions_get_exactly_the_settings_they_parse(template):
    functions = resources(template, "AWS::Lambda::Function")
    names = set()
    for fn in functions.values():
        props = fn["Properties"]
        name = function_name(props["Handler"])
        names.add(name)
        variables = props["Environment"]["Variables"]
        assert set(FUNCTION_ENV[name]) <= set(variables), name
        assert props["Runtime"] == "python3.14" and props["Architectures"] == ["arm64"]
        # Untraced by default (`-c tracing=on` traces): Lambda's fixed sampling traced nearly every
        # invocation of a quiet deployment (test_sizing.py holds both settings).
        assert props.get("TracingConfig", {}).get("Mode") != "Active"
        fake = {k: v if isinstance(v, str) else "resolved" for k, v in variables.items()}
        Settings.from_env(fake, name)  # parses without error
    assert names == {"api", "authorizer", "tick", "worker", "task_events"}


def test_the_api_checks_targets_at_creation_with_the_workers_allow_private_setting(template):
    # The API refuses at creation an address literal that the worker's call would refuse
    # (domain/endpoints.py): both read the same ALLOW_PRIVATE_TARGETS.
    settings = {function_name(f["Properties"]["Handler"]): f["Properties"]["Environment"]["Variables"]
                for f in resources(template, "AWS::Lambda::Function").values()}
    assert settings["api"][Env.ALLOW_PRIVATE_TARGETS] == settings["worker"][Env.ALLOW_PRIVATE_TARGETS]


def _statements(template, function_logical_id):
    role = template["Resources"][function_logical_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    out = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            out.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return out


@pytest.mark.parametrize("name", ["api", "tick", "worker"])
def test_least_privilege_no_wildcard_actions(template, name):
    logical = next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                   if function_name(r["Properties"]["Handler"]) == name)
    actions = set()
    for statement in _statements(template, logical):
        acts = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        actions.update(acts)
        for action in acts:
            assert "*" not in action, f"{name} has wildcard action {action}"
    assert "dynamodb:Scan" not in actions
    # One item deleted one by one: a batch create's job taken back (the API, on Jobs alone).
    deleting = [s for s in _statements(template, logical) if "dynamodb:DeleteItem" in
                (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
    assert not deleting or name == "api"
    for statement in deleting:
        assert statement["Action"] == "dynamodb:DeleteItem" and "StorageJobs" in json.dumps(statement["Resource"])
    if name == "tick":
        assert "dynamodb:Query" in actions and "dynamodb:UpdateItem" in actions
        assert "dynamodb:GetItem" in actions  # watermarks only


@pytest.mark.parametrize("name", ["api", "worker"])
def test_api_and_worker_may_batch_read_the_jobs_table(template, name):
    # The API's tag and name filters and the worker's batch read their jobs with BatchGetItem:
    # without it AWS answers AccessDenied (a 500 for the filters, a read per record for a batch).
    logical = next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                   if function_name(r["Properties"]["Handler"]) == name)
    jobs_table = next(k for k, t in resources(template, "AWS::DynamoDB::Table").items()
                      if t["Properties"]["KeySchema"][1:] == [{"AttributeName": "jobId", "KeyType": "RANGE"}]
                      and t["Properties"]["KeySchema"][0]["AttributeName"] == "tenantId")
    granted = [s for s in _statements(template, logical) if s.get("Effect") == "Allow"
               and "dynamodb:BatchGetItem" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
    resources_text = json.dumps([s["Resource"] for s in granted])
    assert {"Fn::GetAtt": [jobs_table, "Arn"]} in [r for s in granted for r in
                                                    (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])], resources_text


def test_dead_letters_index_is_queryable_by_the_api(template):
    executions = next(t for t in resources(template, "AWS::DynamoDB::Table").values()
                      if t["Properties"]["KeySchema"][1:] == [{"AttributeName": "executionId", "KeyType": "RANGE"}])
    [index] = executions["Properties"]["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "DeadLetters"
    assert [k["AttributeName"] for k in index["KeySchema"]] == ["deadLetterTenant", "deadAtMs"]
    api_logical = next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                       if function_name(r["Properties"]["Handler"]) == "api")
    resources_text = json.dumps([s["Resource"] for s in _statements(template, api_logical)])
    assert "/index/*" in resources_text


def test_http_api_and_dashboard(template):
    """The HTTP API by default (-c api=rest for the REST API): every path to the function, in the
    REST proxy's event shape (payload 1.0), on the $default stage (no stage prefix in the paths)."""
    assert resources(template, "AWS::ApiGateway::RestApi") == {}
    assert len(resources(template, "AWS::ApiGatewayV2::Api")) == 1
    stage = next(iter(resources(template, "AWS::ApiGatewayV2::Stage").values()))["Properties"]
    assert stage["StageName"] == "$default" and stage["AutoDeploy"] is True
    [integration] = resources(template, "AWS::ApiGatewayV2::Integration").values()
    assert integration["Properties"]["PayloadFormatVersion"] == "1.0"
    # Every route to the one integration; the keys' authorizer: test_the_apis_key_check_is_a_cached_lambda_...
    routes = resources(template, "AWS::ApiGatewayV2::Route").values()
    assert {r["Properties"]["Target"]["Fn::Join"][1][1]["Ref"] for r in routes} == set(
        resources(template, "AWS::ApiGatewayV2::Integration"))
    dashboard = next(iter(resources(template, "AWS::CloudWatch::Dashboard").values()))
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in ("FireLatenessMs", "Succeeded", "Dead", "ApproximateNumberOfMessagesVisible",
                   "ApproximateAgeOfOldestMessage", "SegmentMinutesBehind",
                   "ConcurrentExecutions", "Throttles", "WriteThrottleEvents", "ConsumedWriteCapacityUnits",
                   "4xx", "5xx", "Latency"):
        assert metric in body, metric
    # The tick's duration per segment comes from its log lines (no metric per segment and run)
    assert "stats max(durationMs)" in body and "by segment" in body and "TickDurationMs" not in body
    # and what the ticks dispatched, a minute at a time (no Dispatched metric: $0.30 a month)
    assert "stats sum(dispatched) as dispatched by bin(1m)" in body and '"Dispatched"' not in body


def test_every_log_group_has_a_retention(template):
    groups = resources(template, "AWS::Logs::LogGroup")
    assert len(groups) == 6  # five functions (the API's authorizer one), API access logs
    assert all(g["Properties"].get("RetentionInDays") for g in groups.values())


def test_settings_names_come_from_one_module():
    assert Env.LANE_URL and all(v.endswith("_URL") for v in Env.LANE_URL.values())


def test_alarms_publish_to_one_topic_and_cover_dlqs_ticks_lateness_errors_and_the_apis_5xx(template):
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    topics = resources(template, "AWS::SNS::Topic")
    assert len(topics) == 2  # the alarms' topic, and the absence alerts' (no alarm publishes there)
    topic = next(t for t in topics if "AlertTopic" not in t)
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]
        assert "Runbook: docs/operations.md#" in alarm["Properties"]["AlarmDescription"]
    names = " ".join(alarms)
    for expected in ("HighDlqNotEmpty", "NormalDlqNotEmpty", "LowDlqNotEmpty", "TickMissing", "TickBehind",
                     "LatenessP99", "DeadRate", "WorkerErrors", "ApiServerErrors"):
        assert expected in names, expected
    # No alarm on DynamoDB's throttle events (six alarm metrics, $0.60 a month): a throttle the SDK's
    # retries absorb costs only time; one they do not shows in the API's own 5xx count (this alarm),
    # the tick's and the worker's alarms. The dashboard still graphs them.
    assert not [k for k, a in alarms.items() if "ThrottleEvents" in json.dumps(a)]
    api_5xx = next(a for k, a in alarms.items() if "ApiServerErrors" in k)["Properties"]
    [stat] = [m["MetricStat"] for m in api_5xx["Metrics"]]
    assert (stat["Metric"]["MetricName"], stat["Metric"]["Namespace"], stat["Stat"], stat["Period"]) == \
        ("Api5xx", "Jobsched", "Sum", 300)
    assert stat["Metric"]["Dimensions"] == [{"Name": "service", "Value": "jobsched-api"}]
    assert api_5xx["Threshold"] == 5 and api_5xx["TreatMissingData"] == "notBreaching"
    dlq_alarms = [a for k, a in alarms.items() if "DlqNotEmpty" in k]
    assert all(a["Properties"]["Threshold"] == 0 for a in dlq_alarms)
    lateness = next(a for k, a in alarms.items() if "LatenessP99" in k)["Properties"]
    assert lateness["Threshold"] == 1000 and '"Stat": "p99"' in json.dumps(lateness)


def test_each_lane_has_an_alarm_on_its_in_flight_messages_below_sqss_limit(template):
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    lanes = {k for k, q in resources(template, "AWS::SQS::Queue").items()
             if "RedrivePolicy" in q.get("Properties", {})}
    in_flight = {k: a["Properties"] for k, a in alarms.items() if "LaneInFlight" in k}
    assert len(in_flight) == 3
    watched = set()
    for props in in_flight.values():
        assert props["MetricName"] == "ApproximateNumberOfMessagesNotVisible" and props["Namespace"] == "AWS/SQS"
        assert props["Statistic"] == "Maximum" and props["Threshold"] == 60_000 < 120_000
        [dimension] = props["Dimensions"]
        assert dimension["Name"] == "QueueName"
        watched.add(dimension["Value"]["Fn::GetAtt"][0])
    assert watched == lanes


def test_the_worker_knows_each_lanes_dlq_and_may_send_to_it_alone_among_the_functions(template):
    functions = resources(template, "AWS::Lambda::Function")
    worker = next(f for k, f in functions.items() if "Worker" in k)["Properties"]["Environment"]["Variables"]
    dlqs = {k for k in resources(template, "AWS::SQS::Queue") if "Dlq" in k}
    assert {worker[v]["Ref"] for v in Env.LANE_DLQ_URL.values()} == dlqs
    senders = {}
    for key, policy in resources(template, "AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if "sqs:SendMessage" in _as_list(statement["Action"]) and statement["Effect"] == "Allow":
                for target in targets:
                    if isinstance(target, dict) and target.get("Fn::GetAtt", [""])[0] in dlqs:
                        senders.setdefault(target["Fn::GetAtt"][0], set()).add(key)
    assert set(senders) == dlqs and all(len(keys) == 1 and "Worker" in next(iter(keys)) for keys in senders.values())


def test_worker_may_call_target_resources_with_named_actions_only(template):
    _, _, statements = _targets_role(template)
    actions = set()
    for statement in statements:
        actions.update(_as_list(statement["Action"]))
    assert actions == {"sqs:SendMessage", "sns:Publish", "events:PutEvents", "lambda:InvokeFunction",
                       # the keys of encrypted queues and topics (SSE-KMS), through SQS and SNS only
                       "kms:GenerateDataKey", "kms:Decrypt",
                       # container tasks, as the test deployment grants them (local/synth.py)
                       "ecs:RunTask", "ecs:TagResource", "ecs:DescribeTasks", "ecs:StopTask", "ecs:ListTasks",
                       "iam:PassRole"}


def test_data_at_rest_uses_one_customer_managed_key_with_rotation(template):
    keys = resources(template, "AWS::KMS::Key")
    assert len(keys) == 1
    key_id, key = next(iter(keys.items()))
    assert key["Properties"]["EnableKeyRotation"] is True
    for table in resources(template, "AWS::DynamoDB::Table").values():
        sse = table["Properties"]["SSESpecification"]
        assert sse["SSEEnabled"] is True and sse["KMSMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    for queue in resources(template, "AWS::SQS::Queue").values():
        assert queue["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}


def test_alarm_and_alert_topics_use_the_stacks_key_and_cloudwatch_may_publish_to_them(template):
    [(key_id, key)] = resources(template, "AWS::KMS::Key").items()
    topics = resources(template, "AWS::SNS::Topic")
    assert len(topics) == 2
    for topic in topics.values():
        assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    # CloudWatch publishes an alarm's notification as its service principal: only the key policy
    # can let it use the key, and only for this account's alarms.
    [statement] = [s for s in key["Properties"]["KeyPolicy"]["Statement"]
                   if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert statement["Effect"] == "Allow"
    assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert ":alarm:*" in json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"])
    # Every function that sends to the encrypted lanes, and the worker that publishes to the
    # encrypted alert topic, has data keys from the key.
    for handler in ("api", "tick", "worker", "task_events"):
        logical = next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                       if function_name(r["Properties"]["Handler"]) == handler)
        granted = {a for s in _statements(template, logical) if s["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
                   and "Condition" not in s for a in _as_list(s["Action"])}
        assert {"kms:GenerateDataKey", "kms:Decrypt"} <= granted, handler


def test_no_grant_that_no_call_uses(template):
    """Each removed grant was checked against the code: the lanes' URLs come from the environment
    (no GetQueueUrl, GetQueueAttributes), no call describes the key, and only the API's two index
    reads (JobsByState, DeadLetters) Query an index; item actions name the table alone."""
    by_name = {function_name(r["Properties"]["Handler"]): k for k, r in resources(template, "AWS::Lambda::Function").items()}
    for name in ("api", "tick", "task_events"):
        actions = {a for s in _statements(template, by_name[name]) for a in _as_list(s["Action"])}
        assert not actions & {"sqs:GetQueueAttributes", "sqs:GetQueueUrl"}, name
    for name, logical in by_name.items():
        for statement in _statements(template, logical):
            actions = _as_list(statement["Action"])
            assert "kms:DescribeKey" not in actions, name
            on_index = [r for r in _as_list(statement["Resource"]) if "/index/" in json.dumps(r)]
            if on_index:
                assert actions == ["dynamodb:Query"] and name == "api", (name, actions)
    index_readers = [s for s in _statements(template, by_name["api"]) if "/index/" in json.dumps(s["Resource"])]
    assert len(index_readers) == 2  # the Jobs and the Executions tables' indexes


def test_an_event_the_task_events_function_failed_three_times_is_kept_encrypted_and_alarmed(template):
    [(key_id, _)] = resources(template, "AWS::KMS::Key").items()
    logical = next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                   if r["Properties"]["Handler"] == "jobsched.handlers.task_events.handler")
    [config] = [c["Properties"] for c in resources(template, "AWS::Lambda::EventInvokeConfig").values()
                if c["Properties"]["FunctionName"] == {"Ref": logical}]
    assert config["MaximumRetryAttempts"] == 2
    queue_ref = config["DestinationConfig"]["OnFailure"]["Destination"]
    queue = template["Resources"][queue_ref["Fn::GetAtt"][0]]
    assert queue["Type"] == "AWS::SQS::Queue" and queue_ref["Fn::GetAtt"][1] == "Arn"
    assert queue["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    # Lambda sends the record with the function's role: SendMessage on that queue, data keys.
    sends = [s for s in _statements(template, logical) if "sqs:SendMessage" in _as_list(s["Action"])
             and s["Resource"] == queue_ref]
    assert sends
    [alarm] = [a["Properties"] for a in resources(template, "AWS::CloudWatch::Alarm").values()
               if {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_ref["Fn::GetAtt"][0], "QueueName"]}}
               in a["Properties"].get("Dimensions", [])]
    assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_api_stage_logs_access_but_never_bodies_and_is_throttled(template):
    stage = next(iter(resources(template, "AWS::ApiGatewayV2::Stage").values()))["Properties"]
    assert stage["AccessLogSettings"]["DestinationArn"]
    fields = json.loads(stage["AccessLogSettings"]["Format"])
    assert not any("body" in v.lower() or "authorization" in v.lower() for v in fields.values())
    # an HTTP API has no execution log: the access log says why API Gateway itself answered 5xx
    assert {"$context.integrationErrorMessage", "$context.error.message"} <= set(fields.values())
    # delivered to a vended-logs group: not added to the account's one Logs resource policy
    group = next(r for r in resources(template, "AWS::Logs::LogGroup").values()
                 if "vendedlogs" in json.dumps(r["Properties"].get("LogGroupName", "")))
    assert group["Properties"]["LogGroupName"]["Fn::Join"][1][0].startswith("/aws/vendedlogs/apigateway/") \
        if isinstance(group["Properties"]["LogGroupName"], dict) else \
        group["Properties"]["LogGroupName"].startswith("/aws/vendedlogs/apigateway/")
    assert stage["DefaultRouteSettings"]["ThrottlingRateLimit"] > 0
    assert stage["DefaultRouteSettings"]["ThrottlingBurstLimit"] > 0
    # every route without a key has a throttle of its own below the stage's (a flood of them takes
    # a bounded share of the API function), and each names a route the API has
    routes = {r["Properties"]["RouteKey"] for r in resources(template, "AWS::ApiGatewayV2::Route").values()}
    keyless = stage["RouteSettings"]
    assert set(keyless) == {"POST /v1/executions/{executionId}/heartbeat", "POST /v1/executions/{executionId}/complete",
                            "POST /v1/executions/{executionId}/fail", "GET /v1/openapi.json", "GET /v1/health",
                            "GET /console", "GET /console/{name}"} and set(keyless) <= routes
    for key, limits in keyless.items():
        assert 0 < limits["ThrottlingRateLimit"] < stage["DefaultRouteSettings"]["ThrottlingRateLimit"], key
        assert 0 < limits["ThrottlingBurstLimit"] < stage["DefaultRouteSettings"]["ThrottlingBurstLimit"], key
    assert keyless["GET /v1/health"]["ThrottlingRateLimit"] == 20
    # a usage plan without API Gateway keys would throttle nothing: none is made
    assert resources(template, "AWS::ApiGateway::UsagePlan") == {}
    assert resources(template, "AWS::ApiGateway::ApiKey") == {}


def test_the_api_type_is_a_context_setting_with_a_clear_error():
    from jobsched_infra.config import ConfigError, StackConfig

    class Node:
        def __init__(self, **context):
            self.context = context

        def try_get_context(self, key):
            return self.context.get(key)

    assert StackConfig.from_context(Node()).api == "http"
    assert StackConfig.from_context(Node(api="rest")).api == "rest"
    with pytest.raises(ConfigError, match="'api' must be one of http, rest"):
        StackConfig.from_context(Node(api="websocket"))


def test_every_function_has_its_own_role_without_managed_policies(template):
    roles = resources(template, "AWS::IAM::Role")
    function_roles = {r["Properties"]["Role"]["Fn::GetAtt"][0]
                      for r in resources(template, "AWS::Lambda::Function").values()}
    assert len(function_roles) == 5
    for role in function_roles:
        assert "ManagedPolicyArns" not in roles[role]["Properties"]


def test_cfn_lint_passes_on_the_synthesized_template(template, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "Jobsched.template.json"
    path.write_text(json.dumps(template))
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    # W3005: the CDK adds a DependsOn on each function's role next to its GetAtt; redundant, harmless.
    run = subprocess.run([str(cfn_lint), str(path), "--format", "parseable", "--ignore-checks", "W3005"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_synthesis_fails_on_an_unacknowledged_cdk_nag_finding(tmp_path):
    import aws_cdk as cdk
    from aws_cdk import aws_sqs as sqs

    from jobsched_infra.compliance import apply_checks

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Probe")
    sqs.Queue(stack, "NoDlqNoSsl")  # AwsSolutions-SQS3 and SQS4
    apply_checks(app)
    with pytest.raises(Exception, match="(?i)validation"):
        app.synth()


def test_the_api_ends_slow_requests_itself_before_api_gateway_does(template):
    """API Gateway gives up at 29 s with a 504; the function's own limit is lower and its AWS calls
    are bounded inside it, so a slow path ends in the API's error shape."""
    from jobsched.store import aws

    [api] = [f for f in resources(template, "AWS::Lambda::Function").values()
             if function_name(f["Properties"]["Handler"]) == "api"]
    timeout = api["Properties"]["Timeout"]
    config = aws._API_CONFIG
    worst_call = config.retries["total_max_attempts"] * (config.connect_timeout + config.read_timeout)
    assert timeout <= 20 and worst_call <= timeout / 1.5


def test_executions_expire_by_a_configurable_retention(template):
    tables = resources(template, "AWS::DynamoDB::Table")
    executions = [t for t in tables.values() if t["Properties"]["KeySchema"][0]["AttributeName"] == "jobId"
                  and t["Properties"]["KeySchema"][1]["AttributeName"] == "executionId"][0]
    assert executions["Properties"]["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    for fn in resources(template, "AWS::Lambda::Function").values():
        if fn["Properties"]["Handler"].startswith("jobsched."):
            assert fn["Properties"]["Environment"]["Variables"][Env.EXECUTION_RETENTION_DAYS] == "30"


def test_no_bytecode_ships_in_the_layer_or_the_code(template, cdk_out):
    """Bytecode compiled on this machine is for its Python, not Lambda's 3.14: it would only add
    bytes to unzip at each cold start. The assets (code and layer) hold sources only."""
    text = json.dumps(template)
    folders = [p for p in cdk_out.glob("asset.*") if p.is_dir() and p.name.split(".", 1)[1] in text]
    assert len(folders) >= 2  # the functions' code and the dependency layer
    assert any((folder / "python").is_dir() for folder in folders)  # the layer is among them
    for folder in folders:
        compiled = list(folder.rglob("*.pyc"))
        assert compiled == [], (folder.name, compiled[:3])
        assert any(folder.rglob("*.py"))


def test_the_layer_bundles_the_pinned_boto3_and_botocore(template, cdk_out):
    """The functions build requests with botocore's parameter validation off (store/aws.py): the
    SDK they run is the layer's pinned one (before /var/runtime's on Lambda's sys.path), not the
    runtime's, whatever version the runtime carries that day."""
    from importlib.metadata import version
    text = json.dumps(template)
    [layer] = [p for p in cdk_out.glob("asset.*") if p.is_dir() and p.name.split(".", 1)[1] in text
               and (p / "python").is_dir()]
    for name in ("boto3", "botocore"):
        assert (layer / "python" / f"{name}-{version(name)}.dist-info").is_dir(), (name, version(name))
        assert (layer / "python" / name / "__init__.py").is_file()


def test_the_api_encrypts_only_signing_secrets_and_the_worker_decrypts_them(template):
    by_name = {function_name(r["Properties"]["Handler"]): k for k, r in resources(template, "AWS::Lambda::Function").items()}

    def with_action(name, action):
        return [s for s in _statements(template, by_name[name])
                if action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]

    [encrypt] = with_action("api", "kms:Encrypt")
    assert encrypt["Condition"] == {"StringEquals": {"kms:EncryptionContext:purpose": "signing"}}
    assert not with_action("worker", "kms:Encrypt") and not with_action("tick", "kms:Encrypt")
    assert with_action("worker", "kms:Decrypt") and with_action("worker", "dynamodb:GetItem")


def test_jobs_have_a_keys_only_state_index_and_expire(template):
    """Issue 28, item 8: GET /v1/jobs?state= reads a state index (its cost follows the matches),
    JobsByStateShard alone as deployed by default; ended one-time jobs expire by TTL."""
    jobs = next(t for t in resources(template, "AWS::DynamoDB::Table").values()
                if t["Properties"]["KeySchema"] == [{"AttributeName": "tenantId", "KeyType": "HASH"},
                                                    {"AttributeName": "jobId", "KeyType": "RANGE"}])
    [sharded] = jobs["Properties"]["GlobalSecondaryIndexes"]
    assert sharded["IndexName"] == "JobsByStateShard" and sharded["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert jobs["Properties"]["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}


def test_the_state_index_is_sharded_and_the_api_lists_through_it(template):
    """One tenant's state index entries over 32 keys per state (store/jobs_state_index.py): the
    Jobs table has JobsByStateShard (partition stateShard, sort jobId, keys only) alone, as
    deployed by default (`-c stateIndex=JobsByState` keeps the old one too: test_sizing.py); the
    API's Query grant covers the table's indexes and the API lists through it."""
    from jobsched.store.jobs_state_index import JOBS_BY_STATE_SHARD_INDEX, STATE_SHARD_ATTRIBUTE

    jobs = next(t for t in resources(template, "AWS::DynamoDB::Table").values()
                if t["Properties"]["KeySchema"][0]["AttributeName"] == "tenantId"
                and t["Properties"].get("GlobalSecondaryIndexes"))
    indexes = {i["IndexName"]: i for i in jobs["Properties"]["GlobalSecondaryIndexes"]}
    assert set(indexes) == {JOBS_BY_STATE_SHARD_INDEX}
    assert indexes[JOBS_BY_STATE_SHARD_INDEX]["KeySchema"] == [
        {"AttributeName": STATE_SHARD_ATTRIBUTE, "KeyType": "HASH"}, {"AttributeName": "jobId", "KeyType": "RANGE"}]
    assert {"AttributeName": STATE_SHARD_ATTRIBUTE, "AttributeType": "S"} in jobs["Properties"]["AttributeDefinitions"]
    api_logical = next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                       if function_name(r["Properties"]["Handler"]) == "api")
    queries = [s for s in _statements(template, api_logical) if "dynamodb:Query" in _as_list(s["Action"])]
    assert any("StorageJobs" in json.dumps(s["Resource"]) and "/index/*" in json.dumps(s["Resource"])
               for s in queries)
    env = template["Resources"][api_logical]["Properties"]["Environment"]["Variables"]
    assert env[Env.JOBS_STATE_INDEX] == JOBS_BY_STATE_SHARD_INDEX


def test_the_worker_may_cut_its_records_visibility_on_the_lanes_and_the_lanes_keep_six_times_its_timeout(template):
    """Issue 28, item 7: the worker's ChangeMessageVisibilityBatch is allowed by
    sqs:ChangeMessageVisibility on the three lanes (and nothing broader); the lanes keep AWS's six
    times the function timeout for batches that wait on a throttled invocation."""
    worker_logical = next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                          if function_name(r["Properties"]["Handler"]) == "worker")
    timeout = template["Resources"][worker_logical]["Properties"]["Timeout"]
    lanes = {k for k in resources(template, "AWS::SQS::Queue") if "Lane" in k and "Dlq" not in k}
    assert len(lanes) == 3
    for lane in lanes:
        assert template["Resources"][lane]["Properties"]["VisibilityTimeout"] == 6 * timeout
    granted = set()
    for statement in _statements(template, worker_logical):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if "sqs:ChangeMessageVisibility" in actions:
            targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            assert all(isinstance(t, dict) for t in targets)  # named queues, never a wildcard
            granted |= {t["Fn::GetAtt"][0] for t in targets}
    assert granted == lanes


def _container_statement(statement) -> bool:
    return any(a.startswith(("ecs:", "iam:")) for a in _as_list(statement["Action"]))


def test_container_tasks_are_granted_only_what_the_operator_lists(template):
    """ECS_TASK's permissions (docs/architecture.md, "ECS_TASK"): RunTask only on the listed task
    definitions that carry the session's tenant tag, in the listed clusters; the task's tags only
    at RunTask; PassRole only of the listed roles and only to ECS tasks; describe, list and stop
    only in the listed clusters. The test deployment grants local-* (local/synth.py)."""
    from jobsched.local.synth import LOCAL_CONTAINER_GRANTS

    _, _, statements = _targets_role(template)
    by_action = {}
    for statement in statements:
        if _container_statement(statement):
            for action in _as_list(statement["Action"]):
                by_action[action] = statement
    clusters = {"ArnLike": {"ecs:cluster": list(LOCAL_CONTAINER_GRANTS["ecs_clusters"])}}
    run = by_action["ecs:RunTask"]
    assert _as_list(run["Resource"]) == list(LOCAL_CONTAINER_GRANTS["ecs_task_definitions"])
    assert run["Condition"] == {**clusters, "StringEquals": {
        "aws:ResourceTag/jobsched:tenant": "${aws:PrincipalTag/jobsched:tenant}"}}
    assert by_action["ecs:TagResource"]["Condition"] == {"StringEquals": {"ecs:CreateAction": "RunTask"}}
    passing = by_action["iam:PassRole"]
    assert _as_list(passing["Resource"]) == list(LOCAL_CONTAINER_GRANTS["ecs_task_roles"])
    assert passing["Condition"] == {"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}}
    # A running task carries its tenant's tag (propagated from its task definition): another
    # tenant's session may not describe or stop it; a stopped one has lost its tags (IfExists).
    for action in ("ecs:DescribeTasks", "ecs:StopTask"):
        assert by_action[action]["Condition"] == {**clusters, "StringEqualsIfExists": {
            "aws:ResourceTag/jobsched:tenant": "${aws:PrincipalTag/jobsched:tenant}"}}, action
    assert by_action["ecs:ListTasks"]["Condition"] == clusters  # IAM offers no tag key for ListTasks
    assert all(s["Effect"] == "Allow" and "*" not in _as_list(s["Resource"]) for s in by_action.values())
    # The task events rule hears only stopped tasks of the granted clusters, and its function may
    # make no ECS call at all (the event says everything).
    [rule] = [r for r in resources(template, "AWS::Events::Rule").values() if "EventPattern" in r["Properties"]]
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.ecs"] and pattern["detail-type"] == ["ECS Task State Change"]
    assert pattern["detail"]["lastStatus"] == ["STOPPED"]
    assert pattern["detail"]["clusterArn"] == [{"wildcard": c} for c in LOCAL_CONTAINER_GRANTS["ecs_clusters"]]
    events_fn = next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                     if r["Properties"]["Handler"] == "jobsched.handlers.task_events.handler")
    assert rule["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [events_fn, "Arn"]}
    assert not any(a.startswith(("ecs:", "iam:")) for s in _statements(template, events_fn)
                   for a in _as_list(s["Action"]))


def test_a_deployment_grants_no_container_task_by_default():
    """Nothing runs until an operator lists task definitions and clusters: the targets role of a
    default configuration holds no ECS or PassRole action, and there is no task events rule."""
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_

    from jobsched_infra.config import StackConfig
    from jobsched_infra.targets import TargetAccess

    assert StackConfig().ecs_task_definitions == () and StackConfig().ecs_clusters == ()
    app = cdk.App()
    stack = cdk.Stack(app, "Bare")
    worker = lambda_.Function(stack, "Worker", runtime=lambda_.Runtime.PYTHON_3_12, handler="w.handler",
                              code=lambda_.Code.from_inline("def handler(e, c): pass"))
    TargetAccess(stack, "Targets", worker=worker, patterns=(), task_definitions=(), clusters=(), tagged_keys=False)
    bare = app.synth().get_stack_by_name("Bare").template
    actions = {a for p in resources(bare, "AWS::IAM::Policy").values()
               for s in p["Properties"]["PolicyDocument"]["Statement"] for a in _as_list(s["Action"])}
    assert "sqs:SendMessage" in actions and not any(a.startswith(("ecs:", "iam:")) for a in actions)
    assert not any(a.startswith("kms:") for a in actions)  # -c targetKeys=none: no key at all


def test_the_apis_key_check_is_a_cached_lambda_authorizer_on_every_route_that_takes_a_key(template):
    """A flood of bad keys is answered by API Gateway and the authorizer, never the API function."""
    from jobsched.api.routes import public_routes

    [(authorizer_id, authorizer)] = resources(template, "AWS::ApiGatewayV2::Authorizer").items()
    props = authorizer["Properties"]
    assert (props["AuthorizerType"], props["AuthorizerPayloadFormatVersion"], props["EnableSimpleResponses"]) == \
        ("REQUEST", "2.0", True)
    assert props["IdentitySource"] == ["$request.header.Authorization"]
    assert props["AuthorizerResultTtlInSeconds"] == 60  # how long a revoked key can still pass
    functions = {function_name(r["Properties"]["Handler"]): (k, r["Properties"])
                 for k, r in resources(template, "AWS::Lambda::Function").items()}
    logical, authorizer_fn = functions["authorizer"]
    assert logical in json.dumps(props["AuthorizerUri"])
    assert authorizer_fn["ReservedConcurrentExecutions"] == 10 and authorizer_fn["Timeout"] == 5
    # The authorizer's role: one GetItem on the ApiKeys table (and its logs), nothing else
    actions = {a for s in _statements(template, logical) for a in _as_list(s["Action"])}
    assert actions - {"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments",
                      "xray:PutTelemetryRecords"} == {"dynamodb:GetItem"}
    # The $default route (every path not listed) has the authorizer; the routes without a key have none
    routes = {r["Properties"]["RouteKey"]: r["Properties"] for r in resources(template, "AWS::ApiGatewayV2::Route").values()}
    assert routes["$default"]["AuthorizationType"] == "CUSTOM"
    assert routes["$default"]["AuthorizerId"] == {"Ref": authorizer_id}
    assert set(routes) == {"$default"} | {f"{method} {path}" for method, path in public_routes()}
    assert all(r["AuthorizationType"] == "NONE" for key, r in routes.items() if key != "$default")
    # API Gateway may invoke the authorizer (its own permission, from this API's authorizers only)
    permissions = [p["Properties"] for p in resources(template, "AWS::Lambda::Permission").values()
                   if p["Properties"]["FunctionName"] == {"Fn::GetAtt": [logical, "Arn"]}]
    assert permissions and "/authorizers/" in json.dumps(permissions[0]["SourceArn"])


def test_a_deployment_without_reserved_concurrency_is_a_context_setting_for_low_quota_accounts():
    """`-c reservedConcurrency=off`: what `make deploy` proposes when the account's Lambda limit cannot
    hold the reservations and keep 100 unreserved (jobsched_infra/concurrency_check.py)."""
    import aws_cdk as cdk

    from jobsched_infra.concurrency_check import reserved_by
    from jobsched_infra.config import ConfigError, StackConfig
    from jobsched_infra.stack import JobschedStack

    class Node:
        def __init__(self, **context):
            self.context = context

        def try_get_context(self, key):
            return self.context.get(key)

    assert StackConfig.from_context(Node()).reserved_concurrency is True
    config = StackConfig.from_context(Node(reservedConcurrency="off", segments=1, profile="1k"))
    assert config.reserved_concurrency is False and config.worker_reserved_concurrency > 0  # the profile's, unused
    with pytest.raises(ConfigError, match="reservedConcurrency"):
        StackConfig.from_context(Node(reservedConcurrency="none"))
    app = cdk.App()
    JobschedStack(app, "Unreserved", config=config)
    unreserved = app.synth().get_stack_by_name("Unreserved").template
    functions = resources(unreserved, "AWS::Lambda::Function")
    assert len(functions) == 5 and reserved_by(unreserved) == {}
    assert not any("ReservedConcurrentExecutions" in f["Properties"] for f in functions.values())


@pytest.mark.parametrize("name", ["api", "tick", "worker", "task_events"])
def test_every_function_that_sends_to_the_encrypted_lanes_may_make_their_data_keys(template, name):
    """SQS asks KMS for a data key as the sender (SSE-KMS): each function that sends to a lane holds
    kms:GenerateDataKey and kms:Decrypt on the stack's key (a merge once left them to one function)."""
    logical = next(k for k, r in resources(template, "AWS::Lambda::Function").items()
                   if function_name(r["Properties"]["Handler"]) == name)
    actions = set()
    for statement in _statements(template, logical):
        actions.update(statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]])
    assert {"kms:GenerateDataKey", "kms:Decrypt", "sqs:SendMessage"} <= actions


def test_every_function_that_hands_off_may_put_and_batch_write_timers_and_nothing_more_on_them(template):
    """Timer packs are written as timers are (one item by PutItem, more by BatchWriteItem): each
    function whose hand-off writes next timers holds both on the Timers table; only the tick reads
    it (Query), and none deletes or updates a timer (a timer, a pack too, is an immutable fact)."""
    [timers] = [k for k, t in resources(template, "AWS::DynamoDB::Table").items()
                if [s["AttributeName"] for s in t["Properties"]["KeySchema"]] == ["bucket", "sk"]]
    arn = {"Fn::GetAtt": [timers, "Arn"]}
    by_name = {function_name(r["Properties"]["Handler"]): k for k, r in resources(template, "AWS::Lambda::Function").items()}
    on_timers = {name: {a for s in _statements(template, logical) if arn in _as_list(s["Resource"])
                        for a in _as_list(s["Action"])} for name, logical in by_name.items()}
    for name in ("api", "tick", "worker", "task_events"):
        assert {"dynamodb:PutItem", "dynamodb:BatchWriteItem"} <= on_timers[name], name
    assert {name for name, actions in on_timers.items() if "dynamodb:Query" in actions} == {"tick"}
    assert not any(actions & {"dynamodb:DeleteItem", "dynamodb:UpdateItem"} for actions in on_timers.values())


def test_the_dead_rate_alarm_reads_two_metrics_the_executions_that_ended(template):
    """A standard alarm is billed per metric it reads: the share of ended executions (SUCCEEDED or
    DEAD) that end DEAD reads two; the retried attempts, a third metric, are not an end."""
    [props] = [a["Properties"] for k, a in resources(template, "AWS::CloudWatch::Alarm").items() if "DeadRate" in k]
    read = {q["MetricStat"]["Metric"]["MetricName"] for q in props["Metrics"] if "MetricStat" in q}
    assert read == {"Dead", "Succeeded"}
    [watched] = [q["Expression"] for q in props["Metrics"] if q.get("ReturnData", True) and "Expression" in q]
    assert watched.replace(" ", "") == "100*dead/MAX([succeeded+dead,1])"
    assert props["Threshold"] == 5


def test_the_lanes_reuse_their_data_keys_an_hour_and_the_dead_letter_queues_five_minutes(template):
    """SQS asks KMS for a lane's data key once per sender and reuse period: an hour on the lanes
    (the steady traffic), SQS's default 5 minutes on the dead-letter queues (no steady traffic)."""
    queues = resources(template, "AWS::SQS::Queue")
    lanes = {k: q["Properties"] for k, q in queues.items() if "RedrivePolicy" in q["Properties"]}
    dead_letters = {q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0] for q in queues.values()
                    if "RedrivePolicy" in q["Properties"]}
    assert len(lanes) == 3 and len(dead_letters) == 3
    for props in lanes.values():
        assert "KmsMasterKeyId" in props and props["KmsDataKeyReusePeriodSeconds"] == 3600
    for logical in dead_letters:
        assert queues[logical]["Properties"]["KmsDataKeyReusePeriodSeconds"] == 300
