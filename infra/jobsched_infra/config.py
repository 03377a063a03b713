"""Deployment knobs come from CDK context (cdk.json or `-c key=value`), parsed once here."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from jobsched.sizing import MAX_SEGMENTS

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LAYER_DIR = ROOT / ".build" / "layer"


class ConfigError(ValueError):
    pass


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
    # "kms": tables, queues and the alarm topic under one customer-managed key (rotated yearly);
    # "aws-owned": AWS-owned keys, no KMS charges.
    encryption: str = "kms"
    # Per-tenant quotas, enforced by the API function (answers 429).
    max_active_jobs: int = 100_000
    max_creates_per_second: int = 50
    # Concurrency isolation: the API keeps this many executions to itself (0: none reserved), the
    # tick two per segment (a run and its overlapping successor), and each lane's event source
    # mapping is capped so that a worker surge cannot starve the API or the tick, and HIGH keeps
    # the largest share of the worker pool under contention.
    api_reserved_concurrency: int = 50
    # How long an ended execution stays readable (DynamoDB TTL from its end), in days.
    execution_retention_days: int = 30
    lane_max_concurrency: tuple[tuple[str, int], ...] = (("HIGH", 400), ("NORMAL", 200), ("LOW", 100))
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
    # "http": API Gateway's HTTP API ($1.00 a million requests; the function checks the keys);
    # "rest": the REST API ($3.50), for X-Ray on the API hop, a WAF web ACL or request validators.
    api: str = "http"

    @classmethod
    def from_context(cls, node) -> "StackConfig":
        def get(key, default):
            value = node.try_get_context(key)
            return default if value is None else value

        try:
            segments = int(get("segments", 4))
        except (TypeError, ValueError):
            raise ConfigError("context 'segments' must be an integer") from None
        if not 1 <= segments <= MAX_SEGMENTS:
            raise ConfigError(f"context 'segments' must be 1..{MAX_SEGMENTS} (one EventBridge rule each)")
        return cls(
            segments=segments,
            layer_dir=Path(get("layerDir", os.environ.get("JOBSCHED_LAYER_DIR", str(DEFAULT_LAYER_DIR)))),
            allow_private_targets=str(get("allowPrivateTargets", "false")).lower() == "true",
            target_arn_patterns=tuple(get("targetArnPatterns", [])),
            encryption=_choice(get("encryption", "kms"), ("kms", "aws-owned"), "encryption"),
            max_active_jobs=int(get("maxActiveJobsPerTenant", 100_000)),
            max_creates_per_second=int(get("maxCreatesPerSecondPerTenant", 50)),
            api_reserved_concurrency=_int_in(get("apiReservedConcurrency", 50), 0, 1000, "apiReservedConcurrency"),
            execution_retention_days=_int_in(get("executionRetentionDays", 30), 1, 3650, "executionRetentionDays"),
            tenant_fires_per_second=_int_in(get("tenantFiresPerSecond", 0), 0, 1_000_000, "tenantFiresPerSecond"),
            lane_tenant_percent=_int_in(get("laneTenantPercent", 50), 0, 100, "laneTenantPercent"),
            lane_host_percent=_int_in(get("laneHostPercent", 50), 0, 100, "laneHostPercent"),
            api=_choice(get("api", "http"), ("http", "rest"), "api"),
            lane_max_concurrency=tuple(
                (lane, _int_in(value, 2, 1000, f"laneMaxConcurrency.{lane}"))
                for lane, value in {**dict(cls.lane_max_concurrency), **get("laneMaxConcurrency", {})}.items()),
        )


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
