"""The stack: composes one construct per capability."""
from __future__ import annotations

import json

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigw2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk.aws_apigatewayv2_authorizers import HttpLambdaAuthorizer, HttpLambdaResponseType
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from jobsched.api.routes import public_routes
from jobsched.domain.jobs import Priority
from jobsched.domain.lane_shares import format_caps
from jobsched.settings import WORKER_BATCH_SIZE, Env
from jobsched.store.signing import SIGNING_PURPOSE
from jobsched.sizing import TICK_MEMORY_MB, TICK_RESERVED_PER_SEGMENT
from jobsched_infra.alarms import Alarms
from jobsched_infra.compliance import acknowledge_findings
from jobsched_infra.config import StackConfig
from jobsched_infra.dashboard import NAMESPACE, Dashboard
from jobsched_infra.functions import FunctionFactory
from jobsched_infra.front_door import FrontDoor
from jobsched_infra.lanes import Lanes
from jobsched_infra.regions import CLOCK_BOUND_MS, LEASE_MS, RegionPlan, lane_name, table_name
from jobsched_infra.regions import OWNERSHIP_TABLE as OWNERSHIP
from jobsched_infra.regions import api_function_name
from aws_cdk import ArnFormat
from jobsched_infra.storage import Storage
from jobsched_infra.targets import TargetAccess
from jobsched_infra.task_events import TaskEventsRule, failure_destination
from jobsched_infra.tick_schedule import TickSchedule

WORKER_TIMEOUT = Duration.minutes(15)
# Below API Gateway's 29 s integration limit, so that a slow path ends in the function (our error
# shape, counted) rather than in a 504 from API Gateway; the API's AWS calls are bounded inside it
# (store/aws.py: 3 attempts of at most 1 s to connect and 3 s to read).
API_TIMEOUT = Duration.seconds(20)
API_STAGE = "live"
# The authorizer's answers are cached by API Gateway per Authorization header value this long: a
# revoked key keeps working at most this long (docs/reliability.md); a valid key costs one
# authorizer invocation (one GetItem) per this long, per API Gateway's cache.
API_AUTHORIZER_CACHE_SECONDS = 60
# The keyless routes but the callbacks (health, the OpenAPI document, the console): requests a second.
PUBLIC_ROUTE_RATE = 20
AUTHORIZER_TIMEOUT = Duration.seconds(5)

DDB_READ = ["dynamodb:GetItem"]
DDB_BATCH_READ = ["dynamodb:BatchGetItem"]
DDB_QUERY = ["dynamodb:Query"]
DDB_PUT = ["dynamodb:PutItem"]
DDB_BATCH_PUT = ["dynamodb:PutItem", "dynamodb:BatchWriteItem"]
DDB_UPDATE = ["dynamodb:UpdateItem"]
# The segment leases (ownership table): reads, claims and renewals, and nothing else (no delete).
# (store/ownership.py: get_item, put_item, update_item, scan; no Query, no BatchGetItem.)
DDB_OWNERSHIP = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Scan"]
# Which functions may send to another region's lanes: none. Every region dispatches only segments
# it holds, into its own lanes: the API marks a new job with a home whose segment it holds
# (service/handoff.py home_for), the tick hands off held segments, the worker retries through
# timers. (The lanes keep their fixed names, which such a grant would name.)
CROSS_REGION_SENDERS: tuple[str, ...] = ()


def _grant_items(table, fn: lambda_.IFunction, *actions: str, query_indexes: bool = False) -> None:
    """The actions on the table itself. The CDK's table.grant also names the table's /index/* ARNs for
    every action, where only Query (and Scan) mean anything: Query on the indexes is granted only to
    the calls that read one (query_indexes)."""
    fn.add_to_role_policy(iam.PolicyStatement(actions=list(actions), resources=[table.table_arn]))
    if query_indexes:
        fn.add_to_role_policy(iam.PolicyStatement(actions=["dynamodb:Query"],
                                                  resources=[f"{table.table_arn}/index/*"]))



def public_route_throttles(rate: int, burst: int) -> dict:
    """RouteSettings of the HTTP API's stage for the routes that take no key: the callbacks of
    long-running targets (they carry their own tokens) a quarter of the stage's rate and burst; the
    health answer, the OpenAPI document and the console's files 20 a second, a burst of 40."""
    settings = {}
    for method, path in public_routes():
        callback = path.startswith("/v1/executions/")
        settings[f"{method} {path}"] = {
            "ThrottlingRateLimit": max(1, rate // 4) if callback else PUBLIC_ROUTE_RATE,
            "ThrottlingBurstLimit": max(1, burst // 4) if callback else 2 * PUBLIC_ROUTE_RATE}
    return settings

class JobschedStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig, plan: RegionPlan | None = None,
                 primary_key_arn: str | None = None, **kwargs) -> None:
        super().__init__(scope, construct_id, description="jobsched: serverless distributed job scheduler", **kwargs)
        # Regions (jobsched_infra/regions.py): `plan` is None for the single-region stack.
        self.plan = plan
        storage = Storage(self, "Storage", encryption=config.encryption, tables=config.tables, plan=plan,
                          primary_key_arn=primary_key_arn, state_index=config.state_index)
        self.storage = storage
        lanes = Lanes(self, "Lanes", worker_timeout=WORKER_TIMEOUT, key=storage.key,
                      names={p: lane_name(self.region, p) for p in Priority} if plan else None)
        # Every region's stack ticks every global segment (region index x SEGMENTS + local segment);
        # a tick for a segment this region does not hold returns after its lease check.
        tick_segments = config.segments * (len(plan.regions) if plan else 1)

        common_env = {
            Env.JOBS_TABLE: storage.jobs.table_name,
            Env.TIMERS_TABLE: storage.timers.table_name,
            Env.EXECUTIONS_TABLE: storage.executions.table_name,
            Env.SEGMENTS_TABLE: storage.segments.table_name,
            Env.SEGMENTS: str(config.segments),
            Env.EXECUTION_RETENTION_DAYS: str(config.execution_retention_days),
            Env.METRICS_NAMESPACE: NAMESPACE,
            Env.TENANT_FIRES_PER_SECOND: str(config.tenant_fires_per_second),
            **{Env.LANE_URL[p]: q.queue_url for p, q in lanes.queues.items()},
            **(self._region_env(plan) if plan else {}),
        }
        factory = FunctionFactory(self, "Functions", config.layer_dir, common_env, tracing=config.traced)
        # Tenants' signing secrets are encrypted with the stack's key (the API encrypts a new one,
        # the worker decrypts to sign); without a key the table's own encryption keeps them.
        # With regions, the multi-Region key's id: the same in every region, so a secret encrypted in
        # one region decrypts in another with that region's replica.
        signing_env = {Env.SIGNING_KEY_ID: storage.key_id if plan else storage.key.key_id} if storage.key else {}

        api_fn = factory.create("Api", "jobsched.handlers.api.handler", {
            Env.API_KEYS_TABLE: storage.api_keys.table_name,
            Env.SERVICE_NAME: "jobsched-api",
            Env.MAX_ACTIVE_JOBS: str(config.max_active_jobs),
            Env.MAX_CREATES_PER_SECOND: str(config.max_creates_per_second),
            Env.STACK_NAME: self.stack_name,
            Env.JOBS_STATE_INDEX: config.state_index,  # the index GET /v1/jobs?state= reads
            # The API refuses at creation a target IAM would deny whatever its tags (another account).
            Env.TARGET_ACCOUNT: self.account,
            # ... and an address literal the worker's call would refuse (domain/endpoints.py).
            Env.ALLOW_PRIVATE_TARGETS: str(config.allow_private_targets).lower(),
            # Container tasks: the API refuses a job whose task definition or cluster is not granted.
            Env.ECS_TASK_DEFINITIONS: ",".join(config.ecs_task_definitions),
            Env.ECS_CLUSTERS: ",".join(config.ecs_clusters),
            # Container networks: a job outside its tenant's is refused (the worker checks again).
            Env.ECS_NETWORKS: config.ecs_networks.text(),
            **({Env.TARGET_ARN_PATTERNS: ",".join(config.target_arn_patterns)} if config.target_arn_patterns else {}),
            **signing_env,
        }, timeout=API_TIMEOUT, memory_mb=512,
            reserved_concurrent_executions=config.reserved(config.api_reserved_concurrency),
            **({"function_name": api_function_name(self.region)} if plan else {}))
        # The API's Lambda authorizer: tenant keys are checked before the API function (either API type).
        authorizer_fn = factory.create("Authorizer", "jobsched.handlers.authorizer.handler", {
            Env.API_KEYS_TABLE: storage.api_keys.table_name,
            Env.SERVICE_NAME: "jobsched-authorizer",
        }, timeout=AUTHORIZER_TIMEOUT, memory_mb=256,
            reserved_concurrent_executions=config.reserved(config.authorizer_reserved_concurrency))
        tick_fn = factory.create("Tick", "jobsched.handlers.tick.handler", {
            Env.SERVICE_NAME: "jobsched-tick",
        }, timeout=Duration.seconds(60), memory_mb=TICK_MEMORY_MB,
            reserved_concurrent_executions=config.reserved(TICK_RESERVED_PER_SEGMENT * tick_segments))
        worker_fn = factory.create("Worker", "jobsched.handlers.worker.handler", {
            Env.SERVICE_NAME: "jobsched-worker",
            Env.ALLOW_PRIVATE_TARGETS: str(config.allow_private_targets).lower(),
            # Lane shares: the caps the event source mappings below are given, and the percents.
            Env.LANE_CAPS: format_caps(dict(config.lane_max_concurrency)),
            Env.LANE_TENANT_PERCENT: str(config.lane_tenant_percent),
            Env.LANE_HOST_PERCENT: str(config.lane_host_percent),
            Env.ATTEMPT_LOG_PERCENT: str(config.attempt_log_percent),
            Env.ECS_NETWORKS: config.ecs_networks.text(),  # checked again before each RunTask
            # Hand-backs: a record re-sent that failed MAX_RECEIVE_COUNT receives goes to its DLQ.
            **{Env.LANE_DLQ_URL[p]: q.queue_url for p, q in lanes.dead_letters.items()},
            **signing_env,
        }, timeout=WORKER_TIMEOUT, memory_mb=config.worker_memory_mb,
            reserved_concurrent_executions=config.reserved(config.worker_reserved_concurrency))

        # Least privilege: each function gets the actions it calls, on the tables it uses.
        # The API also ends long-running attempts (complete, fail): job reads and completion.
        # BatchWriteItem: the tag and name index entries beside each job (store/jobs.py);
        # BatchGetItem: the jobs those entries name (tag and name filters, filtered bulk actions).
        # Query on the indexes: JobsByState or JobsByStateShard (store/job_lists.py list_in_state), DeadLetters
        # (store/dead_letters.py).
        _grant_items(storage.jobs, api_fn, *DDB_READ, *DDB_BATCH_READ, *DDB_PUT, *DDB_QUERY, *DDB_UPDATE,
                     *DDB_BATCH_PUT, query_indexes=True)
        # A batch create takes back a job whose first timer could not be written (a conditional
        # delete of its first version: service/creation.py); nothing else deletes an item one by one.
        _grant_items(storage.jobs, api_fn, "dynamodb:DeleteItem")
        _grant_items(storage.timers, api_fn, *DDB_BATCH_PUT)
        # PutItem on segments: the dispatch key is made by whichever function needs it first.
        _grant_items(storage.segments, api_fn, *DDB_READ, *DDB_PUT)
        # PutItem: a triggered execution's PENDING record; UpdateItem: a redrive (DEAD → PENDING).
        _grant_items(storage.executions, api_fn, *DDB_READ, *DDB_QUERY, *DDB_PUT, *DDB_UPDATE, query_indexes=True)
        _grant_items(storage.api_keys, api_fn, *DDB_READ)
        if authorizer_fn is not None:
            _grant_items(storage.api_keys, authorizer_fn, *DDB_READ)

        _grant_items(storage.jobs, tick_fn, *DDB_BATCH_READ)
        _grant_items(storage.timers, tick_fn, *DDB_QUERY, *DDB_BATCH_PUT)
        _grant_items(storage.segments, tick_fn, *DDB_READ, *DDB_UPDATE, *DDB_PUT)
        _grant_items(storage.executions, tick_fn, *DDB_PUT)  # misfirePolicy SKIP records SKIPPED occurrences

        # BatchGetItem: a batch's jobs in one read (handlers/worker.py read_jobs), not one per record.
        _grant_items(storage.jobs, worker_fn, *DDB_READ, *DDB_BATCH_READ, *DDB_UPDATE)
        _grant_items(storage.timers, worker_fn, *DDB_BATCH_PUT)
        _grant_items(storage.segments, worker_fn, *DDB_READ, *DDB_PUT)
        # Query: overlapPolicy SKIP looks at the job's newest executions; PutItem: SKIPPED records.
        _grant_items(storage.executions, worker_fn, *DDB_READ, *DDB_UPDATE, *DDB_QUERY, *DDB_PUT)
        # Target calls go through a per-tenant session of the targets role (tagged resources only).
        target_access = TargetAccess(self, "TargetAccess", worker=worker_fn, patterns=config.target_arn_patterns,
                                     task_definitions=config.ecs_task_definitions, clusters=config.ecs_clusters,
                                     task_roles=config.ecs_task_roles, tagged_keys=config.target_keys == "tagged",
                                     key_patterns=config.target_key_arn_patterns)
        worker_fn.add_environment(Env.TARGETS_ROLE_ARN, target_access.role.role_arn)

        # Container tasks: a small function records a task's end from ECS's state-change event,
        # with the worker's writes of an attempt's end (and none of its target calls).
        task_events_fn = factory.create("TaskEvents", "jobsched.handlers.task_events.handler", {
            Env.SERVICE_NAME: "jobsched-task-events",
        }, timeout=Duration.seconds(30), memory_mb=256)
        _grant_items(storage.jobs, task_events_fn, *DDB_READ, *DDB_UPDATE)
        _grant_items(storage.timers, task_events_fn, *DDB_BATCH_PUT)
        _grant_items(storage.segments, task_events_fn, *DDB_READ, *DDB_PUT)
        _grant_items(storage.executions, task_events_fn, *DDB_READ, *DDB_UPDATE, *DDB_PUT)
        if config.ecs_clusters:
            TaskEventsRule(self, "TaskEvents", task_events_fn, config.ecs_clusters)
        # An event the function failed three times (Lambda's asynchronous retries) is kept, alarmed.
        task_events_failed = failure_destination(self, task_events_fn, storage.key)

        for fn in (api_fn, tick_fn, worker_fn, task_events_fn):
            for queue in lanes.queues.values():
                # The lanes' URLs come from the environment: no GetQueueUrl, no GetQueueAttributes
                # (the worker's event source mappings get theirs from the CDK for Lambda's pollers).
                queue.grant(fn, "sqs:SendMessage")
            if storage.key:
                # Named actions only (the CDK's encrypt/decrypt grants use wildcards): data keys for
                # sending to the encrypted lanes (every function here sends to them) and, for the
                # worker, publishing to the encrypted alert topic; decryption for reading messages.
                storage.key.grant(fn, "kms:Decrypt", "kms:GenerateDataKey")  # no call describes the key
        for dlq in lanes.dead_letters.values():
            # Hand-backs (handlers/worker.py): a re-sent record out of receives rests in its DLQ.
            dlq.grant(worker_fn, "sqs:SendMessage")
        if storage.key:
            # A tenant's new signing secret, and nothing else: only under the signing purpose's
            # encryption context (store/signing.py), so the API cannot encrypt other data with it.
            api_fn.add_to_role_policy(iam.PolicyStatement(
                actions=["kms:Encrypt"], resources=[storage.key.key_arn],
                conditions={"StringEquals": {"kms:EncryptionContext:purpose": SIGNING_PURPOSE}}))
        lane_caps = dict(config.lane_max_concurrency)
        lane_pollers = {lane: (low, high) for lane, low, high in config.lane_pollers}
        for priority, queue in lanes.queues.items():
            # Standard mode is capped by MaximumConcurrency (at most 1,000); a lane sized beyond it,
            # or for a burst its ramp of 300 a minute cannot meet, runs in provisioned mode, whose
            # maximum pollers are its cap (the two settings exclude each other).
            pollers = lane_pollers.get(priority.value)
            worker_fn.add_event_source(sources.SqsEventSource(
                queue, batch_size=WORKER_BATCH_SIZE, report_batch_item_failures=True,
                max_batching_window=Duration.seconds(0) if priority is Priority.HIGH else None,
                max_concurrency=None if pollers else lane_caps[priority.value],
                provisioned_poller_config=lambda_.ProvisionedPollerConfig(
                    minimum_pollers=pollers[0], maximum_pollers=pollers[1]) if pollers else None,
            ))

        # A failed or timed-out tick is never retried by Lambda's own asynchronous retries (two by
        # default, which the rule's retry policy does not cover): the next minute's tick catches
        # up from the watermarks, and a retried one would only overlap it.
        tick_fn.configure_async_invoke(retry_attempts=0, max_event_age=Duration.seconds(60))
        TickSchedule(self, "TickSchedule", tick_fn, tick_segments)
        if plan:
            self._grant_regions(plan, storage, lanes, {"api": api_fn, "tick": tick_fn, "worker": worker_fn,
                                                       "task_events": task_events_fn})

        api, api_url = self._api(config, api_fn, authorizer_fn)

        functions = {"api": api_fn, "tick": tick_fn, "worker": worker_fn, "task_events": task_events_fn,
                     **({"authorizer": authorizer_fn} if authorizer_fn is not None else {})}
        tables = {"Jobs": storage.jobs, "Timers": storage.timers, "Executions": storage.executions}
        Dashboard(self, "Dashboard", lanes=lanes.queues, dead_letters=lanes.dead_letters, functions=functions,
                  tables=tables, api=api)
        # The task-events function runs only for container tasks (its rule exists only with
        # `-c ecsClusters`): without them nothing invokes it, and its two alarms ($0.20 a month)
        # would watch nothing.
        containers = bool(config.ecs_clusters)
        alarms = Alarms(self, "Alarms", segments=tick_segments, dead_letters=lanes.dead_letters,
                        functions={k: f for k, f in functions.items() if containers or k != "task_events"},
                        lanes=lanes.queues, key=storage.key,
                        failed_events={"TaskEvents": task_events_failed} if containers else {})
        # Absence alerts: the worker publishes each alert to the deployment's alert topic, and only there.
        worker_fn.add_environment(Env.ALERT_TOPIC_ARN, alarms.alert_topic.topic_arn)
        worker_fn.add_to_role_policy(iam.PolicyStatement(actions=["sns:Publish"],
                                                         resources=[alarms.alert_topic.topic_arn]))
        target_access.deny_own(queues=[*lanes.queues.values(), *lanes.dead_letters.values(), task_events_failed],
                               topics=[alarms.topic, alarms.alert_topic], stack=self,
                               other_queue_arns=self._other_lane_arns(plan) if plan else ())

        CfnOutput(self, "ApiUrl", value=api_url, description="Base URL; routes start with /v1")
        if plan and config.domain_name:
            door = FrontDoor(self, "FrontDoor", config=config, api=api, stage=self._http_stage,
                             stage_path="" if config.api == "http" else API_STAGE)
            CfnOutput(self, "DomainUrl", value=f"https://{config.domain_name}",
                      description="The deployment's one name: latency-routed to the healthy regions' APIs")
            CfnOutput(self, "HealthCheckId", value=door.health_check.attr_health_check_id)
        if plan:
            CfnOutput(self, "Region", value=self.region, description="This stack's region and its place in REGIONS")
            CfnOutput(self, "OwnershipTableName", value=table_name(OWNERSHIP))
        CfnOutput(self, "JobsTableName", value=storage.jobs.table_name)
        CfnOutput(self, "ApiKeysTableName", value=storage.api_keys.table_name)
        acknowledge_findings(self, functions, api, targets_role=target_access.role,
                             table_names={name: table_name(name) for name in ("Jobs", "Executions")}
                             if plan and self.region != plan.data_home else None,
                             container_grants=(config.ecs_task_definitions + config.ecs_task_roles
                                               if config.ecs_task_definitions and config.ecs_clusters else ()),
                             key_grants=config.target_key_arn_patterns)
        CfnOutput(self, "AlarmTopicArn", value=alarms.topic.topic_arn,
                  description="Subscribe to be told when an alarm fires")
        CfnOutput(self, "AlertTopicArn", value=alarms.alert_topic.topic_arn,
                  description="Subscribe to be told when a job's expectation is missed or an occurrence never fired")

    def _region_env(self, plan: RegionPlan) -> dict[str, str]:
        """What every function of a multi-region stack is told (functions/jobsched/settings.py)."""
        return {
            Env.REGIONS: ",".join(plan.regions),
            Env.THIS_REGION: self.region,
            Env.OWNERSHIP_TABLE: table_name(OWNERSHIP),
            Env.OWNERSHIP_REGIONS: ",".join(plan.ownership_endpoints(self.region)),
            Env.REGION_API_FUNCTION: api_function_name("{region}"),
            Env.LEASE_MS: str(LEASE_MS),
            Env.CLOCK_BOUND_MS: str(CLOCK_BOUND_MS),
        }

    def _other_lane_arns(self, plan: RegionPlan) -> list[str]:
        """The other regions' lanes, by their fixed names (regions.lane_name): exact ARNs, no wildcard."""
        return [self.format_arn(service="sqs", region=region, resource=lane_name(region, priority))
                for region in plan.regions if region != self.region for priority in Priority]

    def _grant_regions(self, plan: RegionPlan, storage: Storage, lanes: Lanes, functions: dict) -> None:
        # The leases: in each of OWNERSHIP_REGIONS (this region's replica or the nearest, then the
        # other: failover), by ARN.
        # The tick claims and renews; the API, the worker and the task events function check the
        # owner (and its epoch) of the segment they write timers and dispatches for.
        for fn in functions.values():
            fn.add_to_role_policy(iam.PolicyStatement(actions=DDB_OWNERSHIP, resources=storage.ownership_arns))
        # The API forwards a change it does not schedule to the holder region's API function.
        functions["api"].add_to_role_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[
            self.format_arn(service="lambda", region=r, resource="function", resource_name=api_function_name(r),
                            arn_format=ArnFormat.COLON_RESOURCE_NAME) for r in plan.regions if r != self.region]))
        others = self._other_lane_arns(plan)
        for name in CROSS_REGION_SENDERS:
            fn = functions[name]
            fn.add_to_role_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=others))
            if storage.key is not None:
                # The other lanes are encrypted with the multi-Region key's replica in their region:
                # a producer needs data keys from it (SQS SSE). Named key ARNs, the same key id.
                fn.add_to_role_policy(iam.PolicyStatement(
                    actions=["kms:GenerateDataKey", "kms:Decrypt"],
                    resources=[storage.key_arn_in(r) for r in plan.regions if r != self.region]))

    def _api(self, config: StackConfig, api_fn, authorizer_fn=None) -> tuple:
        """Every path to the function, through the keys' Lambda authorizer on either API type (the
        function checks callback tokens) and validates bodies itself. `-c api=http` (default): API Gateway's HTTP
        API, $1.00 a million requests; `-c api=rest`: the REST API, $3.50, which adds X-Ray on the
        API hop, a WAF web ACL to attach and execution logs (docs/architecture.md, "The API type")."""
        self._http_stage = None
        if config.api == "http":
            # Under /aws/vendedlogs/: API Gateway adds a log group it delivers to into the account's
            # one CloudWatch Logs resource policy (5,120 characters) unless the group is named so.
            # Named, it goes with the stack (a retained one would block the name's next deployment).
            access_logs = logs.LogGroup(self, "ApiAccessLogs", retention=logs.RetentionDays.ONE_MONTH,
                                        log_group_name=f"/aws/vendedlogs/apigateway/{Stack.of(self).stack_name}-access",
                                        removal_policy=RemovalPolicy.DESTROY)
            # Payload 1.0: the same proxy event as the REST API's, so one handler serves both. The
            # $default stage: paths reach the function without a stage prefix.
            integration = HttpLambdaIntegration("Function", api_fn,
                                                payload_format_version=apigw2.PayloadFormatVersion.VERSION_1_0)
            # Tenant keys are checked by the authorizer before the API function (docs/architecture.md,
            # "The API's authorizer"): the $default route, which serves every path not listed below,
            # needs it; the routes that take no key (health, the OpenAPI document, the callbacks of
            # long-running targets with their own tokens, the console's files) go to the function directly.
            authorizer = HttpLambdaAuthorizer(
                "ApiKeys", authorizer_fn, authorizer_name="api-keys",
                response_types=[HttpLambdaResponseType.SIMPLE],
                identity_source=["$request.header.Authorization"],
                results_cache_ttl=Duration.seconds(API_AUTHORIZER_CACHE_SECONDS))
            api = apigw2.HttpApi(self, "HttpApi", description="jobsched HTTP API v1", create_default_stage=False,
                                 default_integration=integration, default_authorizer=authorizer)
            for method, path in public_routes():
                api.add_routes(path=path, methods=[apigw2.HttpMethod(method)], integration=integration,
                               authorizer=apigw2.HttpNoneAuthorizer())
            stage = self._http_stage = apigw2.HttpStage(self, "HttpStage", http_api=api, stage_name="$default", auto_deploy=True,
                                     throttle=apigw2.ThrottleSettings(rate_limit=config.api_rate_limit,
                                                                      burst_limit=config.api_burst_limit))
            # Never request or response bodies: they carry API keys and payloads.
            cfn_stage = stage.node.default_child
            # The routes without a key reach the API function unchecked: each gets a throttle of its
            # own, below the stage's, so a flood of them takes a bounded share of the function's
            # reserved concurrency (docs/architecture.md, "The API's authorizer").
            cfn_stage.route_settings = public_route_throttles(config.api_rate_limit, config.api_burst_limit)
            cfn_stage.access_log_settings = apigw2.CfnStage.AccessLogSettingsProperty(
                destination_arn=access_logs.log_group_arn,
                format=json.dumps({"requestId": "$context.requestId", "ip": "$context.identity.sourceIp",
                                   "requestTime": "$context.requestTime", "httpMethod": "$context.httpMethod",
                                   "path": "$context.path", "status": "$context.status",
                                   "protocol": "$context.protocol", "responseLength": "$context.responseLength",
                                   "integrationLatency": "$context.integrationLatency",
                                   # An HTTP API has no execution log: why API Gateway itself answered 5xx.
                                   "integrationError": "$context.integrationErrorMessage",
                                   "error": "$context.error.message",
                                   "integrationStatus": "$context.integration.integrationStatus"}))
            return api, stage.url
        access_logs = logs.LogGroup(self, "ApiAccessLogs", retention=logs.RetentionDays.ONE_MONTH)
        api = apigw.LambdaRestApi(
            self,
            "Api",
            handler=api_fn,
            proxy=False,
            description="jobsched HTTP API v1",
            deploy_options=apigw.StageOptions(
                stage_name=API_STAGE,
                throttling_rate_limit=config.api_rate_limit,
                throttling_burst_limit=config.api_burst_limit,
                tracing_enabled=config.traced,
                metrics_enabled=True,
                # Errors only, and never request or response bodies: they carry API keys and payloads.
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False, http_method=True, ip=True, protocol=True, request_time=True,
                    resource_path=True, response_length=True, status=True, user=False),
            ),
        )
        # Every path goes to the function (/ and /{proxy+}); API Gateway validates request
        # parameters, the function validates bodies and answers in the API's own error shape.
        validator = api.add_request_validator("Parameters", validate_request_parameters=True)
        integration = apigw.LambdaIntegration(api_fn)
        # The same key check as the HTTP API's, before the function: a REQUEST authorizer (the REST
        # API's takes an IAM policy as the answer: handlers/authorizer.py), cached per header value.
        authorizer = apigw.RequestAuthorizer(
            self, "ApiKeysRest", handler=authorizer_fn, authorizer_name="api-keys",
            identity_sources=[apigw.IdentitySource.header("Authorization")],
            results_cache_ttl=Duration.seconds(API_AUTHORIZER_CACHE_SECONDS))
        _rest_routes(api, integration, validator, authorizer)
        # The execution log group API Gateway would create without a retention.
        logs.LogGroup(self, "ApiExecutionLogs", retention=logs.RetentionDays.ONE_MONTH,
                      log_group_name=f"API-Gateway-Execution-Logs_{api.rest_api_id}/{API_STAGE}")
        # No usage plan: it applies only to requests made with API Gateway API keys, which this API
        # does not use (tenants send their own keys, checked by the authorizer). The stage throttle
        # above and the per-tenant quotas bound the load.
        return api, api.url


def _rest_routes(api, integration, validator, authorizer) -> None:
    """The REST API's methods: every path through the keys' authorizer (ANY on / and on a greedy
    {proxy+}), except the routes that take no key (api/routes.py public_routes), which get their
    own resources and methods without it. A resource made for them also passes every other method
    and every deeper path (its own {proxy+}, where no path variable is its child) through the
    authorizer, so that no path reaches the function without it: API Gateway takes the most
    specific resource, and a method's own verb before ANY."""
    keyed = {"authorizer": authorizer, "authorization_type": apigw.AuthorizationType.CUSTOM,
             "request_validator": validator}
    api.root.add_method("ANY", integration, **keyed)
    api.root.add_resource("{proxy+}").add_method("ANY", integration, **keyed)
    made: dict[str, apigw.IResource] = {"": api.root}
    public = public_routes()
    for method, path in public:
        resource, prefix = api.root, ""
        for part in path.strip("/").split("/"):
            prefix += "/" + part
            if prefix not in made:
                made[prefix] = resource = resource.add_resource(part)
                resource.add_method("ANY", integration, **keyed)
                variable_child = any(p.startswith(prefix + "/{") for _, p in public)
                if not variable_child:
                    resource.add_resource("{proxy+}").add_method("ANY", integration, **keyed)
            resource = made[prefix]
        resource.add_method(method, integration, authorization_type=apigw.AuthorizationType.NONE,
                            request_validator=validator)
