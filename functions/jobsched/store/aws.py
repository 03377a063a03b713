"""boto3 clients, built once per process from settings, never at import time."""
from __future__ import annotations

from dataclasses import dataclass

import platform

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import ClientError

from jobsched.domain.clock import Clock, SystemClock
from jobsched.domain.timers import segment_of
from jobsched.settings import Settings
from jobsched.store.api_keys import ApiKeysStore
from jobsched.store.executions import ExecutionsStore
from jobsched.store.jobs import JobsStore
from jobsched.store.segments import WatermarksStore
from jobsched.store.timers import TimersStore
from jobsched.store.calendars import CalendarsStore
from jobsched.store.flow import FlowStore
from jobsched.store.queues import LaneQueues
from jobsched.store.packs import PacksStore
from jobsched.store.signing import SigningSecretsStore
from jobsched.store.alerts import AlertTopic

# The error codes AWS answers when a call is over a rate: a partition's (DynamoDB's
# ProvisionedThroughputExceededException, with reason KeyRangeThroughputExceeded), a table's or an
# account's (RequestLimitExceeded), an API's (ThrottlingException: KMS, SQS, SNS, EventBridge).
# botocore's standard mode retries them a few times first; what is left is the caller's to answer.
THROTTLE_CODES = frozenset({"ProvisionedThroughputExceededException", "RequestLimitExceeded", "ThrottlingException",
                            "Throttling", "ThrottledException", "TooManyRequestsException"})


def is_throttle(exc: BaseException) -> bool:
    """An AWS call refused for its rate, by error code (never by message text)."""
    return isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") in THROTTLE_CODES


# CPU per request (bench/cpu.py): botocore rebuilds its default User-Agent from a dozen parts on
# every request (about 15% of a request's client CPU) unless one is given, and validates every
# parameter against the model although DynamoDB and SQS validate them again (about 11%). Our data
# access builds each request from typed code, so both are switched off; a malformed request still
# fails, with AWS's ValidationException.
USER_AGENT = (f"jobsched Boto3/{boto3.__version__} Botocore/{botocore.__version__} "
              f"Python/{platform.python_version()} exec-env/{platform.system()}")
_LEAN = {"parameter_validation": False, "user_agent": USER_AGENT}
_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5},
    connect_timeout=2,
    read_timeout=10,
    max_pool_connections=32,
    **_LEAN,
)


def lean_config() -> Config:
    """The lean request building above and the functions' pool, for the clients that play AWS's
    own part in the local stack (its lane pollers, the container task runner): without them
    botocore rebuilt its User-Agent from a dozen parts for every one of their requests, and their
    pools held 10 connections. botocore's own read time-out (60 s), not the functions' 10 s: a
    poller's receive that answers late must not be asked again while its messages are hidden."""
    return Config(max_pool_connections=32, **_LEAN)


# The API answers within its function's 20 s: each AWS call gives up after 3 attempts of at
# most 1 s to connect and 3 s to read, so a request's few calls end in our error, not in a 504.
_API_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=1,
    read_timeout=3,
    max_pool_connections=32,
    **_LEAN,
)


@dataclass
class Stores:
    jobs: JobsStore
    timers: TimersStore
    watermarks: WatermarksStore
    executions: ExecutionsStore
    api_keys: ApiKeysStore
    lanes: LaneQueues
    signing: SigningSecretsStore
    flow: FlowStore
    calendars: CalendarsStore  # exclusion calendars, beside the tenant's jobs
    alerts: AlertTopic  # absence alerts: the deployment's topic (worker)
    packs: PacksStore | None = None  # pack items in the Executions table (store/packs.py)


# The ownership table's replicas (store/ownership.py fails over between them): two attempts of at
# most 1 s to connect and 3 s to read in a replica before the next is called, so a lost replica
# costs a tick or a view read about 8 s once a minute (FAILBACK_S), not 5 x 12 s.
_OWNERSHIP_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 2},
    connect_timeout=1,
    read_timeout=3,
    max_pool_connections=32,
    **_LEAN,
)


def ownership_store(settings: Settings, session: boto3.session.Session | None = None):
    """The ownership table (store/ownership.py), through each of OWNERSHIP_REGIONS in order."""
    from jobsched.store.ownership import OwnershipStore

    session = session or boto3.session.Session()
    first, *others = [session.resource("dynamodb", region_name=region, config=_OWNERSHIP_CONFIG)
                      for region in settings.ownership_regions]
    return OwnershipStore(first, settings.ownership_table, fallbacks=others)


def api_keys_store(settings: Settings, session: boto3.session.Session | None = None) -> ApiKeysStore:
    """The ApiKeys table alone (the API's authorizer reads nothing else), with the API's bounded calls."""
    session = session or boto3.session.Session()
    return ApiKeysStore(session.resource("dynamodb", config=_API_CONFIG), settings.api_keys_table)


def build_stores(settings: Settings, session: boto3.session.Session | None = None,
                 clock: Clock | None = None) -> Stores:
    session = session or boto3.session.Session()
    config = _API_CONFIG if settings.function == "api" else _CONFIG
    dynamodb = session.resource("dynamodb", config=config)
    client = session.client("dynamodb", config=config)  # wire format, for the hot calls
    sqs = session.client("sqs", config=config)
    watermarks = WatermarksStore(dynamodb, settings.segments_table, settings.region_index)
    lanes = LaneQueues(sqs, dict(settings.lane_urls), clock or SystemClock(), watermarks.dispatch_key,
                       dead_letter_urls=dict(settings.lane_dlq_urls))
    lanes.segment_of = lambda job_id: segment_of(job_id, settings.segments)  # a FIRE's pack key
    return Stores(
        jobs=JobsStore(dynamodb, settings.jobs_table, client=client,
                       retention_days=settings.execution_retention_days, state_index=settings.jobs_state_index),
        timers=TimersStore(dynamodb, settings.timers_table, client=client),
        watermarks=watermarks,
        executions=ExecutionsStore(dynamodb, settings.executions_table, settings.execution_retention_days,
                                   client=client),
        api_keys=ApiKeysStore(dynamodb, settings.api_keys_table),
        lanes=lanes,
        packs=PacksStore(dynamodb, settings.executions_table, settings.execution_retention_days, client=client),
        signing=SigningSecretsStore(dynamodb, settings.jobs_table,
                                    session.client("kms", config=config) if settings.signing_key_id else None,
                                    settings.signing_key_id),
        flow=FlowStore(dynamodb, settings.jobs_table),
        calendars=CalendarsStore(dynamodb, settings.jobs_table, client=client),
        alerts=AlertTopic(session.client("sns", config=config) if settings.alert_topic_arn else None,
                          settings.alert_topic_arn),
    )
