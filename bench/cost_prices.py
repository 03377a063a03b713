"""bench cost's dated price table, the assumptions for what is not counted, and the bill priced
from what was measured: per million executions, and the quiet deployment's month (see bench/cost.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobsched.sizing import TICK_MEMORY_MB

if TYPE_CHECKING:  # annotations only: the measurement imports this module's assumptions
    from bench.cost_measure import Measured


PRICE_DATE = "2026-11-24"
# us-east-1, read on PRICE_DATE. (USD, unit, pricing page, where the figure was seen: "AWS" = the
# AWS page or an AWS whitepaper's copy of it; "3rd" = third-party copies only, the AWS page renders
# its figures client-side; "model" = not a list price).
PRICES: dict[str, tuple[float, str, str, str]] = {
    "apigw_http": (1.00, "per million HTTP API requests (first 300 M a month)",
                   "aws.amazon.com/api-gateway/pricing", "AWS (whitepaper table 4)"),
    "apigw_rest": (3.50, "per million REST API requests (first 333 M a month)",
                   "aws.amazon.com/api-gateway/pricing", "AWS (whitepaper table 4)"),
    "lambda_request": (0.20, "per million Lambda requests", "aws.amazon.com/lambda/pricing", "3rd"),
    "lambda_arm_gb_s": (0.0000133334, "per GB-second, arm64 (first 7.5 billion a month)",
                        "aws.amazon.com/lambda/pricing", "3rd"),
    "ddb_wru": (0.625, "per million write request units (on-demand, Standard class)",
                "aws.amazon.com/dynamodb/pricing/on-demand", "3rd (after the Nov 2024 cut)"),
    "ddb_rru": (0.125, "per million read request units (on-demand)",
                "aws.amazon.com/dynamodb/pricing/on-demand", "3rd (after the Nov 2024 cut)"),
    "ddb_wcu_hour": (0.00065, "per provisioned WCU-hour", "aws.amazon.com/dynamodb/pricing/provisioned",
                     "AWS ($0.47 per WCU-month)"),
    "ddb_rcu_hour": (0.00013, "per provisioned RCU-hour", "aws.amazon.com/dynamodb/pricing/provisioned",
                     "AWS ($0.09 per RCU-month)"),
    "ddb_storage_gb_month": (0.25, "per GB-month stored (first 25 GB free, not counted here)",
                             "aws.amazon.com/dynamodb/pricing", "AWS"),
    "ddb_pitr_gb_month": (0.20, "per GB-month of table size, point-in-time recovery",
                          "aws.amazon.com/dynamodb/pricing", "not confirmed"),
    "sqs_request": (0.40, "per million standard-queue requests (each 64 KB of a request is one)",
                    "aws.amazon.com/sqs/pricing", "3rd"),
    "kms_request": (0.03, "per 10,000 KMS requests", "aws.amazon.com/kms/pricing", "3rd (free tier 20,000: AWS)"),
    "kms_key_month": (1.00, "per customer-managed key a month, +1 per rotated version", "aws.amazon.com/kms/pricing",
                      "AWS"),
    "logs_ingest_gb": (0.50, "per GB ingested, CloudWatch Logs Standard class", "aws.amazon.com/cloudwatch/pricing",
                       "3rd"),
    "logs_store_gb_month": (0.03, "per GB-month archived", "aws.amazon.com/cloudwatch/pricing", "3rd"),
    "metric_month": (0.30, "per custom metric a month (first 10,000)", "aws.amazon.com/cloudwatch/pricing",
                     "not confirmed"),
    "alarm_month": (0.10, "per standard-resolution alarm metric a month", "aws.amazon.com/cloudwatch/pricing",
                    "not confirmed"),
    "dashboard_month": (3.00, "per dashboard a month (3 free)", "aws.amazon.com/cloudwatch/pricing", "not confirmed"),
    "xray_trace": (5.00, "per million traces recorded (100,000 a month free)", "aws.amazon.com/xray/pricing", "AWS"),
    "eventbridge_schedule_rule": (0.0, "scheduled rules' events: no charge (the tick's invocations are Lambda's)",
                                  "aws.amazon.com/eventbridge/pricing", "3rd"),
    "eventbridge_scheduler": (1.00, "per million EventBridge Scheduler invocations (the reference)",
                              "aws.amazon.com/eventbridge/pricing", "3rd"),
}


def price(name: str) -> float:
    return PRICES[name][0]


MILLION = 1_000_000
GB = 1024 ** 3
SECONDS_PER_MONTH = 730 * 3600
RATES = {"10,000/s": 10_000.0, "1/s": 1.0}
# --- assumptions for what is not counted (each printed with the figures) -----------------------
PROVISIONED_UTILIZATION = 0.7  # auto scaling's target: capacity bought is consumed / 0.7
# A table is priced as the template bills it: on demand, or provisioned (a sizing profile's table,
# its capacity bought at auto scaling's target utilization). No provisioned figure is printed for a
# table the template does not provision.
CALL_S = 0.006  # one DynamoDB or SQS call from Lambda, in-region
API_OWN_S = 0.015  # our CPU per API request at 512 MB (about 0.29 vCPU)
WORKER_CPU_PER_RECORD_S = 0.0012  # `bench cpu`: 1.2 ms of one core per one-time record (at the worker's vCPU share)
TICK_S_PER_TIMER = 0.00037  # `bench herd`: 10.9 s to hand off 30,000 timers at one vCPU, calls overlapped
TARGET_S = 0.1  # the target's answer
API_GB, TICK_GB = 0.5, TICK_MEMORY_MB / 1024  # the worker's: the template's MemorySize (worker_gb)
PLATFORM_LOG_BYTES = 330  # Lambda's START, END and REPORT lines of one invocation (text format, X-Ray on)
EVENT_OVERHEAD_BYTES = 26  # CloudWatch Logs counts 26 bytes per event beside its message
ACCESS_LOG_BYTES = 290  # one API Gateway access-log line of the stage's format
# Lambda's SQS pollers on an idle standard queue: five, "and can optimize to as few as 2 [...]
# However, this optimization is not available when you enable the maximum concurrency setting"
# (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html); each long polls 20 s
# (SQS's longest wait), 3 receives a minute, billed as requests whether or not they return messages.
# Only a poll that waits out its 20 s returns empty: on the lane the bench's jobs use (all one
# priority), a poller receives a message every pollers / rate seconds, so its empty polls are the
# chance that none comes in 20 s; the other lanes' pollers poll empty all month.
IDLE_POLLERS_CAPPED, IDLE_POLLERS_UNCAPPED, IDLE_POLLS_PER_MINUTE, LONG_POLL_S = 5, 2, 3, 20
XRAY_RESERVOIR_PER_S, XRAY_RATE = 1.0, 0.05  # Lambda's fixed sampling: 1 a second, then 5 %
KMS_REUSE_S = 300  # DynamoDB's table-key cache; SQS's data key reuse period when a queue sets none
LOG_RETENTION_DAYS = 30
RETENTION_DAYS = {"Executions": 30, "Jobs": 30, "Timers": 7}  # per-execution items' life (TTL)
RECURRING_RUNS_PER_JOB = 1440  # a recurring job's create, amortized over a day at one run a minute
# The worker's wait for a recurring fire's instant when the tick sends as it comes (before aligned
# sends, and in the scenarios not measured timed): SQS surfaces a message up to a second before
# it, by the sub-second remainder of its delay, uniform over the second: half a second on average.
UNALIGNED_WAIT_S = 0.5
QUIET_GOAL = 20.0  # USD a month for one recurring execution a second, as deployed by default


# --- the bill -----------------------------------------------------------------------------------

def api_type(tpl: dict) -> str:
    types = {r["Type"] for r in tpl["Resources"].values()}
    return "http" if "AWS::ApiGatewayV2::Api" in types else "rest"


# What a pack costs once, whatever its fill: its message (the tick's send, the mapping's receive and
# delete, the worker's visibility change), the worker's invocation, its Executions item
# (claim, checkpoints), the lane-share slots taken for it (Jobs writes). Priced at another fill,
# these scale by measured fill / that fill; the rest (a job's read, its next timer) is per entry.
PER_PACK = ("inv_worker", "sqs", "read:Executions", "write:Executions", "write:Jobs")
# A one-time fire also writes its job (completed: the item and its index entries) in the worker, on
# the same table as the slots: its Jobs writes are all kept as measured (the slots' share unscaled).
PER_PACK_ONE_TIME = tuple(k for k in PER_PACK if k != "write:Jobs")


def per_pack(m: Measured) -> tuple[str, ...]:
    """The counts a pack makes once, whatever its fill, in this scenario."""
    return PER_PACK_ONE_TIME if m.scenario.kind == "one-time" else PER_PACK


def per_execution_counts(m: Measured, rate: float, fill: float | None = None, segments: int | None = None) -> dict:
    """What one execution costs in counted things at `rate`: the fire phase, the create (a
    one-time job's own, a recurring job's spread over RECURRING_RUNS_PER_JOB), and the ticks'
    fixed share at the stated rate instead of the bench's, run by the template's segments (or
    `segments`). `fill`: the fire phase's per-pack counts (per_pack) at that many entries a pack
    instead of the fill measured."""
    n = max(m.executions, 1)
    creates = (m.scenario.jobs / n) if m.scenario.kind == "one-time" else 1 / RECURRING_RUNS_PER_JOB
    per_create = 1 / m.scenario.jobs
    tick_runs_fire = m.fire.invocations["tick"]
    idle_runs = max(m.idle_tick_runs, 1)
    segments = segments or template_segments(m.template)  # the ticks as deployed, at every rate
    tick_runs_per_execution = segments / (rate * 60)

    refill = m.pack_fill / fill if fill and m.pack_fill else 1.0
    scaled = per_pack(m)

    def mix(get, key: str = "") -> float:
        """fire/n (minus the ticks' fixed part at the bench's count) + fixed at the rate + creates."""
        fire = (get(m.fire) - get(m.idle) * tick_runs_fire / idle_runs) * (refill if key in scaled else 1.0)
        return fire / n + get(m.idle) / idle_runs * tick_runs_per_execution + get(m.create) * per_create * creates

    out: dict = {"creates": creates, "tick_runs": tick_runs_per_execution + 0.0,
                 "create_requests": creates / m.scenario.create_batch}
    for fn in ("api", "tick", "worker"):
        out[f"inv_{fn}"] = mix(lambda t, fn=fn: t.invocations[fn], f"inv_{fn}")
        out[f"log_{fn}"] = mix(lambda t, fn=fn: t.log_bytes[fn])
        out[f"loglines_{fn}"] = mix(lambda t, fn=fn: t.log_bytes[f"{fn}:lines"])
    out["attempt_ok_worker"] = mix(lambda t: t.log_bytes["worker:attempt_ok"])  # lines the deployed percent samples
    out["inv_tick"] = tick_runs_per_execution  # a tick run is fixed; its timers are in its duration
    tables = sorted({k[1] for t in (m.fire, m.create, m.idle) for k in t.units})
    for table in tables:
        for kind in ("read", "write"):
            out[f"{kind}:{table}"] = mix(lambda t, table=table, kind=kind:
                                         sum(v for (f, tb, k), v in t.units.items() if tb == table and k == kind),
                                         f"{kind}:{table}")
    out["sqs"] = mix(lambda t: sum(t.sqs_chunks.values()), "sqs")
    out["timers_wu_joined"] = mix(lambda t: t.timers_wu_joined)
    out["calls_worker"] = sum(v for (f, s, o), v in m.fire.calls.items() if f == "worker") / n
    out["calls_api"] = sum(v for (f, s, o), v in m.create.calls.items() if f == "api") / m.scenario.jobs
    out["calls_tick_idle"] = sum(v for (f, s, o), v in m.idle.calls.items() if f == "tick") / idle_runs
    out["records_per_batch"] = n / max(m.fire.invocations["worker"], 1) / refill
    out["fill"] = fill or m.pack_fill
    return out


def provisioned_tables(tpl: dict) -> set[str]:
    """The data tables (by their logical names: Jobs, Timers, ...) the template bills as provisioned."""
    out = set()
    for rid, r in tpl["Resources"].items():
        if r["Type"] in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable") \
                and r["Properties"].get("BillingMode") == "PROVISIONED":
            out |= {n for n in RETENTION_DAYS.keys() | {"Segments", "ApiKeys"} if rid.startswith(f"Storage{n}")}
    return out


def template_segments(tpl: dict) -> int:
    """The segments the template's tick runs (its functions' SEGMENTS; `-c segments`, 4 by default)."""
    from bench.cost_measure import worker_function
    from jobsched.settings import Env

    return int(worker_function(tpl)["Properties"]["Environment"]["Variables"][Env.SEGMENTS])


def has_kms_key(tpl: dict) -> bool:
    """Whether the template deploys the stack's customer-managed key (`-c encryption=kms`)."""
    return any(r["Type"] in ("AWS::KMS::Key", "AWS::KMS::ReplicaKey") for r in tpl["Resources"].values())


def lane_key_reuse_s(tpl: dict) -> int:
    """SQS's data-key reuse period on the lanes (the queues with a dead-letter queue), as the
    template sets it (KmsDataKeyReusePeriodSeconds; SQS's default, 300 s, when it sets none)."""
    periods = [int(r["Properties"].get("KmsDataKeyReusePeriodSeconds", KMS_REUSE_S))
               for r in tpl["Resources"].values()
               if r["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in r.get("Properties", {})]
    return min(periods, default=KMS_REUSE_S)


def lane_pollers(tpl: dict) -> list[int]:
    """Lambda's pollers on each lane while it is idle, from the template's event source mappings:
    five on a mapping with MaximumConcurrency, two without, a provisioned mapping's minimum."""
    out = []
    for r in tpl["Resources"].values():
        if r["Type"] != "AWS::Lambda::EventSourceMapping":
            continue
        props = r["Properties"]
        if "ProvisionedPollerConfig" in props:
            out.append(int(props["ProvisionedPollerConfig"].get("MinimumPollers", 2)))
        else:
            capped = "MaximumConcurrency" in props.get("ScalingConfig", {})
            out.append(IDLE_POLLERS_CAPPED if capped else IDLE_POLLERS_UNCAPPED)
    return out


def idle_pollers(tpl: dict) -> int:
    return sum(lane_pollers(tpl))


def empty_polls_per_s(pollers: list[int], messages_per_s: float) -> float:
    """Empty receives a second: every lane's pollers but the busiest one's (the bench's jobs' lane:
    the first with the most pollers) poll every 20 s for nothing; the busy lane's, only when no
    message reaches a poller in its 20 s."""
    if not pollers:
        return 0.0
    busy = max(pollers)
    quiet = sum(pollers) - busy
    per_poller = IDLE_POLLS_PER_MINUTE / 60
    return quiet * per_poller + busy * per_poller * math.exp(-messages_per_s * LONG_POLL_S / busy)


@dataclass(frozen=True)
class WhatIf:
    """A lever priced on the same counts: another API type, retention, PITR, no wait for the due
    second, no INFO log lines, the stack's own KMS key, another worker memory."""
    api: str | None = None
    retention_days: int | None = None
    pitr: bool = True
    wait: bool = True
    info_lines: bool = True
    attempt_log_percent: int | None = None  # None: the template's
    tracing: bool | None = None  # Lambda's active tracing; None: the template's (`-c tracing`)
    kms: bool | None = None  # the stack's customer-managed key; None: the template's (`-c encryption`)
    worker_mb: int | None = None  # the worker's memory; None: the template's (`-c workerMemoryMb`)
    late_instead_of_wait: bool = False  # a fire's message surfaces at or after its due instant (no wait)
    alarm_metrics_added: int = 0  # alarm metrics beside the template's (a cut priced: the ones it removed)
    segments: int | None = None  # a quiet deployment's segments; None: the template's (`-c segments`)
    pollers_per_lane: int | None = None  # idle pollers on each lane; None: the template's mappings (lane_pollers)
    platform_lines: bool = True  # Lambda's START/END/REPORT lines (SystemLogLevel INFO, Lambda's default)
    timer_packs_of_one_second: bool = False  # every due second its own timer pack (sparse seconds not joined)
    lane_key_reuse_s: int | None = None  # SQS's data-key reuse period on the lanes; None: the template's
    unaligned_sends: bool = False  # the tick sends as it comes: the model's wait, not the measured ones
    hourly_metrics_added: int = 0  # custom metrics sent every hour beside those measured (a cut priced back)


def bill(m: Measured, rate: float, what_if: WhatIf = WhatIf(), fill: float | None = None) -> dict[str, float]:
    """USD per million executions, line by line, as the template deploys it (each table billed as
    the template bills it); `fill`: the packs' entries (per_execution_counts)."""
    c = per_execution_counts(m, rate, fill, what_if.segments)
    provisioned = provisioned_tables(m.template)
    lines: dict[str, float] = {}
    api = what_if.api or api_type(m.template)
    lines[f"API Gateway ({api.upper()} API)"] = c["create_requests"] * price(f"apigw_{api}")
    requests = c["inv_api"] + c["inv_tick"] + c["inv_worker"]
    lines["Lambda requests"] = requests * price("lambda_request")
    # Durations: the API's calls one after another; the worker's batch lasts its slowest record
    # (records run at once): the wait for the due second (the latest of n uniform instants in the
    # second SQS surfaced them), the target, our calls and our CPU for all records on its vCPU share.
    records = max(c["records_per_batch"], 1.0)
    wait_s = records / (records + 1) if m.scenario.kind == "one-time" else UNALIGNED_WAIT_S
    # Measured (Scenario.timed): the real tick's sends, aligned where it aligns them, and its runs' wait.
    measured = m.worker_wait_s is not None and not what_if.unaligned_sends
    waits = what_if.wait and not what_if.late_instead_of_wait
    wait_s = (m.worker_wait_s if measured else wait_s) if waits else 0.0
    tick_wait_s = m.tick_wait_s if measured and waits else 0.0
    calls_per_record = c["calls_worker"] / max(records, 1) if c["calls_worker"] else 0
    batch_s = wait_s + TARGET_S + calls_per_record * CALL_S + records * WORKER_CPU_PER_RECORD_S / m.worker_vcpu
    # An invocation's duration: each job's calls one after another and our CPU per job (a batch's
    # invocation carries create_batch jobs; its own fixed share is not subtracted: conservative).
    api_s = (c["calls_api"] * CALL_S + API_OWN_S) * m.scenario.create_batch
    tick_s = c["calls_tick_idle"] * CALL_S + tick_wait_s  # the wait: not overlapped with its calls (conservative)
    gb_s = {"api": c["inv_api"] * API_GB * api_s,
            "worker": c["inv_worker"] * (what_if.worker_mb / 1024 if what_if.worker_mb else m.worker_gb) * batch_s,
            "tick": TICK_GB * (c["inv_tick"] * tick_s + TICK_S_PER_TIMER)}
    for fn, v in gb_s.items():
        lines[f"Lambda GB-s {fn}"] = v * MILLION * price("lambda_arm_gb_s")
    units = {k: v for k, v in c.items() if k.startswith(("read:", "write:"))}
    if what_if.timer_packs_of_one_second:
        units["write:Timers"] = units.get("write:Timers", 0.0) + c["timers_wu_joined"]
    for key, v in sorted(units.items()):
        kind, table = key.split(":")
        if table in provisioned:
            unit_hours = v * MILLION / 3600 / PROVISIONED_UTILIZATION
            cost = unit_hours * price("ddb_wcu_hour" if kind == "write" else "ddb_rcu_hour")
        else:
            cost = v * price("ddb_wru" if kind == "write" else "ddb_rru")
        if cost >= 0.005:
            lines[f"DynamoDB {kind}s {table}"] = cost
        else:
            lines["DynamoDB other"] = lines.get("DynamoDB other", 0.0) + cost
    days = {**RETENTION_DAYS, **({"Executions": what_if.retention_days, "Jobs": what_if.retention_days}
                                 if what_if.retention_days else {})}
    stored = dict(m.stored_bytes)
    if m.scenario.kind == "recurring":  # a job's own items are per job: over its runs, as its create
        stored["Jobs"] = stored.get("Jobs", 0.0) * m.executions / m.scenario.jobs / RECURRING_RUNS_PER_JOB
    stored_gb_months = sum(b * days[t] / 30.4 for t, b in stored.items()) * MILLION / GB
    lines["DynamoDB storage (at the retention)"] = stored_gb_months * price("ddb_storage_gb_month")
    lines["DynamoDB PITR"] = stored_gb_months * price("ddb_pitr_gb_month") if what_if.pitr else 0.0
    pollers = lane_pollers(m.template)
    if what_if.pollers_per_lane is not None:
        pollers = [what_if.pollers_per_lane] * len(pollers)
    messages_per_s = rate / max(c["fill"], 1.0)  # a pack is one message
    idle_receives = empty_polls_per_s(pollers, messages_per_s) / rate
    lines["SQS requests"] = (c["sqs"] + idle_receives) * price("sqs_request")
    # KMS: SQS asks for a data key per producer role and lane each reuse period (two requests, per
    # the SQS guide's formula), a Decrypt per consumer; DynamoDB one per table and role. At 10,000/s
    # about 1,000 worker containers each hold their own cache.
    containers = max(1.0, rate * batch_s / records)
    lanes = sum(1 for r in m.template["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping")
    sqs_reuse_s = what_if.lane_key_reuse_s or lane_key_reuse_s(m.template)
    kms_per_s = lanes * (2 * 3 + 1) / sqs_reuse_s + 5 * 3 * containers / KMS_REUSE_S
    kms = has_kms_key(m.template) if what_if.kms is None else what_if.kms
    lines["KMS requests"] = kms_per_s / rate * MILLION / 10_000 * price("kms_request") if kms else 0.0
    percent = m.attempt_log_percent if what_if.attempt_log_percent is None else what_if.attempt_log_percent
    unsampled = c["attempt_ok_worker"] * (1 - percent / 100) if what_if.info_lines else 0.0
    log_bytes = sum(c[f"log_{fn}"] - (0 if what_if.info_lines else c[f"loglines_{fn}"])
                    for fn in ("api", "tick", "worker")) - unsampled \
        + (requests * (PLATFORM_LOG_BYTES + 3 * EVENT_OVERHEAD_BYTES) if what_if.platform_lines else 0.0) \
        + c["create_requests"] * ACCESS_LOG_BYTES
    log_gb = log_bytes * MILLION / GB
    lines["CloudWatch Logs ingestion"] = log_gb * price("logs_ingest_gb")
    lines["CloudWatch Logs storage"] = log_gb * LOG_RETENTION_DAYS / 30.4 * price("logs_store_gb_month")

    def sampled(per_s: float) -> float:
        return 0.0 if per_s <= 0 else (min(per_s, XRAY_RESERVOIR_PER_S) + XRAY_RATE * max(per_s - 1, 0)) / per_s
    traced = traced_functions(m.template) if what_if.tracing is None else what_if.tracing
    traces = sum(c[f"inv_{fn}"] * sampled(c[f"inv_{fn}"] * rate) for fn in ("api", "tick", "worker")) if traced else 0.0
    lines["X-Ray traces"] = traces * price("xray_trace")
    lines["EventBridge rules"] = 0.0
    lines["total"] = sum(lines.values())
    return lines


def traced_functions(tpl: dict) -> bool:
    """Whether the template's functions have Lambda's active tracing (`-c tracing`, active by default)."""
    return any(r["Properties"].get("TracingConfig", {}).get("Mode") == "Active"
               for r in tpl["Resources"].values() if r["Type"] == "AWS::Lambda::Function")


# --- the quiet deployment, priced as the template deploys it -------------------------------------

def hourly_metrics(m: Measured) -> set:
    """The EMF metrics a quiet deployment sends every hour: those of its ticks and its executions
    (the idle and fire phases). CloudWatch meters a custom metric only in the hours it receives
    data (prorated by the hour), so a count sent only when it is not zero costs nothing while all
    is well, and the API's metrics cost only in the hours the API is called."""
    return m.idle.metrics | m.fire.metrics


def alarm_metrics(tpl: dict) -> tuple[int, int]:
    """(alarms, alarm metrics): a standard alarm is billed per metric it evaluates, so an alarm on
    a metric-math expression counts each metric of the expression."""
    alarms = [r["Properties"] for r in tpl["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    metrics = sum(sum(1 for q in a["Metrics"] if "MetricStat" in q) if "Metrics" in a else 1 for a in alarms)
    return len(alarms), metrics


def quiet_month(m_rec: Measured, what_if: WhatIf = WhatIf()) -> dict[str, float]:
    """USD a month of a deployment running one recurring execution a second, with the fixed costs
    (ticks, pollers, key, metrics, alarms, dashboard) counted once."""
    executions = SECONDS_PER_MONTH
    lines = {k: v * executions / MILLION for k, v in bill(m_rec, 1.0, what_if=what_if).items() if k != "total"}
    alarms, alarmed = alarm_metrics(m_rec.template)
    alarmed += what_if.alarm_metrics_added
    dashboards = sum(1 for r in m_rec.template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard")
    hourly = hourly_metrics(m_rec)
    sent = len(hourly) + what_if.hourly_metrics_added
    kms = has_kms_key(m_rec.template) if what_if.kms is None else what_if.kms
    lines["KMS key (+ a rotated version a year)"] = 2 * price("kms_key_month") if kms else 0.0
    lines[f"custom metrics ({len(hourly)} sent every hour; the API's "
          f"{len(m_rec.metrics - hourly)} only in hours it is called)"] = sent * price("metric_month")
    lines[f"alarms ({alarms}, {alarmed} alarm metrics)"] = alarmed * price("alarm_month")
    lines[f"dashboards ({dashboards}, 3 free)"] = max(0, dashboards - 3) * price("dashboard_month")
    lines["total"] = sum(lines.values())
    return lines
