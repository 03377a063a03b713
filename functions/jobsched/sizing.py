"""Sizing: how many segments a peak needs (the tick's hand-off), and the end-to-end model that
sizes a whole deployment from a workload (`size`, `PROFILES`; docs/operations.md, "Sizing a
deployment"). Every figure comes from a named constant citing the AWS page or the bench behind it.

The segment rule. One segment is one tick per minute and one bucket per minute, spread over
TIMER_SLICES partition keys. Its bucket must be handed off within HANDOFF_GOAL_S (the look-ahead
leaves at least 60 s: docs/architecture.md), so per segment-minute the timers are bounded by:

- our CPU: `bench cpu` measures at most TICK_CPU_MS_PER_TIMER per handed-off timer on one core;
  the tick runs at TICK_MEMORY_MB, which Lambda gives TICK_VCPU of a vCPU;
- the partitions: a herd's next timers all land in one future bucket (same schedule, same
  segment), spread over its TIMER_SLICES partitions, and one partition takes about
  PARTITION_WRITES_PER_SECOND writes a second (timer items are under 1 KB: one write unit each);
- the sends, which go out beside those writes, SEND_PARALLELISM batches of SQS_BATCH at a time;
- the hand-off's other calls on AWS latencies (bench herd models them from the counted calls).

tests/infra/test_sizing.py holds the rule and the model to the code's constants, to AWS's
documented limits and to the template a profile synthesizes; docs/operations.md shows both worked
through.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from jobsched.domain.jobs import JOB_KEY_SHARDS
from jobsched.domain.item_size import READ_UNIT_BYTES, WRITE_UNIT_BYTES
from jobsched.domain.timers import TIMER_SLICES
from jobsched.store.queues import SEND_PARALLELISM, SQS_BATCH

HANDOFF_GOAL_S = 15.0
# Lambda allocates CPU in proportion to memory: one full vCPU at 1,769 MB.
LAMBDA_MB_PER_VCPU = 1769
TICK_MEMORY_MB = 1769
TICK_VCPU = TICK_MEMORY_MB / LAMBDA_MB_PER_VCPU
# Our CPU per handed-off timer, boto3 included (bench cpu; the bound the code is held to).
TICK_CPU_MS_PER_TIMER = 0.25
# DynamoDB: "a single partition can support a maximum of 1,000 write units per second".
PARTITION_WRITES_PER_SECOND = 1000
# The calls of one page of 500 timers that do not overlap anything (the Query, the job reads in
# one parallel wave, the saved position): bench herd models the rest from counted calls.
PAGE_SIZE = 500
PAGE_SEQUENTIAL_IO_MS = 10 + 10 + 8
# A typical in-region SendMessageBatch (bench herd's model takes it from here).
SEND_BATCH_MS = 20
MAX_SEGMENTS = 128


def handoff_ms_per_timer() -> float:
    """Worst case, a herd: each page's sends go out beside its next-timer writes (the longer of
    the two counts: the writes at the partitions' rate, the sends in parallel waves), then our
    CPU at the tick's share, then the page's reads."""
    writes = 1000 / (PARTITION_WRITES_PER_SECOND * TIMER_SLICES)
    sends = SEND_BATCH_MS / (SQS_BATCH * SEND_PARALLELISM)
    cpu = TICK_CPU_MS_PER_TIMER / TICK_VCPU
    return max(writes, sends) + cpu + PAGE_SEQUENTIAL_IO_MS / PAGE_SIZE


def timers_per_segment_minute() -> int:
    """The most timers one segment's bucket may hold at the sizing peak for its hand-off to stay
    within HANDOFF_GOAL_S (a minute twice as busy still hands off inside the look-ahead's 60 s)."""
    return int(HANDOFF_GOAL_S * 1000 / handoff_ms_per_timer())


def segments_for(jobs_per_minute: int) -> int:
    """Segments for a peak of `jobs_per_minute` timers due in one minute."""
    needed = max(1, math.ceil(jobs_per_minute / timers_per_segment_minute()))
    if needed > MAX_SEGMENTS:
        raise ValueError(f"{jobs_per_minute} jobs a minute needs {needed} segments; the stack allows {MAX_SEGMENTS}")
    return needed


# ----------------------------------------------------------------------------------------------
# The end-to-end model (issue 27): from a workload to the settings a deployment needs, read
# against AWS's documented limits. `profile_workloads` names the workloads `-c profile=` deploys
# (infra/jobsched_infra/config.py); docs/operations.md, "Sizing a deployment", shows the results.
# Plain Python, no AWS: tests/infra/test_sizing.py holds the outputs to the limits and to the
# template they drive.
# ----------------------------------------------------------------------------------------------
# Lambda's SQS event source mappings (docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html;
# ScalingConfig in the CloudFormation reference; AWS-LIMITS.md §3).
ESM_MAX_CONCURRENCY_LOW = 2            # ScalingConfig.MaximumConcurrency: 2..1,000
ESM_MAX_CONCURRENCY_HIGH = 1000
STANDARD_START_CONCURRENCY = 5         # standard mode "starts processing five batches at a time"
STANDARD_RAMP_PER_MINUTE = 300         # "... by up to 300 more concurrent invokes per minute"
STANDARD_MAX_PER_ESM = 1250            # "the maximum number of invokes ... is 1,250"
# Provisioned mode (ProvisionedPollerConfig; the Lambda developer guide's SQS page, AWS-LIMITS.md
# §3): an event poller runs up to 10 concurrent invocations; MinimumPollers 2..200; MaximumPollers
# 2..10,000 for SQS (the API reference, and CloudFormation's schema as cfn-lint checks it; older
# copies of the API reference said 2,000); pollers scale by up to 1,000 concurrent invocations a
# minute. Provisioned mode excludes MaximumConcurrency: the pollers are the cap. A
# poller's throughput (1 MB/s in the developer guide, about 5 MB/s in the API reference) is not the
# bound here: 10 invocations of 10 lane messages (under 1 KB each) every ~0.7 s is ~150 KB/s.
POLLER_INVOCATIONS = 10
MIN_POLLERS_LOW, MIN_POLLERS_HIGH = 2, 200
MAX_POLLERS_HIGH = 10_000
PROVISIONED_RAMP_PER_MINUTE = 1000
# Lambda concurrency (docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html): an account
# starts at 1,000 concurrent executions and keeps 100 unreserved whatever is reserved.
ACCOUNT_CONCURRENCY_DEFAULT = 1000
UNRESERVED_MINIMUM = 100
# A standard queue holds about 120,000 in-flight messages (SQS quotas; AWS-LIMITS.md §2).
SQS_IN_FLIGHT_LIMIT = 120_000
# A record handed back stays in flight at most this long (handlers/worker.py
# IN_PLACE_HAND_BACK_SECONDS; test_sizing holds them equal): a later hand-back is a new, delayed
# message, and delayed messages are not in flight.
IN_PLACE_HAND_BACK_S = 1
# KMS: 10,000 symmetric requests a second in most Regions (100,000 in us-east-1, us-west-2,
# eu-west-1; docs.aws.amazon.com/kms/latest/developerguide/requests-per-second.html). The worker's
# Decrypt budget: 2 a second per container, a burst of 20 per new container (service/signing.py;
# test_sizing holds them equal), and Lambda adds at most 1,000 execution environments per 10 s per
# function (docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html; AWS-LIMITS.md §3).
KMS_REQUESTS_DEFAULT = 10_000
KMS_DECRYPTS_PER_CONTAINER_SECOND = 2
KMS_COLD_BURST = 20
LAMBDA_NEW_CONTAINERS_PER_SECOND = 100
# Quota increases are asked for in round figures.
QUOTA_STEP = 1000

# The worker (docs/performance.md, "Cost per execution"): a lane message surfaces up to 1 s
# before its due second (SQS delays are whole seconds), so a batch waits 0.5 s on average; the
# records of a batch run at once, each in its thread, so a batch lasts the wait, its slowest target
# call and the worker's own calls (30 ms: job read, claim, end); its CPU is `bench cpu`'s bound per
# record on one vCPU, at the worker's 512 MB (0.29 vCPU), one record after the other (one GIL).
DUE_WAIT_MS = 500
WORKER_CALLS_MS = 30
WORKER_MEMORY_MB = 512  # a profile's worker; the default template's is QUIET_WORKER_MEMORY_MB
# The default template's worker (no profile). Its invocations mostly wait (for the due second, for
# the target), and Lambda bills the wait by the memory configured: at 256 MB a quiet deployment's
# worker costs half what it did at 512 (docs/performance.md, "A quiet deployment"). It holds about
# 52 MB of process plus at most 256 target clients (about 51 MB, `bench clients`). It gives up CPU:
# 0.145 vCPU, 104 ms for a full batch's own work instead of 52 ms (about 8 % more concurrency at a
# rate), and a cold start's imports take up to twice as long (AWS does not document the init
# phase's CPU share). A profile sized for a rate keeps 512 MB, which its lanes are computed with.
QUIET_WORKER_MEMORY_MB = 256
WORKER_CPU_MS_PER_RECORD = 1.5         # bench cpu's BOUND_WORKER_MS
WORKER_BATCH = 10                      # settings.WORKER_BATCH_SIZE (test_sizing holds them equal)
# Concurrency is sized with a quarter of headroom over the computed need (lateness grows fast as a
# lane nears its cap: a full lane queues every further message).
CONCURRENCY_HEADROOM = 1.25
# Lane ratios as the default template's (HIGH 400, NORMAL 200, LOW 100): NORMAL, the default
# priority, is sized for the whole rate; HIGH keeps twice that so it holds the largest share under
# contention; LOW half.
LANE_FACTORS = (("HIGH", 2.0), ("NORMAL", 1.0), ("LOW", 0.5))

# The API: a request takes tens of milliseconds (docs/operations.md, "API latency"); 50 reserved
# executions serve the stage's default 1,000 requests a second (1,000 x 50 ms).
API_REQUEST_MS = 50
API_RATE_DEFAULT = 1000
API_RESERVED_DEFAULT = 50
# The stage's burst is twice its rate, as the default template's (1,000 and 2,000).
API_BURST_FACTOR = 2
# API Gateway's account throttle (docs.aws.amazon.com/apigateway/latest/developerguide/limits.html).
APIGW_ACCOUNT_RPS = 10_000
# A tenant's creates share the tenant's partition key and go to the end of its key range (job ids
# are time-ordered), which a split does not spread: about 1,000 a second (docs/performance.md, "Per-tenant rates").
TENANT_CREATES_PER_SECOND_LIMIT = 1000

# DynamoDB (AWS-LIMITS.md §1): per partition 3,000 read and 1,000 write units a second; a new
# on-demand table takes 12,000 read and 4,000 write units a second at once (warm throughput;
# docs.aws.amazon.com/amazondynamodb/latest/developerguide/pre-warming-on-demand-capacity-mode.html);
# a table's default quota is 40,000 of each (on demand or provisioned), and provisioned capacity
# counts against an account quota of 80,000 of each (ServiceQuotas.html).
PARTITION_RCU, PARTITION_WCU = 3000, PARTITION_WRITES_PER_SECOND
NEW_TABLE_WARM_READ, NEW_TABLE_WARM_WRITE = 12_000, 4_000
TABLE_QUOTA_UNITS = 40_000
ACCOUNT_PROVISIONED_QUOTA_UNITS = 80_000
# A key's peak is kept below this share of its partition's limit (the rest absorbs uneven spread).
KEY_HEADROOM = 0.8
# Tables are warmed to their modelled peak plus this headroom.
TABLE_HEADROOM = 1.25
# Item sizes: a job item besides its payload (an HTTP cron job with its retry policy: 521-541 B by
# domain/item_size.py; test_sizing measures it), a timer (key and due instant: under 200 B), an
# execution's claim and its end (measured by `bench cost`: 3.38 items written per recurring
# execution, each one write unit: the claim, the end, the next timer, and 0.38 of lane-share and
# watermark writes).
JOB_ITEM_BYTES_BESIDES_PAYLOAD = 600
TIMER_ITEM_BYTES = 200
EXECUTION_WRITES = 2                   # the claim and the end, each under 1 KB
OTHER_JOBS_WRITES = 0.38               # lane shares' slot items (in Jobs, keys of their own), watermarks
# A one-time job writes more (bench cost: 9.06 write units against 3.38 recurring, less the second
# quota counter that round 11 folded into the first): its creation (job item, idempotency record,
# quota counter, index entries) and its completion (the job item again). Two of those writes are
# the job item, billed on its size; the rest are small.
ONE_TIME_JOB_ITEM_WRITES = 2
ONE_TIME_EXTRA_SMALL_WRITES = 9.06 - 1 - 3.38 - ONE_TIME_JOB_ITEM_WRITES
# Prices (us-east-1 list prices published by AWS in 2025, the same table as bench/cost_prices.py's PRICES;
# AWS-LIMITS.md could not confirm them: check the pricing page before relying on them).
PRICE_ON_DEMAND_WRITE = 0.625 / 1e6
PRICE_ON_DEMAND_READ = 0.125 / 1e6
PRICE_PROVISIONED_WCU_HOUR = 0.00065
PRICE_PROVISIONED_RCU_HOUR = 0.00013
# Provisioned tables scale on utilization (DynamoDB auto scaling's target tracking), between the
# capacity that holds the peak and twice that (room for growth before the model is run again).
PROVISIONED_TARGET_UTILIZATION = 70
AUTO_SCALING_MAX_FACTOR = 2
# Lane shares (CDK context laneTenantPercent): half a lane per tenant by default; a deployment where
# one tenant may be the whole rate gives a tenant the whole lane.
LANE_TENANT_PERCENT_SHARED, LANE_TENANT_PERCENT_ONE_TENANT = 50, 100
# The tick reserves two executions per segment: a run and its overlapping successor (stack.py).
TICK_RESERVED_PER_SEGMENT = 2
# Each run reads its job once, at the tick's hand-off (strongly consistent): the pack entry carries
# the job's item to the worker, which reads it again only when a fence names the job or the entry
# carries none (job snapshots, docs/architecture.md: "The worker reads no job"). WORKER_JOB_READS:
# the share of fires the worker still reads the job of, at steady state (bench e2e at 10,000 a
# second: the Jobs table's peak 54,156 RCU a second, the tick's reads alone).
JOB_READS_PER_RUN = 1
WORKER_JOB_READS = 0.0


@dataclass(frozen=True)
class Workload:
    """What a deployment must carry. `herd` is the timers due in the busiest minute, due over its
    first `herd_spread_s` seconds (crons at :00 spread by `jitterSec`; 1 if they share the second)."""
    jobs_per_second: int
    herd: int
    target_latency_ms: int = 100
    payload_bytes: int = 1024
    tenants: int = 100
    # Whether one tenant may be the whole rate (one partition key of the Jobs table).
    one_tenant_whole_rate: bool = False
    herd_spread_s: int = 60
    # The share of executions that are one-time jobs created through the API shortly before.
    one_time_share: float = 0.0


@dataclass(frozen=True)
class LaneSizing:
    lane: str
    # "standard" (MaximumConcurrency) or "provisioned" (ProvisionedPollerConfig)
    mode: str
    max_concurrency: int                 # the invocations the lane may run at once
    min_pollers: int = 0                 # provisioned mode only
    max_pollers: int = 0


@dataclass(frozen=True)
class TableSizing:
    table: str
    peak_read: int                       # units a second at the modelled peak
    peak_write: int
    average_read: int                    # units a second at the sustained rate
    average_write: int
    billing: str                         # "on-demand" or "provisioned"
    warm_read: int = 0                   # on demand: warm throughput to set (0: the new-table default serves)
    warm_write: int = 0
    # provisioned: capacity between min and max, scaled to the target utilization
    read_min: int = 0
    read_max: int = 0
    write_min: int = 0
    write_max: int = 0
    hourly_on_demand: float = 0.0
    hourly_provisioned: float = 0.0
    why: str = ""


@dataclass(frozen=True)
class KeyLoad:
    table: str
    key: str
    peak_read: int
    peak_write: int
    # partitions the key must be spread over to stay within KEY_HEADROOM of one partition
    spread_needed: int
    spread_in_code: int
    finding: str = ""

    @property
    def within_limits(self) -> bool:
        return self.spread_in_code >= self.spread_needed


@dataclass(frozen=True)
class Quota:
    service: str
    name: str
    default: int
    needed: int

    @property
    def raise_to(self) -> int:
        """What to ask for: the need rounded up to QUOTA_STEP, or 0 when the default serves."""
        return 0 if self.needed <= self.default else math.ceil(self.needed / QUOTA_STEP) * QUOTA_STEP


@dataclass(frozen=True)
class Sizing:
    workload: Workload
    segments: int
    lanes: tuple[LaneSizing, ...]
    lane_tenant_percent: int
    worker_reserved_concurrency: int
    api_reserved_concurrency: int
    api_rate_limit: int
    api_burst_limit: int
    tick_reserved_concurrency: int
    tick_timers_per_second: int          # the tick's hand-off at full speed, all segments at once
    timer_slices_needed: int             # partition keys per bucket the tick's next-timer writes need
    drain_per_second: int                # what the lanes run at their caps
    tables: tuple[TableSizing, ...]
    keys: tuple[KeyLoad, ...]
    quotas: tuple[Quota, ...]
    findings: tuple[str, ...]

    def lane(self, name: str) -> LaneSizing:
        return next(lane for lane in self.lanes if lane.lane == name)

    def table(self, name: str) -> TableSizing:
        return next(table for table in self.tables if table.table == name)

    @property
    def reserved_concurrency(self) -> int:
        return self.worker_reserved_concurrency + self.api_reserved_concurrency + self.tick_reserved_concurrency

    @property
    def account_concurrency_needed(self) -> int:
        return self.reserved_concurrency + UNRESERVED_MINIMUM


def worker_batch_ms(target_latency_ms: int) -> float:
    """How long one full batch holds its invocation: the wait for the due second, the slowest call
    (the records run at once), the worker's own calls, and its CPU at the worker's share of a vCPU."""
    cpu_ms = WORKER_BATCH * WORKER_CPU_MS_PER_RECORD * LAMBDA_MB_PER_VCPU / WORKER_MEMORY_MB
    return DUE_WAIT_MS + target_latency_ms + WORKER_CALLS_MS + cpu_ms


def _units(size_bytes: int, unit_bytes: int) -> int:
    return max(1, math.ceil(size_bytes / unit_bytes))


def _lane(name: str, needed: int, burst: bool) -> LaneSizing:
    """Standard mode when its MaximumConcurrency setting can hold the need (and, for a burst from
    quiet, its ramp of 300 a minute reaches the need within the minute); else provisioned pollers,
    as many as the need at 10 invocations each, the minimum warm for a burst."""
    needed = max(ESM_MAX_CONCURRENCY_LOW, needed)
    ramps_in_time = not burst or needed <= STANDARD_START_CONCURRENCY + STANDARD_RAMP_PER_MINUTE
    if needed <= ESM_MAX_CONCURRENCY_HIGH and ramps_in_time:
        return LaneSizing(name, "standard", needed)
    max_pollers = min(MAX_POLLERS_HIGH, math.ceil(needed / POLLER_INVOCATIONS))
    min_pollers = min(MIN_POLLERS_HIGH, max_pollers) if burst else MIN_POLLERS_LOW
    return LaneSizing(name, "provisioned", max_pollers * POLLER_INVOCATIONS, max(MIN_POLLERS_LOW, min_pollers),
                      max_pollers)


def _table(name: str, peak_read: float, peak_write: float, average_read: float, average_write: float,
           has_index: bool) -> TableSizing:
    """On demand, warmed to the peak when the new-table default falls short, unless provisioned
    capacity at the target utilization costs less per hour at the sustained rate. Provisioned
    capacity must hold the peak (auto scaling follows minutes, not the tick's seconds-long burst),
    and a table with a secondary index stays on demand: its index would need capacity of its own,
    and an index short of it throttles the table's writes (back-pressure)."""
    peak_read, peak_write = math.ceil(peak_read), math.ceil(peak_write)
    utilization = PROVISIONED_TARGET_UTILIZATION / 100
    read_cap, write_cap = math.ceil(peak_read / utilization), math.ceil(peak_write / utilization)
    on_demand = 3600 * (average_read * PRICE_ON_DEMAND_READ + average_write * PRICE_ON_DEMAND_WRITE)
    provisioned = read_cap * PRICE_PROVISIONED_RCU_HOUR + write_cap * PRICE_PROVISIONED_WCU_HOUR
    common = dict(table=name, peak_read=peak_read, peak_write=peak_write, average_read=math.ceil(average_read),
                  average_write=math.ceil(average_write), hourly_on_demand=round(on_demand, 4),
                  hourly_provisioned=round(provisioned, 4))
    if provisioned < on_demand and not has_index:
        return TableSizing(**common, billing="provisioned", read_min=max(1, read_cap), read_max=AUTO_SCALING_MAX_FACTOR * max(1, read_cap),
                           write_min=max(1, write_cap), write_max=AUTO_SCALING_MAX_FACTOR * max(1, write_cap),
                           why="provisioned at the peak costs less than on demand at the sustained rate")
    warm_read = math.ceil(peak_read * TABLE_HEADROOM) if peak_read * TABLE_HEADROOM > NEW_TABLE_WARM_READ else 0
    warm_write = math.ceil(peak_write * TABLE_HEADROOM) if peak_write * TABLE_HEADROOM > NEW_TABLE_WARM_WRITE else 0
    why = ("a secondary index would need provisioned capacity of its own" if provisioned < on_demand
           else "on demand costs less than capacity held at the peak")
    return TableSizing(**common, billing="on-demand", warm_read=warm_read, warm_write=warm_write, why=why)


def _spread(peak_read: float, peak_write: float) -> int:
    return max(1, math.ceil(peak_read / (PARTITION_RCU * KEY_HEADROOM)),
               math.ceil(peak_write / (PARTITION_WCU * KEY_HEADROOM)))


def size(workload: Workload) -> Sizing:
    """The settings `workload` needs, and what AWS must allow first (quotas) or the code lacks
    (findings)."""
    w = workload
    if w.jobs_per_second < 1 or w.herd < 1 or w.herd_spread_s < 1 or w.tenants < 1:
        raise ValueError("jobs_per_second, herd, herd_spread_s and tenants must be at least 1")
    findings: list[str] = []
    peak_minute = max(w.herd, 60 * w.jobs_per_second)
    segments = segments_for(peak_minute)
    # The tick hands a minute's bucket off at full speed, all segments at once (each within
    # HANDOFF_GOAL_S): its reads and writes come in a burst of up to a quarter of a minute.
    tick_rate = min(peak_minute, math.ceil(segments * 1000 / handoff_ms_per_timer()))
    herd_rate = math.ceil(w.herd / w.herd_spread_s)
    drain = max(w.jobs_per_second, herd_rate)
    burst = herd_rate > w.jobs_per_second

    batch_s = worker_batch_ms(w.target_latency_ms) / 1000
    normal_need = math.ceil(drain / WORKER_BATCH * batch_s * CONCURRENCY_HEADROOM)
    lanes = tuple(_lane(name, math.ceil(normal_need * factor), burst) for name, factor in LANE_FACTORS)
    for lane in lanes:
        if lane.mode == "provisioned" and lane.max_pollers == MAX_POLLERS_HIGH \
                and lane.max_concurrency < normal_need * dict(LANE_FACTORS)[lane.lane]:
            findings.append(f"lane {lane.lane} needs more than {MAX_POLLERS_HIGH:,} pollers' "
                            f"{MAX_POLLERS_HIGH * POLLER_INVOCATIONS:,} invocations: a second event source "
                            "mapping (queue) per lane would be needed")
        if lane.mode == "provisioned" and burst and lane.max_concurrency > lane.min_pollers * POLLER_INVOCATIONS:
            ramp_s = math.ceil((lane.max_concurrency - lane.min_pollers * POLLER_INVOCATIONS)
                               / PROVISIONED_RAMP_PER_MINUTE * 60)
            findings.append(f"lane {lane.lane}: {lane.min_pollers} warm pollers run "
                            f"{lane.min_pollers * POLLER_INVOCATIONS:,} invocations at once; the rest of its "
                            f"{lane.max_concurrency:,} takes about {ramp_s} s to scale in (1,000 a minute)")
        first_minute = STANDARD_START_CONCURRENCY + STANDARD_RAMP_PER_MINUTE
        if lane.mode == "standard" and lane.max_concurrency > first_minute:
            # bench e2e --profile=10k: the steady rate met p99 337 ms once ramped, 33.7 s over its run.
            ramp_s = math.ceil((lane.max_concurrency - STANDARD_START_CONCURRENCY) / STANDARD_RAMP_PER_MINUTE * 60)
            findings.append(f"lane {lane.lane}: standard polling from idle reaches its {lane.max_concurrency:,} "
                            f"in about {ramp_s} s ({STANDARD_RAMP_PER_MINUTE} more a minute from "
                            f"{STANDARD_START_CONCURRENCY}): a steady rate that starts from quiet (a first "
                            "deployment, a quiet night) is late that long; provisioned mode with MinimumPollers "
                            "near the need removes it, at the pollers' hourly price")
    if burst and lanes[1].max_concurrency > LAMBDA_NEW_CONTAINERS_PER_SECOND * 10:
        # Pollers may be warm, the worker's containers are not: Lambda starts at most 1,000 a 10 s.
        per_10s = LAMBDA_NEW_CONTAINERS_PER_SECOND * 10
        start_s = 10 * (math.ceil(lanes[1].max_concurrency / per_10s) - 1)
        findings.append(f"the worker starts at most {per_10s:,} containers per 10 s: a herd on one lane needs "
                        f"{lanes[1].max_concurrency:,} at once, all running after about {start_s} s from cold "
                        "(provisioned concurrency on the worker would keep them warm, billed by the hour)")
    worker_reserved = sum(lane.max_concurrency for lane in lanes)
    tenant_percent = LANE_TENANT_PERCENT_ONE_TENANT if w.one_tenant_whole_rate else LANE_TENANT_PERCENT_SHARED

    creates = math.ceil(w.jobs_per_second * w.one_time_share)
    api_rate = max(API_RATE_DEFAULT, creates)
    api_reserved = max(API_RESERVED_DEFAULT, math.ceil(api_rate * API_REQUEST_MS / 1000 * CONCURRENCY_HEADROOM))
    if w.one_tenant_whole_rate and creates > TENANT_CREATES_PER_SECOND_LIMIT:
        findings.append(f"one tenant cannot create {creates:,} one-time jobs a second through the API (about "
                        f"{TENANT_CREATES_PER_SECOND_LIMIT:,} on its partition key): it creates them ahead, or "
                        "uses recurring schedules (a batch create of up to 100 saves requests, not the job "
                        "items' writes on that key)")

    # DynamoDB, units a second. Reads are strongly consistent (1 unit per 4 KB); a Query sums its
    # items' sizes before rounding.
    job_bytes = JOB_ITEM_BYTES_BESIDES_PAYLOAD + w.payload_bytes
    job_read = _units(job_bytes, READ_UNIT_BYTES)
    job_write = _units(job_bytes, WRITE_UNIT_BYTES)
    one_time_writes = w.one_time_share * (ONE_TIME_JOB_ITEM_WRITES * job_write + ONE_TIME_EXTRA_SMALL_WRITES)
    # The tick reads each timer's job and writes its next timer at the tick's rate; the worker
    # reads again (at the drain rate) only the jobs a fence names or whose entries carry none.
    jobs_peak_read = tick_rate * job_read + WORKER_JOB_READS * drain * job_read
    jobs_avg_read = JOB_READS_PER_RUN * w.jobs_per_second * job_read
    jobs_peak_write = drain * (OTHER_JOBS_WRITES + one_time_writes)
    jobs_avg_write = w.jobs_per_second * (OTHER_JOBS_WRITES + one_time_writes)
    timers_peak_read = tick_rate * TIMER_ITEM_BYTES / READ_UNIT_BYTES
    timers_peak_write = tick_rate * 1 + creates
    tables = (
        _table("Jobs", jobs_peak_read, jobs_peak_write, jobs_avg_read, jobs_avg_write, has_index=True),
        _table("Timers", timers_peak_read, timers_peak_write, w.jobs_per_second * TIMER_ITEM_BYTES / READ_UNIT_BYTES,
               w.jobs_per_second, has_index=False),
        _table("Executions", 1, drain * EXECUTION_WRITES, 1, w.jobs_per_second * EXECUTION_WRITES, has_index=True),
    )
    on_demand_bursts = [t for t in tables if t.billing == "on-demand" and t.hourly_provisioned < t.hourly_on_demand]
    for table in on_demand_bursts:
        findings.append(f"{table.table}: provisioned capacity would cost ${table.hourly_provisioned:.2f} an hour "
                        f"against ${table.hourly_on_demand:.2f} on demand, but the table has a secondary index")
    if any(t.billing == "on-demand" and t.peak_read > 2 * t.average_read for t in tables):
        findings.append("the tick hands each minute off in a burst (up to "
                        f"{tick_rate:,} timers a second for {HANDOFF_GOAL_S:.0f} s): its reads set the tables' "
                        "peaks; a hand-off paced over the look-ahead would lower them")

    # Partition keys at the peak.
    per_slice_write = tick_rate / segments / TIMER_SLICES
    keys = [KeyLoad("Timers", "<minute>#<segment>[#<slice>]", math.ceil(timers_peak_read / segments / TIMER_SLICES),
                    math.ceil(per_slice_write), _spread(0, per_slice_write), 1)]
    tenant_share = 1.0 if w.one_tenant_whole_rate else 1.0 / w.tenants
    tenant_read = jobs_peak_read * tenant_share
    # A tenant's job items are on JOB_KEY_SHARDS keys (domain/jobs.py job_partition): the tick's
    # reads and a one-time job's item writes (its creation and completion) spread over them. The
    # lane shares' slot items have keys of their own (sharded per lane and tenant).
    # Its one-time jobs complete at the drain rate; it creates them at most as fast as one tenant
    # may create (ahead of their instants: "one tenant cannot create ..." above).
    tenant_completions = drain * w.one_time_share * tenant_share
    tenant_creates = min(tenant_completions, TENANT_CREATES_PER_SECOND_LIMIT)
    tenant_item_write = (tenant_completions + tenant_creates) * (ONE_TIME_JOB_ITEM_WRITES / 2) * job_write
    needed = _spread(tenant_read, tenant_item_write)
    keys.append(KeyLoad(
        "Jobs", f"tenantId#<n> (a tenant's jobs, {JOB_KEY_SHARDS} keys)", math.ceil(tenant_read),
        math.ceil(tenant_item_write), needed, JOB_KEY_SHARDS,
        "" if needed <= JOB_KEY_SHARDS else
        f"one tenant's job items take {math.ceil(tenant_read):,} read and {math.ceil(tenant_item_write):,} write "
        f"units a second: they need {needed} keys, the code spreads them over {JOB_KEY_SHARDS}"))
    # On the tenant's own key stay the small items of its creates (name and tag entries,
    # idempotency records, its quota counters): at most the creates one tenant may make a second.
    own_write = tenant_creates * ONE_TIME_EXTRA_SMALL_WRITES
    own_needed = _spread(0, own_write)
    keys.append(KeyLoad(
        "Jobs", "tenantId (a tenant's other items)", 0, math.ceil(own_write), own_needed, 1,
        "" if own_needed <= 1 else
        f"one tenant's creates ({tenant_creates:,.0f} a second) write {math.ceil(own_write):,} units a second of small "
        "items (name entries, idempotency records, quota counters) on its own key: about "
        f"{int(PARTITION_WCU / ONE_TIME_EXTRA_SMALL_WRITES):,} creates a second fit its {PARTITION_WCU:,}; those "
        "items are not spread over keys"))
    # A job runs at most once a second (PT1S): its executions' key takes two small writes a second.
    keys.append(KeyLoad("Executions", "jobId", 1, EXECUTION_WRITES, 1, 1))
    # A writer that places a timer within the look-ahead reads its segment's watermark (one
    # strongly consistent read of a small item): the API's creates, spread over the segments.
    keys.append(KeyLoad("Segments", "segment", math.ceil(creates / segments), 0,
                        _spread(creates / segments, 0), 1))
    findings.extend(k.finding for k in keys if k.finding)

    tick_reserved = TICK_RESERVED_PER_SEGMENT * segments
    # KMS (docs/architecture.md, "KMS calls are bounded by design"): at most 2 Decrypts a second per
    # worker container plus 20 per new container, and Lambda adds at most 100 containers a second.
    kms_peak = worker_reserved * KMS_DECRYPTS_PER_CONTAINER_SECOND + LAMBDA_NEW_CONTAINERS_PER_SECOND * KMS_COLD_BURST
    sizing_quotas = [
        Quota("Lambda", "Concurrent executions", ACCOUNT_CONCURRENCY_DEFAULT,
              worker_reserved + api_reserved + tick_reserved + UNRESERVED_MINIMUM),
        Quota("API Gateway", "Throttle rate (requests a second, account)", APIGW_ACCOUNT_RPS, api_rate),
        # Messages received and not yet deleted, per lane queue (not adjustable): the batches running,
        # and at worst every record handed back in place for its second (docs/architecture.md, "Hand-backs").
        Quota("SQS", "In-flight messages per lane queue", SQS_IN_FLIGHT_LIMIT,
              math.ceil(drain * (batch_s + IN_PLACE_HAND_BACK_S))),
        Quota("KMS", "Symmetric cryptographic requests a second (with encryption=kms)", KMS_REQUESTS_DEFAULT,
              kms_peak),
    ]
    for table in tables:
        if table.billing == "on-demand":
            sizing_quotas += [Quota("DynamoDB", f"Table-level read throughput ({table.table})", TABLE_QUOTA_UNITS,
                                    max(table.peak_read, table.warm_read)),
                              Quota("DynamoDB", f"Table-level write throughput ({table.table})", TABLE_QUOTA_UNITS,
                                    max(table.peak_write, table.warm_write))]
        else:
            sizing_quotas += [Quota("DynamoDB", f"Table-level read throughput ({table.table})", TABLE_QUOTA_UNITS,
                                    table.read_max),
                              Quota("DynamoDB", f"Table-level write throughput ({table.table})", TABLE_QUOTA_UNITS,
                                    table.write_max)]
    provisioned = [t for t in tables if t.billing == "provisioned"]
    sizing_quotas += [Quota("DynamoDB", "Account-level read throughput (provisioned tables)",
                            ACCOUNT_PROVISIONED_QUOTA_UNITS, sum(t.read_max for t in provisioned)),
                      Quota("DynamoDB", "Account-level write throughput (provisioned tables)",
                            ACCOUNT_PROVISIONED_QUOTA_UNITS, sum(t.write_max for t in provisioned))]
    return Sizing(
        workload=w, segments=segments, lanes=lanes, lane_tenant_percent=tenant_percent,
        worker_reserved_concurrency=worker_reserved, api_reserved_concurrency=api_reserved,
        api_rate_limit=api_rate, api_burst_limit=API_BURST_FACTOR * api_rate, tick_reserved_concurrency=tick_reserved,
        tick_timers_per_second=tick_rate,
        timer_slices_needed=_spread(0, tick_rate / segments),
        drain_per_second=math.floor(lanes[1].max_concurrency * WORKER_BATCH / batch_s),
        tables=tables, keys=tuple(keys), quotas=tuple(sizing_quotas), findings=tuple(findings))


# The workloads `-c profile=<name>` deploys ("default" is the template without a profile).
PROFILES = {
    # 1,000 jobs a second, all recurring, 100 ms targets, 1 KB payloads, spread over 100 tenants.
    "1k": Workload(jobs_per_second=1000, herd=60_000, tenants=100),
    # 10,000 a second, of which one tenant may be the whole rate.
    "10k": Workload(jobs_per_second=10_000, herd=600_000, tenants=1000, one_tenant_whole_rate=True),
    # A quiet 100 a second, and a million timers due in one minute (spread over it by jitterSec).
    "herd1m": Workload(jobs_per_second=100, herd=1_000_000, tenants=1000, herd_spread_s=60),
}


def profile_sizing(name: str) -> Sizing:
    if name not in PROFILES:
        raise ValueError(f"unknown sizing profile {name!r}; known: default, {', '.join(PROFILES)}")
    return size(PROFILES[name])


def _lane_text(lane: LaneSizing) -> str:
    if lane.mode == "standard":
        return f"{lane.lane} {lane.max_concurrency:,}"
    return f"{lane.lane} {lane.max_concurrency:,} (provisioned, {lane.min_pollers}-{lane.max_pollers} pollers)"


def _table_text(table: TableSizing) -> str:
    if table.billing == "provisioned":
        return (f"{table.table} provisioned {table.read_min:,}-{table.read_max:,} RCU, "
                f"{table.write_min:,}-{table.write_max:,} WCU at {PROVISIONED_TARGET_UTILIZATION}%")
    warm = ", ".join(f"{n} {v:,}" for n, v in (("read", table.warm_read), ("write", table.warm_write)) if v)
    return f"{table.table} on demand" + (f", warm {warm}" if warm else "")


def describe(name: str) -> str:
    """One profile as the row of docs/operations.md's table (test_sizing holds the page to it)."""
    s = profile_sizing(name)
    quotas = "; ".join(f"{q.service} {q.name}: {q.raise_to:,}" for q in s.quotas if q.raise_to) or "none"
    return (f"| `-c profile={name}` | {s.segments} | {'; '.join(_lane_text(lane) for lane in s.lanes)} | "
            f"worker {s.worker_reserved_concurrency:,}, API {s.api_reserved_concurrency}, "
            f"tick {s.tick_reserved_concurrency} | {'; '.join(_table_text(t) for t in s.tables)} | {quotas} |")


if __name__ == "__main__":
    import sys

    for profile in sys.argv[1:] or PROFILES:
        print(describe(profile))
        for finding in profile_sizing(profile).findings:
            print(f"  - {finding}")
