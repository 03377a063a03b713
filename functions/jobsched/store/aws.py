"""boto3 clients, built once per process from settings, never at import time."""
from __future__ import annotations

from dataclasses import dataclass

import boto3
from botocore.config import Config

from jobsched.domain.clock import Clock, SystemClock
from jobsched.settings import Settings
from jobsched.store.dynamo import ApiKeysStore, ExecutionsStore, JobsStore, TimersStore, WatermarksStore
from jobsched.store.queues import LaneQueues

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5},
    connect_timeout=2,
    read_timeout=10,
    max_pool_connections=32,
)
# The API answers within its function's 20 s: each AWS call gives up after 3 attempts of at
# most 1 s to connect and 3 s to read, so a request's few calls end in our error, not in a 504.
_API_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=1,
    read_timeout=3,
    max_pool_connections=32,
)


@dataclass
class Stores:
    jobs: JobsStore
    timers: TimersStore
    watermarks: WatermarksStore
    executions: ExecutionsStore
    api_keys: ApiKeysStore
    lanes: LaneQueues


def build_stores(settings: Settings, session: boto3.session.Session | None = None,
                 clock: Clock | None = None) -> Stores:
    session = session or boto3.session.Session()
    config = _API_CONFIG if settings.function == "api" else _CONFIG
    dynamodb = session.resource("dynamodb", config=config)
    sqs = session.client("sqs", config=config)
    watermarks = WatermarksStore(dynamodb, settings.segments_table)
    return Stores(
        jobs=JobsStore(dynamodb, settings.jobs_table),
        timers=TimersStore(dynamodb, settings.timers_table),
        watermarks=watermarks,
        executions=ExecutionsStore(dynamodb, settings.executions_table, settings.execution_retention_days),
        api_keys=ApiKeysStore(dynamodb, settings.api_keys_table),
        lanes=LaneQueues(sqs, dict(settings.lane_urls), clock or SystemClock(), watermarks.dispatch_key),
    )
