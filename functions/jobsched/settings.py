"""Function settings: parsed once from the environment into a typed model.

The CDK stack imports `Env` to name the variables it sets, so the names live here only."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from jobsched.domain.jobs import Priority
from jobsched.domain.lane_shares import parse_caps
from jobsched.domain.task_networks import NetworkPolicyError, TaskNetworks

# Records per worker invocation (the lanes' event source mappings); the worker runs them all at
# once, a thread each, so every attempt's timeout fits one invocation.
WORKER_BATCH_SIZE = 10
# A record that failed the worker this many receives rests in its lane's dead-letter queue: SQS's
# redrive policy (infra lanes.py) for receives of one message, the worker for a record handed back
# as new messages (handlers/worker.py: Dispatch.receives carries the earlier messages' receives).
MAX_RECEIVE_COUNT = 5


class Env:
    JOBS_TABLE = "JOBS_TABLE"
    TIMERS_TABLE = "TIMERS_TABLE"
    EXECUTIONS_TABLE = "EXECUTIONS_TABLE"
    SEGMENTS_TABLE = "SEGMENTS_TABLE"
    API_KEYS_TABLE = "API_KEYS_TABLE"
    LANE_URL = {
        Priority.HIGH: "LANE_HIGH_URL",
        Priority.NORMAL: "LANE_NORMAL_URL",
        Priority.LOW: "LANE_LOW_URL",
    }
    # The lanes' dead-letter queues (worker only): a record handed back as a new message that
    # failed MAX_RECEIVE_COUNT receives is sent there by the worker itself.
    LANE_DLQ_URL = {
        Priority.HIGH: "LANE_HIGH_DLQ_URL",
        Priority.NORMAL: "LANE_NORMAL_DLQ_URL",
        Priority.LOW: "LANE_LOW_DLQ_URL",
    }
    SEGMENTS = "SEGMENTS"
    ALLOW_PRIVATE_TARGETS = "ALLOW_PRIVATE_TARGETS"
    MAX_ACTIVE_JOBS = "MAX_ACTIVE_JOBS_PER_TENANT"
    MAX_CREATES_PER_SECOND = "MAX_CREATES_PER_SECOND_PER_TENANT"
    STACK_NAME = "STACK_NAME"
    EXECUTION_RETENTION_DAYS = "EXECUTION_RETENTION_DAYS"
    SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
    METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
    # The KMS key that encrypts tenants' signing secrets (absent when the stack's encryption is
    # aws-owned: the secrets are then kept as the table keeps everything).
    SIGNING_KEY_ID = "SIGNING_KEY_ID"
    # Per tenant, FIRE dispatches that may become visible in one second (service/fairness.py).
    TENANT_FIRES_PER_SECOND = "TENANT_FIRES_PER_SECOND"
    # host:port pairs of the stack's own HTTP endpoints, never a target (set by the local stack
    # for its API and its emulator; absent in AWS, where IAM keeps the stack's resources apart).
    OWN_ENDPOINTS = "OWN_ENDPOINTS"
    # Lane shares (service/lane_shares.py): each lane's maximum concurrency ("HIGH=400,..."), and
    # the percent of it that one tenant, and one HTTP target host, may hold (0: no bound). Optional:
    # without them the worker bounds nothing (the stack always sets them: tests/infra).
    LANE_CAPS = "LANE_CAPS"
    LANE_TENANT_PERCENT = "LANE_TENANT_PERCENT"
    LANE_HOST_PERCENT = "LANE_HOST_PERCENT"
    # Percent of succeeded attempts the worker writes its "attempt" log line for (every other
    # outcome, and every attempt more than a second late, is always logged); 100 when unset.
    ATTEMPT_LOG_PERCENT = "ATTEMPT_LOG_PERCENT"
    # The role the worker assumes per tenant, with the tenant's session tag, to call AWS targets
    # (infra/jobsched_infra/targets.py); a target is reachable only when tagged with the tenant.
    TARGETS_ROLE_ARN = "TARGETS_ROLE_ARN"
    # The deploying account (its tagged resources are the default grant) and the deployment's
    # targetArnPatterns (comma-separated): the API refuses a target IAM would deny whatever its tags.
    TARGET_ACCOUNT = "TARGET_ACCOUNT"
    TARGET_ARN_PATTERNS = "TARGET_ARN_PATTERNS"
    # Absence alerts: the deployment's SNS topic the worker publishes each alert to (optional: without
    # it the hook and the metric still go out; the stack always sets it, tests/infra holds that).
    ALERT_TOPIC_ARN = "ALERT_TOPIC_ARN"
    # Container tasks (ECS_TASK): the task definition ARN patterns and the clusters the deployment
    # grants (comma-separated; empty: none). The API refuses a job outside them (IAM would deny its
    # RunTask); absent (tests of other parts): no check.
    ECS_TASK_DEFINITIONS = "ECS_TASK_DEFINITIONS"
    ECS_CLUSTERS = "ECS_CLUSTERS"
    # Container networks (domain/task_networks.py): per tenant (or "*" for every other tenant), the
    # subnets and security groups its tasks may join and whether they may have a public IP, as
    # compact JSON. The API refuses a job outside them; the worker checks again before RunTask.
    # Empty ("{}"): no tenant may run a container task; absent (tests of other parts): no check.
    ECS_NETWORKS = "ECS_NETWORKS"
    # Where a container task's logs are linked (`{taskId}` replaced); absent: the ECS console.
    TASK_LOGS_URL = "TASK_LOGS_URL"
    # Regions (issue 25, domain/ownership.py). REGIONS: the deployment's regions in a fixed order
    # (a region's place is its number in job ids and segment numbers); absent or one region: the
    # single-region scheduler, no leases. THIS_REGION: the function's own region (one of REGIONS).
    # OWNERSHIP_TABLE: the segment leases, a strongly consistent (MRSC) global table, called in
    # OWNERSHIP_REGIONS (comma-separated, every replica region: this region's own first when it holds
    # one, then the nearest; store/ownership.py fails over to the next on a connection or region-level
    # error).
    # LEASE_MS: how long a renewal holds a segment; CLOCK_BOUND_MS: the stated bound on the
    # difference between two regions' clocks.
    REGIONS = "REGIONS"
    THIS_REGION = "THIS_REGION"
    OWNERSHIP_TABLE = "OWNERSHIP_TABLE"
    OWNERSHIP_REGIONS = "OWNERSHIP_REGIONS"
    # The API function of each region, `{region}` replaced by its name (API: the changes it forwards
    # to the region that schedules them, store/region_apis.py). Absent: nothing is forwarded (503).
    REGION_API_FUNCTION = "REGION_API_FUNCTION"
    LEASE_MS = "LEASE_MS"
    # The Jobs index GET /v1/jobs?state= reads (API; optional, JobsByStateShard when absent; JobsByState
    # where the table keeps the old index: store/jobs_state_index.py).
    JOBS_STATE_INDEX = "JOBS_STATE_INDEX"
    CLOCK_BOUND_MS = "CLOCK_BOUND_MS"


# Which settings each function reads; the infrastructure test holds the template to this.
FUNCTION_ENV = {
    # The API's Lambda authorizer (handlers/authorizer.py): keys only.
    "authorizer": [Env.API_KEYS_TABLE, Env.SEGMENTS],
    "api": [Env.JOBS_TABLE, Env.TIMERS_TABLE, Env.EXECUTIONS_TABLE, Env.SEGMENTS_TABLE,
            Env.API_KEYS_TABLE, *Env.LANE_URL.values(), Env.SEGMENTS, Env.MAX_ACTIVE_JOBS,
            Env.MAX_CREATES_PER_SECOND, Env.STACK_NAME, Env.EXECUTION_RETENTION_DAYS, Env.TARGET_ACCOUNT,
            Env.ALLOW_PRIVATE_TARGETS],
    "tick": [Env.JOBS_TABLE, Env.TIMERS_TABLE, Env.EXECUTIONS_TABLE, Env.SEGMENTS_TABLE, *Env.LANE_URL.values(),
             Env.SEGMENTS, Env.EXECUTION_RETENTION_DAYS],
    # Container tasks: the function that records a task's end from its state-change event.
    "task_events": [Env.JOBS_TABLE, Env.TIMERS_TABLE, Env.EXECUTIONS_TABLE, Env.SEGMENTS_TABLE,
                    *Env.LANE_URL.values(), Env.SEGMENTS, Env.EXECUTION_RETENTION_DAYS],
    "worker": [Env.JOBS_TABLE, Env.TIMERS_TABLE, Env.EXECUTIONS_TABLE, Env.SEGMENTS_TABLE,
               *Env.LANE_URL.values(), Env.SEGMENTS, Env.ALLOW_PRIVATE_TARGETS, Env.EXECUTION_RETENTION_DAYS,
               Env.TARGETS_ROLE_ARN],
}


class SettingsError(RuntimeError):
    pass


@dataclass(frozen=True)
class Settings:
    jobs_table: str = ""
    timers_table: str = ""
    executions_table: str = ""
    segments_table: str = ""
    api_keys_table: str = ""
    lane_urls: tuple[tuple[Priority, str], ...] = ()
    lane_dlq_urls: tuple[tuple[Priority, str], ...] = ()  # worker only
    segments: int = 1
    allow_private_targets: bool = False
    max_active_jobs: int = 100_000
    max_creates_per_second: int = 50
    stack_name: str = ""
    execution_retention_days: int = 30
    signing_key_id: str = ""
    tenant_fires_per_second: int = 0  # 0: no per-tenant spreading
    own_endpoints: str = ""  # Env.OWN_ENDPOINTS (domain/endpoints.py parses it)
    lane_caps: tuple[tuple[Priority, int], ...] = ()  # empty: no lane shares
    lane_tenant_percent: int = 0
    lane_host_percent: int = 0
    attempt_log_percent: int = 100
    targets_role_arn: str = ""
    target_account: str = ""
    target_arn_patterns: tuple[str, ...] = ()
    alert_topic_arn: str = ""  # absence alerts (worker)
    ecs_task_definitions: tuple[str, ...] | None = None  # container tasks: None when not set
    ecs_clusters: tuple[str, ...] | None = None
    ecs_networks: TaskNetworks | None = None  # container networks: None when not set
    function: str = ""  # api, tick or worker
    # Regions (Env.REGIONS): empty or one region: single-region, every segment owned, epoch 0.
    regions: tuple[str, ...] = ()
    this_region: str = ""
    ownership_table: str = ""
    ownership_regions: tuple[str, ...] = ()  # the replicas' regions, in the order they are called
    region_api_function: str = ""  # Env.REGION_API_FUNCTION (api)
    lease_ms: int = 90_000
    clock_bound_ms: int = 2_000
    jobs_state_index: str = "JobsByStateShard"  # Env.JOBS_STATE_INDEX

    @property
    def multi_region(self) -> bool:
        return len(self.regions) > 1

    @property
    def total_segments(self) -> int:
        """Every region's block of segments (domain/ownership.py): one block with one region."""
        return self.segments * max(1, len(self.regions))

    @property
    def region_index(self) -> int:
        return self.regions.index(self.this_region) if self.multi_region else 0

    def lane_url(self, priority: Priority) -> str:
        return dict(self.lane_urls)[priority]

    @classmethod
    def from_env(cls, env: Mapping[str, str], function: str) -> "Settings":
        wanted = FUNCTION_ENV[function]
        missing = [name for name in wanted if not env.get(name)]
        if missing:
            raise SettingsError(f"{function} function: missing environment variables {missing}")
        try:
            segments = int(env[Env.SEGMENTS])
        except ValueError:
            raise SettingsError(f"{Env.SEGMENTS} must be an integer, got {env[Env.SEGMENTS]!r}") from None
        if segments < 1:
            raise SettingsError(f"{Env.SEGMENTS} must be at least 1")
        return cls(
            jobs_table=env.get(Env.JOBS_TABLE, ""),
            timers_table=env.get(Env.TIMERS_TABLE, ""),
            executions_table=env.get(Env.EXECUTIONS_TABLE, ""),
            segments_table=env.get(Env.SEGMENTS_TABLE, ""),
            api_keys_table=env.get(Env.API_KEYS_TABLE, ""),
            lane_urls=tuple((p, env[v]) for p, v in Env.LANE_URL.items() if env.get(v)),
            lane_dlq_urls=tuple((p, env[v]) for p, v in Env.LANE_DLQ_URL.items() if env.get(v)),
            segments=segments,
            allow_private_targets=env.get(Env.ALLOW_PRIVATE_TARGETS, "false").lower() == "true",
            max_active_jobs=_positive(env, Env.MAX_ACTIVE_JOBS, 100_000),
            max_creates_per_second=_positive(env, Env.MAX_CREATES_PER_SECOND, 50),
            stack_name=env.get(Env.STACK_NAME, ""),
            execution_retention_days=_positive(env, Env.EXECUTION_RETENTION_DAYS, 30),
            signing_key_id=env.get(Env.SIGNING_KEY_ID, ""),
            tenant_fires_per_second=_positive(env, Env.TENANT_FIRES_PER_SECOND, 0) if env.get(
                Env.TENANT_FIRES_PER_SECOND, "0") != "0" else 0,
            own_endpoints=env.get(Env.OWN_ENDPOINTS, ""),
            lane_caps=_lane_caps(env),
            lane_tenant_percent=_percent(env, Env.LANE_TENANT_PERCENT),
            lane_host_percent=_percent(env, Env.LANE_HOST_PERCENT),
            attempt_log_percent=_percent(env, Env.ATTEMPT_LOG_PERCENT, "100"),
            targets_role_arn=env.get(Env.TARGETS_ROLE_ARN, ""),
            target_account=env.get(Env.TARGET_ACCOUNT, ""),
            target_arn_patterns=tuple(p for p in env.get(Env.TARGET_ARN_PATTERNS, "").split(",") if p),
            alert_topic_arn=env.get(Env.ALERT_TOPIC_ARN, ""),
            ecs_task_definitions=_list_or_none(env, Env.ECS_TASK_DEFINITIONS),
            ecs_clusters=_list_or_none(env, Env.ECS_CLUSTERS),
            ecs_networks=_networks(env),
            function=function,
            jobs_state_index=_choice(env, Env.JOBS_STATE_INDEX, ("JobsByStateShard", "JobsByState")),
            **_regions(env),
        )


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    """One of `allowed` (the first when absent)."""
    value = env.get(name) or allowed[0]
    if value not in allowed:
        raise SettingsError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _regions(env: Mapping[str, str]) -> dict:
    regions = tuple(r for r in env.get(Env.REGIONS, "").split(",") if r)
    if len(regions) <= 1:
        return {"regions": regions, "this_region": regions[0] if regions else ""}
    if len(set(regions)) != len(regions) or len(regions) > 9:
        raise SettingsError(f"{Env.REGIONS} must name at most 9 distinct regions, got {env[Env.REGIONS]!r}")
    this = env.get(Env.THIS_REGION, "")
    if this not in regions:
        raise SettingsError(f"{Env.THIS_REGION} must be one of {Env.REGIONS}, got {this!r}")
    if not env.get(Env.OWNERSHIP_TABLE):
        raise SettingsError(f"{Env.OWNERSHIP_TABLE} is required with more than one region")
    lease_ms = _positive(env, Env.LEASE_MS, 90_000)
    bound_ms = _positive(env, Env.CLOCK_BOUND_MS, 2_000)
    if lease_ms < 4 * bound_ms or lease_ms < 80_000:
        raise SettingsError(f"{Env.LEASE_MS} must be at least 80000 (a tick renews each minute) "
                            f"and at least 4 x {Env.CLOCK_BOUND_MS}, got {lease_ms}")
    endpoints = tuple(r.strip() for r in env.get(Env.OWNERSHIP_REGIONS, "").split(",") if r.strip()) or (this,)
    if len(set(endpoints)) != len(endpoints) or len(endpoints) > 3:
        raise SettingsError(f"{Env.OWNERSHIP_REGIONS} must name at most 3 distinct regions (an MRSC table's "
                            f"replicas), got {env[Env.OWNERSHIP_REGIONS]!r}")
    return {"regions": regions, "this_region": this, "ownership_table": env[Env.OWNERSHIP_TABLE],
            "ownership_regions": endpoints, "lease_ms": lease_ms, "clock_bound_ms": bound_ms,
            "region_api_function": env.get(Env.REGION_API_FUNCTION, "")}


def _list_or_none(env: Mapping[str, str], name: str) -> tuple[str, ...] | None:
    if name not in env:
        return None
    return tuple(p for p in env[name].split(",") if p)


def _networks(env: Mapping[str, str]) -> TaskNetworks | None:
    if Env.ECS_NETWORKS not in env:
        return None
    try:
        return TaskNetworks.parse(env[Env.ECS_NETWORKS])
    except NetworkPolicyError as exc:
        raise SettingsError(f"{Env.ECS_NETWORKS}: {exc}") from None


def _lane_caps(env: Mapping[str, str]) -> tuple[tuple[Priority, int], ...]:
    if not env.get(Env.LANE_CAPS):
        return ()
    try:
        return tuple(parse_caps(env[Env.LANE_CAPS]).items())
    except ValueError as exc:
        raise SettingsError(f"{Env.LANE_CAPS}: {exc}") from None


def _percent(env: Mapping[str, str], name: str, default: str = "0") -> int:
    value = env.get(name) or default
    if not (value.isascii() and value.isdigit()) or int(value) > 100:
        raise SettingsError(f"{name} must be a percent 0..100, got {value!r}")
    return int(value)


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    value = env.get(name)
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise SettingsError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
