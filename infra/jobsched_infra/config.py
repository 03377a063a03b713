"""Deployment knobs come from CDK context (cdk.json or `-c key=value`), parsed once here.

cdk.json gives a list or an object as itself; the CDK CLI hands `-c key=value` over as a string.
A list-valued key takes both string forms, `-c key='["a","b"]'` (JSON) and `-c key=a,b`, and an
object-valued key its JSON form (context_value), so that the documented commands work as typed."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from jobsched.domain.task_networks import MAX_POLICY_CHARS, NetworkPolicyError, TaskNetworks
from jobsched.sizing import (MAX_SEGMENTS, PROFILES, QUIET_WORKER_MEMORY_MB, WORKER_MEMORY_MB, Sizing, TableSizing,
                             profile_sizing)
from jobsched_infra.errors import ConfigError  # the config's error (functions, storage, ... take it from here)
from jobsched_infra.regions import parse_regions

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LAYER_DIR = ROOT / ".build" / "layer"


@dataclass(frozen=True)
class StackConfig:
    segments: int = 4
    layer_dir: Path = DEFAULT_LAYER_DIR
    # Lets HTTP targets reach loopback and private addresses (the local stack's echo endpoint).
    allow_private_targets: bool = False
    api_rate_limit: int = 1000
    api_burst_limit: int = 2000
    # Which AWS resources jobs may target (SQS, SNS, EventBridge, Lambda). Default: any of
    # those in the deploying account; list ARN patterns to narrow it or to allow other accounts.
    target_arn_patterns: tuple[str, ...] = ()
    # SSE-KMS targets (targets.py, grant_target_keys): "tagged" lets a tenant's session use a KMS key
    # tagged jobsched:tenant=<tenant> through SQS and SNS; "none" grants no key. Keys matching
    # target_key_arn_patterns are usable by every tenant (through SQS and SNS only).
    target_keys: str = "tagged"
    target_key_arn_patterns: tuple[str, ...] = ()
    # "kms" (the default): tables, queues and topics under one customer-managed key (rotated
    # yearly), signing secrets sealed with it: the key's own policy, CloudTrail of each use, and
    # deleting the key makes every copy of the data unreadable (crypto-shredding).
    # "aws-owned", for a NEW deployment only: the tables under DynamoDB's AWS-owned key, the queues
    # under SQS's own keys (SSE-SQS), signing secrets kept as the table keeps everything; no KMS key,
    # no KMS request (about $2.95 of a quiet deployment's month: docs/performance.md). A stack
    # deployed with the key keeps it: its tenants' signing secrets are sealed with it (a stack that
    # dropped it could open none of them: their signed calls would stop).
    encryption: str = "kms"
    # Per-tenant quotas, enforced by the API function (answers 429).
    max_active_jobs: int = 100_000
    max_creates_per_second: int = 50
    # Concurrency isolation: the API keeps this many executions to itself (0: none reserved), the
    # tick two per segment (a run and its overlapping successor), and each lane's event source
    # mapping is capped so that a worker surge cannot starve the API or the tick, and HIGH keeps
    # the largest share of the worker pool under contention.
    api_reserved_concurrency: int = 50
    # `-c reservedConcurrency=off`: no function reserves concurrency (the API, the tick, the
    # authorizer and a profile's worker share the account's pool), for an account whose Lambda
    # limit cannot hold the reservations and keep 100 unreserved (concurrency_check.py).
    reserved_concurrency: bool = True
    # The API's Lambda authorizer (HTTP API): its own executions, so that a flood of bad keys is
    # answered without the API's and is capped (0: unreserved). One warm authorizer answers about
    # a hundred uncached keys a second (one GetItem each); cached keys never reach it.
    authorizer_reserved_concurrency: int = 10
    # How long an ended execution stays readable (DynamoDB TTL from its end), in days.
    execution_retention_days: int = 30
    lane_max_concurrency: tuple[tuple[str, int], ...] = (("HIGH", 400), ("NORMAL", 200), ("LOW", 100))
    # The worker's memory (MB): 256 by default, a quiet deployment's (its invocations mostly wait,
    # billed by the memory); a profile's 512, which its lanes are sized with (jobsched/sizing.py).
    # `-c workerMemoryMb=` sets it (128-10,240).
    worker_memory_mb: int = QUIET_WORKER_MEMORY_MB
    # Tenant fairness (functions/jobsched/service/fairness.py): per tenant, FIRE dispatches that
    # may enter the lanes in one second across the segments; a herd beyond it is spread in time.
    # Off by default (0): a static share also caps a deployment whose jobs are all one tenant's,
    # below the rate it is sized for. A multi-tenant deployment sets it to about half the NORMAL
    # lane's drain rate (1,000 at the default cap: 200 invocations of 10 messages, calls of about
    # a second), which keeps another tenant's jobs on time beside a herd (bench fairness).
    tenant_fires_per_second: int = 0
    # Lane shares (functions/jobsched/service/lane_shares.py): the percent of each lane's maximum
    # concurrency that may hold attempts of one tenant, and of one HTTP target host, so that a
    # slow or hung partner stalls only its own jobs (0: no bound). Half by default: one slow tenant
    # leaves the other half of the lane to everyone else, and a deployment whose jobs are all one
    # tenant's still has half its lane (100 removes the bound for such a deployment).
    lane_tenant_percent: int = 50
    lane_host_percent: int = 50
    # Percent of succeeded, on-time attempts that get the worker's "attempt" log line (failures,
    # retries, any other outcome and any attempt over a second late are always logged; the
    # execution record keeps every attempt). 1 by default: a line per success was about $0.29 of a
    # million recurring executions' cost (docs/performance.md); 100 logs every attempt.
    attempt_log_percent: int = 1
    # "http": API Gateway's HTTP API ($1.00 a million requests); either type checks tenant keys
    # with the same Lambda authorizer before the function (stack.py);
    # "rest": the REST API ($3.50), for X-Ray on the API hop, a WAF web ACL or request validators.
    api: str = "http"
    # The Jobs index GET /v1/jobs?state= reads (functions/jobsched/store/jobs_state_index.py):
    # "JobsByStateShard" (the default since the release after the one that added it: the table
    # has that index alone; jobs a release before it wrote are listed from the tenant's own key
    # until `jobsched upgrade state-shards` is done), or "JobsByState" (the table keeps the old
    # index too and lists through it). CloudFormation adds or deletes one index of a table per
    # update: a deployment of a release before JobsByStateShard first deploys this release with
    # `-c stateIndex=JobsByState` (adds it), then the default (deletes the old one).
    state_index: str = "JobsByStateShard"
    # Lambda's active tracing on every function ("active", or "on") or none ("off", the default:
    # Lambda's PassThrough, which traces only a request whose caller sent a sampled trace header,
    # and nothing upstream of these functions sends one). Lambda samples a fixed 1 request a second
    # and 5 % of the rest per function, and that rate cannot be configured for Lambda's active
    # tracing, so it traces nearly every invocation of a quiet deployment ($5 a million traces:
    # about $14 of a quiet deployment's month, $0.28 of a million one-time jobs at 10,000 a second;
    # docs/performance.md). "off" gives up the X-Ray traces and service map of the functions;
    # logs, metrics and the targets' traceparent are unchanged.
    tracing: str = "off"
    # The sizing profile this configuration came from (`-c profile=1k|10k|herd1m`, computed by
    # jobsched/sizing.py; "default": the settings above). A profile also sets what follows.
    profile: str = "default"
    # Lanes whose event source mapping runs in provisioned mode: (lane, minimum, maximum pollers).
    # Such a lane has no MaximumConcurrency (the two exclude each other); its cap in
    # lane_max_concurrency is its pollers' invocations, which the lane shares count from.
    lane_pollers: tuple[tuple[str, int, int], ...] = ()
    # The worker's reserved concurrency (0: none): a profile reserves the sum of the lanes' caps, so
    # that no other function of the account takes what the lanes were sized to run.
    worker_reserved_concurrency: int = 0
    # Per table: warm throughput (on demand) or provisioned capacity with auto scaling.
    tables: tuple[TableSizing, ...] = ()
    # Container tasks (ECS_TASK): nothing runs until an operator grants it. RunTask is allowed only
    # on task definitions matching these ARN patterns (each also tagged jobsched:tenant with the
    # tenant that may run it), only in these clusters (ARN patterns), and iam:PassRole only for
    # these task and execution roles (ARNs or patterns), to ecs-tasks.amazonaws.com only.
    ecs_task_definitions: tuple[str, ...] = ()
    ecs_clusters: tuple[str, ...] = ()
    ecs_task_roles: tuple[str, ...] = ()
    # Container networks (functions/jobsched/domain/task_networks.py): per tenant (or "*" for every
    # tenant not named), the subnets and security groups its tasks may join and whether they may
    # have a public IP. None named: no tenant may run a container task (ECS would otherwise take
    # the job's own choice, and with no security group the VPC's default one).
    ecs_networks: TaskNetworks = TaskNetworks()
    # Regions (issue 25; jobsched_infra/regions.py): `-c regions=a,b,...` (2..9, in a fixed order)
    # makes one stack per region; empty or one region: the single-region stack, as before.
    regions: tuple[str, ...] = ()
    # The segment-lease table's three regions (MRSC, one Region set); empty: three of `regions`.
    ownership_regions: tuple[str, ...] = ()
    # The front door (optional, all three or none): one name, latency-routed to the regions' APIs
    # with a Route 53 health check each; the hosted zone; per region, its ACM certificate's ARN.
    domain_name: str = ""
    hosted_zone_id: str = ""
    certificate_arns: tuple[tuple[str, str], ...] = ()

    def reserved(self, executions: int) -> int | None:
        """A function's reserved concurrency as deployed (None: none, with reservedConcurrency=off or 0)."""
        return executions if self.reserved_concurrency and executions else None

    @property
    def traced(self) -> bool:
        """Lambda's active tracing on the functions (and X-Ray on a REST API's stage)."""
        return self.tracing in ("active", "on")

    @classmethod
    def from_sizing(cls, name: str, sizing: Sizing) -> "StackConfig":
        """The settings the model gives for a profile (the rest as in the default)."""
        return cls(
            profile=name,
            segments=sizing.segments,
            lane_max_concurrency=tuple((lane.lane, lane.max_concurrency) for lane in sizing.lanes),
            lane_pollers=tuple((lane.lane, lane.min_pollers, lane.max_pollers)
                               for lane in sizing.lanes if lane.mode == "provisioned"),
            worker_reserved_concurrency=sizing.worker_reserved_concurrency,
            api_reserved_concurrency=sizing.api_reserved_concurrency,
            api_rate_limit=sizing.api_rate_limit,
            api_burst_limit=sizing.api_burst_limit,
            lane_tenant_percent=sizing.lane_tenant_percent,
            worker_memory_mb=WORKER_MEMORY_MB,
            tables=sizing.tables,
        )

    @classmethod
    def from_context(cls, node) -> "StackConfig":
        def get(key, default):
            value = node.try_get_context(key)
            return default if value is None else context_value(value, key)

        profile = get("profile", "default")
        if profile == "default":
            base = cls()
        elif profile in PROFILES:
            base = cls.from_sizing(profile, profile_sizing(profile))
        else:
            raise ConfigError(f"context 'profile' must be one of default, {', '.join(PROFILES)}")
        # Explicit keys override the profile's values.
        try:
            segments = int(get("segments", base.segments))
        except (TypeError, ValueError):
            raise ConfigError("context 'segments' must be an integer") from None
        if not 1 <= segments <= MAX_SEGMENTS:
            raise ConfigError(f"context 'segments' must be 1..{MAX_SEGMENTS} (one EventBridge rule each)")
        explicit_caps = get("laneMaxConcurrency", {})
        if not isinstance(explicit_caps, dict):
            raise ConfigError("context 'laneMaxConcurrency' must be an object such as {\"HIGH\": 400}")
        unknown = sorted(set(explicit_caps) - {lane for lane, _ in base.lane_max_concurrency})
        if unknown:
            raise ConfigError(f"context 'laneMaxConcurrency.{unknown[0]}': lanes are HIGH, NORMAL and LOW")
        # An explicit cap is a MaximumConcurrency (2..1,000); a profile's provisioned lane's cap is
        # its pollers' invocations.
        caps = tuple((lane, _int_in(explicit_caps[lane], 2, 1000, f"laneMaxConcurrency.{lane}")
                      if lane in explicit_caps else value)
                     for lane, value in {**dict(base.lane_max_concurrency), **explicit_caps}.items())
        # A lane given an explicit cap runs in standard mode with it as its MaximumConcurrency.
        pollers = tuple(p for p in base.lane_pollers if p[0] not in explicit_caps)
        reserved = base.worker_reserved_concurrency and sum(cap for _, cap in caps)
        return cls(
            profile=profile,
            segments=segments,
            layer_dir=Path(get("layerDir", os.environ.get("JOBSCHED_LAYER_DIR", str(DEFAULT_LAYER_DIR)))),
            allow_private_targets=str(get("allowPrivateTargets", "false")).lower() == "true",
            api_rate_limit=base.api_rate_limit,
            api_burst_limit=base.api_burst_limit,
            target_arn_patterns=_string_list(get("targetArnPatterns", []), "targetArnPatterns"),
            target_keys=_choice(get("targetKeys", "tagged"), ("tagged", "none"), "targetKeys"),
            target_key_arn_patterns=_arn_list(get("targetKeyArnPatterns", []), "targetKeyArnPatterns", ":key/"),
            encryption=_choice(get("encryption", "kms"), ("kms", "aws-owned"), "encryption"),
            max_active_jobs=int(get("maxActiveJobsPerTenant", 100_000)),
            max_creates_per_second=int(get("maxCreatesPerSecondPerTenant", 50)),
            api_reserved_concurrency=_int_in(get("apiReservedConcurrency", base.api_reserved_concurrency), 0, 1000,
                                             "apiReservedConcurrency"),
            reserved_concurrency=_choice(get("reservedConcurrency", "on"), ("on", "off"), "reservedConcurrency") == "on",
            authorizer_reserved_concurrency=_int_in(get("authorizerReservedConcurrency",
                                                        base.authorizer_reserved_concurrency), 0, 1000,
                                                    "authorizerReservedConcurrency"),
            execution_retention_days=_int_in(get("executionRetentionDays", 30), 1, 3650, "executionRetentionDays"),
            tenant_fires_per_second=_int_in(get("tenantFiresPerSecond", 0), 0, 1_000_000, "tenantFiresPerSecond"),
            lane_tenant_percent=_int_in(get("laneTenantPercent", base.lane_tenant_percent), 0, 100,
                                        "laneTenantPercent"),
            lane_host_percent=_int_in(get("laneHostPercent", 50), 0, 100, "laneHostPercent"),
            attempt_log_percent=_int_in(get("attemptLogPercent", base.attempt_log_percent), 0, 100,
                                        "attemptLogPercent"),
            api=_choice(get("api", "http"), ("http", "rest"), "api"),
            state_index=_choice(get("stateIndex", "JobsByStateShard"), ("JobsByStateShard", "JobsByState"), "stateIndex"),
            tracing=_choice(get("tracing", "off"), ("active", "on", "off"), "tracing"),
            lane_max_concurrency=caps,
            lane_pollers=pollers,
            worker_memory_mb=_int_in(get("workerMemoryMb", base.worker_memory_mb), 128, 10_240, "workerMemoryMb"),
            worker_reserved_concurrency=_int_in(get("workerReservedConcurrency", reserved), 0, 1_000_000,
                                                "workerReservedConcurrency"),
            tables=base.tables,
            ecs_task_definitions=_arn_list(get("ecsTaskDefinitions", []), "ecsTaskDefinitions", ":task-definition/"),
            ecs_clusters=_arn_list(get("ecsClusters", []), "ecsClusters", ":cluster/"),
            ecs_task_roles=_arn_list(get("ecsTaskRoles", []), "ecsTaskRoles", ":role/"),
            ecs_networks=_networks(get("ecsNetworks", {})),
            **_regions(get),
        )


def _regions(get) -> dict:
    regions = parse_regions(get("regions", ""))
    ownership = parse_regions(get("ownershipRegions", ""))
    domain, zone, certificates = get("domainName", ""), get("hostedZoneId", ""), get("certificateArns", "")
    if (domain or zone or certificates) and not (domain and zone and certificates):
        raise ConfigError("contexts 'domainName', 'hostedZoneId' and 'certificateArns' go together (or none)")
    if isinstance(certificates, str):
        pairs = [item.split("=", 1) for item in certificates.split(",") if item]
        if not all(len(pair) == 2 for pair in pairs):
            raise ConfigError("context 'certificateArns' must be region=arn pairs, comma-separated")
        certificates = dict(pairs)
    if not isinstance(certificates, dict):
        raise ConfigError("context 'certificateArns' must map each region to its ACM certificate ARN")
    if domain:
        wanted = regions or (os.environ.get("CDK_DEFAULT_REGION", ""),)
        missing = [r for r in wanted if r not in certificates]
        if len(regions) <= 1 or missing:
            raise ConfigError("context 'domainName' needs context 'regions' (2..9) and a certificate in "
                              f"'certificateArns' for every region (missing: {', '.join(missing) or '-'})")
        for region, arn in certificates.items():
            if not (isinstance(arn, str) and arn.startswith("arn:") and f":acm:{region}:" in arn):
                raise ConfigError(f"context 'certificateArns.{region}' must be an ACM certificate ARN in {region}")
    return {"regions": regions, "ownership_regions": ownership, "domain_name": domain, "hosted_zone_id": zone,
            "certificate_arns": tuple(sorted(certificates.items())) if domain else ()}


def context_value(value, key: str):
    """A context value as cdk.json would give it: a string that holds a JSON array or object (the
    CDK CLI's `-c key='["a"]'`) is read as that array or object."""
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            raise ConfigError(f"context '{key}' is not valid JSON: {value[:80]}") from None
    return value


def _string_list(value, key: str) -> tuple[str, ...]:
    """A list of strings: a JSON array, or a comma-separated string from `-c key=a,b`."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise ConfigError(f"context '{key}' must be a list of strings (a JSON array or a,b,c)")
    return tuple(i.strip() for i in items if i.strip())


def _arn_list(value, key: str, kind: str) -> tuple[str, ...]:
    """A list of ARN patterns of one kind (a comma-separated string from `-c key=a,b` too)."""
    items = _string_list(value, key)
    if not all(i.startswith("arn:") and kind in i for i in items):
        raise ConfigError(f"context '{key}' must be a list of ARNs (patterns) containing '{kind}'")
    return items


def _networks(value) -> TaskNetworks:
    """`-c ecsNetworks='{"tenant-a": {"subnets": [...], "securityGroups": [...]}}'` (the CLI passes a
    string: JSON text is taken) or the same object in cdk.json."""
    try:
        networks = TaskNetworks.parse(value)
    except NetworkPolicyError as exc:
        raise ConfigError(f"context 'ecsNetworks': {exc}") from None
    if len(networks.text()) > MAX_POLICY_CHARS:
        raise ConfigError(f"context 'ecsNetworks' is {len(networks.text())} characters as the functions' environment "
                          f"carries it, over {MAX_POLICY_CHARS} (Lambda allows 4 KB for all of a function's "
                          "variables): give tenants that share networks the \"*\" entry")
    return networks


def _choice(value, allowed: tuple[str, ...], key: str) -> str:
    if value not in allowed:
        raise ConfigError(f"context '{key}' must be one of {', '.join(allowed)}")
    return value


def _int_in(value, low: int, high: int, key: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"context '{key}' must be an integer") from None
    if not low <= number <= high:
        raise ConfigError(f"context '{key}' must be {low}..{high}")
    return number
