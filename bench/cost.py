"""The bill per million executions, line by line, from the calls the real code makes.

The stack runs in-process on moto under the strict AWS layer (IAM of each role, sizes, capacity
billed per partition key as DynamoDB bills it, index writes included). Every AWS call is counted by
function and operation, every DynamoDB capacity unit by function and table, every byte the
functions log by function, every invocation. Four scenarios: recurring and one-time jobs, each at
full batches (what 10,000 executions a second look like to the worker: ten records a batch) and
one record a second (a quiet deployment). Ticks with nothing due are measured on their own, so the
ticks' fixed cost is amortized at the stated rate instead of over the bench's few jobs.

The counts are priced from one dated price table (PRICES). What is not counted is modelled, each
assumption named beside its figure: Lambda durations (from `bench cpu` and `bench herd`),
X-Ray sampling, the Lambda platform's log lines, the event source mapping's empty polls, KMS data
keys, storage at the stated retention."""
from __future__ import annotations

import io
import json
import logging
import math
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import boto3

from bench.common import NO_QUOTAS, emulator, machine, print_table, template, use_local_aws
from jobsched.handlers.worker import logs_attempt
from jobsched.sizing import TICK_MEMORY_MB, segments_for

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
# The template deploys on-demand tables (no profile provisions one yet): provisioned capacity is a
# what-if, printed beside the figures as deployed and held to no goal.
NOT_DEPLOYED = f"provisioned@{PROVISIONED_UTILIZATION:.0%} (what-if, not deployed)"
CALL_S = 0.006  # one DynamoDB or SQS call from Lambda, in-region
API_OWN_S = 0.015  # our CPU per API request at 512 MB (about 0.29 vCPU)
WORKER_CPU_PER_RECORD_S = 0.0012  # `bench cpu`: 1.2 ms of one core per one-time record (at the worker's vCPU share)
TICK_S_PER_TIMER = 0.00037  # `bench herd`: 10.9 s to hand off 30,000 timers at one vCPU, calls overlapped
TARGET_S = 0.1  # the target's answer
API_GB, TICK_GB = 0.5, TICK_MEMORY_MB / 1024  # the worker's: the template's MemorySize (worker_gb)
PLATFORM_LOG_BYTES = 330  # Lambda's START, END and REPORT lines of one invocation (text format, X-Ray on)
EVENT_OVERHEAD_BYTES = 26  # CloudWatch Logs counts 26 bytes per event beside its message
ACCESS_LOG_BYTES = 290  # one API Gateway access-log line of the stage's format
POLLERS_PER_LANE, LANES = 5, 3  # Lambda's SQS pollers on an idle queue, 20 s long polls
XRAY_RESERVOIR_PER_S, XRAY_RATE = 1.0, 0.05  # Lambda's fixed sampling: 1 a second, then 5 %
KMS_REUSE_S = 300  # SQS's data key reuse period and DynamoDB's table-key cache
LOG_RETENTION_DAYS = 30
RETENTION_DAYS = {"Executions": 30, "Jobs": 30, "Timers": 7}  # per-execution items' life (TTL)
QUIET_SEGMENTS = 4  # the stack's default
RECURRING_RUNS_PER_JOB = 1440  # a recurring job's create, amortized over a day at one run a minute
QUIET_GOAL = 20.0  # USD a month for one recurring execution a second, as deployed by default


class LogMeter(io.TextIOBase):
    """Stands in for stdout while measuring: counts the bytes of each JSON line (Powertools' log
    lines and EMF metrics) by the function that wrote it (its "service"), keeps the metric
    identities EMF creates, and passes other text through."""

    def __init__(self, through) -> None:
        self.through = through
        self.bytes: Counter = Counter()
        self.metrics: set = set()
        self.recent: set = set()  # those sent since the meter last took them (Meter.take_logs)
        self._partial = ""

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            try:
                doc = json.loads(line)
            except ValueError:
                self.through.write(line + "\n")
                continue
            service = str(doc.get("service", "other")).removeprefix("jobsched-") if isinstance(doc, dict) else "other"
            self.bytes[service] += len(line.encode()) + 1
            if isinstance(doc, dict) and "_aws" not in doc:
                self.bytes[f"{service}:lines"] += len(line.encode()) + 1  # log lines, not EMF metrics
                if doc.get("message") == "attempt" and not _always_logged(doc):
                    # measured with every attempt logged; the deployed percent is applied in the bill
                    self.bytes[f"{service}:attempt_ok"] += len(line.encode()) + 1
            for directive in (doc.get("_aws") or {}).get("CloudWatchMetrics", []) if isinstance(doc, dict) else []:
                for dims in directive.get("Dimensions", []):
                    for metric in directive.get("Metrics", []):
                        identity = (metric["Name"], tuple((d, str(doc.get(d))) for d in dims))
                        self.metrics.add(identity)
                        self.recent.add(identity)
        return len(text)

    def flush(self) -> None:
        self.through.flush()


def _always_logged(doc: dict) -> bool:
    """Whether the worker logs this attempt line whatever its sampling percent (its own rule)."""
    from jobsched.service.outcomes import Outcome

    try:
        outcome = Outcome(doc.get("outcome"))
    except ValueError:
        return True
    return logs_attempt(outcome, str(doc.get("executionId") or ""), doc.get("lateMs"), 0)


def deployed_log_bytes(tally: "Tally", percent: int) -> float:
    """The worker's log bytes of a tally (every attempt logged) as deployed: only `percent` of the
    sampled attempt lines kept."""
    return tally.log_bytes["worker"] - (1 - percent / 100) * tally.log_bytes["worker:attempt_ok"]


@dataclass
class Tally:
    calls: Counter = field(default_factory=Counter)  # (function, service, operation)
    sqs_chunks: Counter = field(default_factory=Counter)  # function → 64 KB request chunks
    units: Counter = field(default_factory=Counter)  # (function, table, "read" | "write")
    invocations: Counter = field(default_factory=Counter)
    log_bytes: Counter = field(default_factory=Counter)
    metrics: set = field(default_factory=set)  # EMF metric identities (name, dimensions) sent in the phase


class Meter:
    """Counts into the current phase's tally: calls (botocore events), capacity (the strict
    layer's ledger), invocations, log bytes."""

    def __init__(self) -> None:
        self.phases: dict[str, Tally] = defaultdict(Tally)
        self.phase = "setup"
        self.tables: dict[str, str] = {}  # physical name → logical
        self.log: LogMeter | None = None

    @property
    def tally(self) -> Tally:
        return self.phases[self.phase]

    def who(self) -> str:
        from jobsched.local.strict_aws import current_function

        return current_function.get() or "esm"  # calls outside a function: the event source mapping's

    def attach(self, session) -> None:
        session.events.register("provide-client-params.*.*", self._before)
        session.events.register("after-call.*.*", self._after)

    def _before(self, params, model, **kwargs):
        service = model.service_model.service_name
        self.tally.calls[(self.who(), service, model.name)] += 1
        if service == "sqs":
            size = len(json.dumps(params, default=str).encode())
            self.tally.sqs_chunks[self.who()] += max(1, math.ceil(size / (64 * 1024)))

    def _after(self, http_response, parsed, model, **kwargs):
        if model.service_model.service_name == "sqs" and model.name == "ReceiveMessage" and not parsed.get("Messages"):
            # An empty poll: Lambda's pollers make these at a fixed rate (modelled), not per job.
            self.tally.calls[(self.who(), "sqs", "ReceiveMessage")] -= 1
            self.tally.sqs_chunks[self.who()] -= 1

    def watch_capacity(self, strict) -> None:
        ledger = strict.ledger
        original = ledger.bill

        def bill(key: str, second: int, rcu: float = 0.0, wcu: float = 0.0) -> None:
            physical = key.split("[", 1)[0].split("/", 1)[0]
            table = self.tables.get(physical, physical)
            if rcu:
                self.tally.units[(self.who(), table, "read")] += rcu
            if wcu:
                self.tally.units[(self.who(), table, "write")] += wcu
            original(key, second, rcu=rcu, wcu=wcu)
        ledger.bill = bill

    def count_invocations(self, functions: dict) -> None:
        for name, function in functions.items():
            original = function.invoke

            def counted(event, _original=original, _name=name):
                self.tally.invocations[_name] += 1
                return _original(event)
            function.invoke = counted

    def take_logs(self) -> None:
        if self.log:
            for service, n in self.log.bytes.items():
                self.tally.log_bytes[service] += n
            self.log.bytes.clear()
            self.tally.metrics |= self.log.recent
            self.log.recent.clear()


class NoopTarget:
    def invoke(self, job, dispatch, attempt, callback_token=None, progress=None):
        from jobsched.domain.executions import AttemptOutcome, ExecutionStatus

        return AttemptOutcome(True, ExecutionStatus.SUCCEEDED)


@dataclass
class Scenario:
    name: str
    kind: str  # "recurring" | "one-time"
    jobs: int
    create_gap_ms: int  # between creates
    fire_minutes: int
    expect: bool = False  # absence alerts: each fire checked at its deadline (expect.successWithinSec)
    tenants: int = 1  # jobs created round robin by this many tenants (lane shares: a slot per tenant a batch)
    create_batch: int = 1  # jobs a create request carries (POST /v1/jobs/batch when more than one)
    # Minutes run, not counted, between the creates and the fire phase: the fires of the first
    # minutes of new jobs are sent one by one by their writers (direct dispatch), the later ones
    # by the tick in packs.
    settle_minutes: int = 0

    def keys(self) -> dict[str, str]:
        return {"bench": "bench-key"} if self.tenants == 1 else {f"bench{t}": f"bench-key-{t}" for t in range(self.tenants)}

    def key(self, i: int) -> str:
        return "bench-key" if self.tenants == 1 else f"bench-key-{i % self.tenants}"

    def body(self, i: int) -> dict:
        body = {"name": f"c{i}", "target": {"type": "HTTP", "url": "http://127.0.0.1:9/x"}, "payload": {"i": i}}
        if self.kind == "recurring":
            body.update(type="RATE", schedule="PT1M")
        else:
            # Created more than the look-ahead ahead, so the tick hands them off in batches (a job due
            # within 3 minutes is sent by the API itself: one more SQS request).
            body.update(type="DELAYED", delaySeconds=240)
        if self.expect:
            body["expect"] = {"successWithinSec": 120}
        return body


@dataclass
class Measured:
    scenario: Scenario
    executions: int
    idle: Tally  # ticks with nothing due
    idle_tick_runs: int
    create: Tally
    fire: Tally
    stored_bytes: dict[str, float]  # table → bytes stored per execution (items + 100 B each)
    metrics: set
    template: dict
    pack_fill: float = 0.0  # entries per pack item (the pack path's fill in this scenario)

    @property
    def worker_gb(self) -> float:
        """The worker's memory as deployed (GB): its GB-seconds are priced at the template's size."""
        return worker_function(self.template)["Properties"]["MemorySize"] / 1024

    @property
    def worker_vcpu(self) -> float:
        """The worker's share of a vCPU as deployed (Lambda: one vCPU at 1,769 MB)."""
        return self.worker_gb * 1024 / 1769

    @property
    def attempt_log_percent(self) -> int:
        """The percent of succeeded attempts the deployed worker logs (its ATTEMPT_LOG_PERCENT; the
        function's own default, 100, when the template does not set it)."""
        from jobsched.settings import Env

        variables = worker_function(self.template)["Properties"].get("Environment", {}).get("Variables", {})
        return int(variables.get(Env.ATTEMPT_LOG_PERCENT, 100))


def worker_function(tpl: dict) -> dict:
    from jobsched.settings import Env

    for resource in tpl["Resources"].values():
        variables = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
        if resource["Type"] == "AWS::Lambda::Function" and variables.get(Env.SERVICE_NAME) == "jobsched-worker":
            return resource
    raise LookupError("the template has no worker function")


IDLE_MINUTES = 3
# Every attempt line is measured (the deployed sampling keeps 1 % of the succeeded ones: too few to
# size at the bench's counts); the bill applies the template's percent to the succeeded ones.
EVERY_ATTEMPT_LOGGED = {**NO_QUOTAS, "worker": {"ATTEMPT_LOG_PERCENT": "100"}}


def measure(scenario: Scenario, idle_minutes: int = IDLE_MINUTES) -> Measured:
    from jobsched.domain.clock import FakeClock
    from jobsched.domain.item_size import item_bytes as item_size
    from jobsched.local.inprocess import InProcessStack

    clock = FakeClock(1_893_456_000_000 + 5_000)  # 2030-01-01T00:00:05Z
    meter = Meter()
    with emulator(clock), capture_logs(meter):
        session = boto3.session.Session(region_name="us-east-1")
        meter.attach(session)
        tpl = template()
        stack = InProcessStack(tpl, clock, invoker=NoopTarget(), session=session, keys=scenario.keys(),
                               env_overrides=EVERY_ATTEMPT_LOGGED)
        env = stack.envs["worker"]
        from jobsched.settings import Env
        meter.tables = {env[Env.JOBS_TABLE]: "Jobs", env[Env.TIMERS_TABLE]: "Timers",
                        env[Env.EXECUTIONS_TABLE]: "Executions", env[Env.SEGMENTS_TABLE]: "Segments",
                        stack.envs["api"][Env.API_KEYS_TABLE]: "ApiKeys"}
        meter.watch_capacity(stack.strict)
        meter.count_invocations({"api": stack.api, "tick": stack.tick_fn, "worker": stack.worker})
        meter.take_logs()
        meter.phase = "idle"
        stack.advance(idle_minutes * 60)
        meter.take_logs()
        meter.phase = "create"
        for first in range(0, scenario.jobs, scenario.create_batch):
            group = range(first, min(first + scenario.create_batch, scenario.jobs))
            if scenario.create_batch == 1:
                status, answer = stack.request("POST", "/v1/jobs", scenario.body(first), key=scenario.key(first))
                assert status == 201, answer
            else:
                status, answer = stack.request("POST", "/v1/jobs/batch", {"jobs": [scenario.body(i) for i in group]},
                                               key=scenario.key(first))
                assert status == 200 and {r["status"] for r in answer["results"]} == {201}, answer
            clock.advance_ms(scenario.create_gap_ms * len(group))
        meter.take_logs()
        if scenario.settle_minutes:
            meter.phase = "settle"
            stack.advance(scenario.settle_minutes * 60)
            meter.take_logs()
        meter.phase = "count"  # the bench's own scan, billed to no phase
        before = count_executions(stack.stores.executions._table)
        meter.phase = "fire"
        stack.advance(scenario.fire_minutes * 60)
        meter.take_logs()
        meter.phase = "after"
        meter.phase = "count"
        after = count_executions(stack.stores.executions._table)
        executions, packs, filled = (a - b for a, b in zip(after, before))
        stored_per = max(after[0], 1)  # what is stored, over every execution stored
        meter.pack_fill = filled / packs if packs else 0.0
        stored: dict[str, float] = {}
        for physical, logical in meter.tables.items():
            if logical not in RETENTION_DAYS:
                continue
            items = session.resource("dynamodb").Table(physical).scan()["Items"]
            stored[logical] = sum(item_size(i) + 100 for i in items)
    idle = meter.phases["idle"]
    return Measured(scenario, executions, idle, idle.invocations["tick"], meter.phases["create"],
                    meter.phases["fire"], {t: b / stored_per for t, b in stored.items()},
                    set(meter.log.metrics) if meter.log else set(), tpl, meter.pack_fill)


def count_executions(table) -> tuple[int, int, int]:
    """Executions recorded (their own items, and the entries of pack items that never left their
    pack), pack items, and the entries those packs carried (their fill)."""
    own = packs = filled = 0
    for item in scan_all(table):
        if str(item["jobId"]).startswith("pack#"):
            packs += 1
            outcomes = item.get("outcomes") or {}
            filled += len(outcomes)
            own += sum(1 for o in outcomes.values() if o.get("s") == "SUCCEEDED")
        else:
            own += 1
    return own, packs, filled


def scan_all(table) -> list[dict]:
    items, kwargs = [], {}
    while True:
        page = table.scan(**kwargs)
        items += page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class capture_logs:
    """Points stdout, and every logging handler writing to it, at the meter's LogMeter (at INFO,
    the level deployed), and back after."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    def __enter__(self):
        import os

        self.before = sys.stdout
        self.level = os.environ.get("POWERTOOLS_LOG_LEVEL")
        os.environ["POWERTOOLS_LOG_LEVEL"] = "INFO"
        self.meter.log = LogMeter(self.before)
        sys.stdout = self.meter.log
        self.moved = []
        for logger in [logging.getLogger(), *(l for l in logging.Logger.manager.loggerDict.values()
                                                if isinstance(l, logging.Logger))]:
            for handler in logger.handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream in (self.before, sys.__stdout__):
                    self.moved.append((handler, handler.stream))
                    handler.setStream(self.meter.log)
            if logger.name.startswith("jobsched") and logger.level > logging.INFO:
                self.moved.append((logger, logger.level))
                logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc):
        import os

        sys.stdout = self.before
        for thing, old in self.moved:
            if isinstance(thing, logging.Logger):
                thing.setLevel(old)
            else:
                thing.setStream(old)
        if self.level is None:
            os.environ.pop("POWERTOOLS_LOG_LEVEL", None)
        else:
            os.environ["POWERTOOLS_LOG_LEVEL"] = self.level
        return False


# --- the bill -----------------------------------------------------------------------------------

def api_type(tpl: dict) -> str:
    types = {r["Type"] for r in tpl["Resources"].values()}
    return "http" if "AWS::ApiGatewayV2::Api" in types else "rest"


def per_execution_counts(m: Measured, rate: float) -> dict:
    """What one execution costs in counted things at `rate`: the fire phase, the create (a
    one-time job's own, a recurring job's spread over RECURRING_RUNS_PER_JOB), and the ticks'
    fixed share at the stated rate instead of the bench's."""
    n = max(m.executions, 1)
    creates = (m.scenario.jobs / n) if m.scenario.kind == "one-time" else 1 / RECURRING_RUNS_PER_JOB
    per_create = 1 / m.scenario.jobs
    tick_runs_fire = m.fire.invocations["tick"]
    idle_runs = max(m.idle_tick_runs, 1)
    segments = segments_for(rate * 60) if rate > 1 else QUIET_SEGMENTS
    tick_runs_per_execution = segments / (rate * 60)

    def mix(get) -> float:
        """fire/n (minus the ticks' fixed part at the bench's count) + fixed at the rate + creates."""
        fire = get(m.fire) - get(m.idle) * tick_runs_fire / idle_runs
        return fire / n + get(m.idle) / idle_runs * tick_runs_per_execution + get(m.create) * per_create * creates

    out: dict = {"creates": creates, "tick_runs": tick_runs_per_execution + 0.0,
                 "create_requests": creates / m.scenario.create_batch}
    for fn in ("api", "tick", "worker"):
        out[f"inv_{fn}"] = mix(lambda t, fn=fn: t.invocations[fn])
        out[f"log_{fn}"] = mix(lambda t, fn=fn: t.log_bytes[fn])
        out[f"loglines_{fn}"] = mix(lambda t, fn=fn: t.log_bytes[f"{fn}:lines"])
    out["attempt_ok_worker"] = mix(lambda t: t.log_bytes["worker:attempt_ok"])  # lines the deployed percent samples
    out["inv_tick"] = tick_runs_per_execution  # a tick run is fixed; its timers are in its duration
    tables = sorted({k[1] for t in (m.fire, m.create, m.idle) for k in t.units})
    for table in tables:
        for kind in ("read", "write"):
            out[f"{kind}:{table}"] = mix(lambda t, table=table, kind=kind:
                                         sum(v for (f, tb, k), v in t.units.items() if tb == table and k == kind))
    out["sqs"] = mix(lambda t: sum(t.sqs_chunks.values()))
    out["calls_worker"] = m.fire.calls and sum(v for (f, s, o), v in m.fire.calls.items() if f == "worker") / n
    out["calls_api"] = sum(v for (f, s, o), v in m.create.calls.items() if f == "api") / m.scenario.jobs
    out["calls_tick_idle"] = sum(v for (f, s, o), v in m.idle.calls.items() if f == "tick") / idle_runs
    out["records_per_batch"] = n / max(m.fire.invocations["worker"], 1)
    return out


@dataclass(frozen=True)
class WhatIf:
    """A lever priced on the same counts: another API type, retention, PITR, no wait for the due
    second, no INFO log lines."""
    api: str | None = None
    retention_days: int | None = None
    pitr: bool = True
    wait: bool = True
    info_lines: bool = True
    attempt_log_percent: int | None = None  # None: the template's
    tracing: bool | None = None  # Lambda's active tracing; None: the template's (`-c tracing`)


def bill(m: Measured, rate: float, provisioned: bool = False, what_if: WhatIf = WhatIf()) -> dict[str, float]:
    """USD per million executions, line by line."""
    c = per_execution_counts(m, rate)
    lines: dict[str, float] = {}
    api = what_if.api or api_type(m.template)
    lines[f"API Gateway ({api.upper()} API)"] = c["create_requests"] * price(f"apigw_{api}")
    requests = c["inv_api"] + c["inv_tick"] + c["inv_worker"]
    lines["Lambda requests"] = requests * price("lambda_request")
    # Durations: the API's calls one after another; the worker's batch lasts its slowest record
    # (records run at once): the wait for the due second (the latest of n uniform instants in the
    # second SQS surfaced them), the target, our calls and our CPU for all records on its vCPU share.
    records = max(c["records_per_batch"], 1.0)
    wait_s = records / (records + 1) if m.scenario.kind == "one-time" else 0.5
    wait_s = wait_s if what_if.wait else 0.0
    calls_per_record = c["calls_worker"] / max(records, 1) if c["calls_worker"] else 0
    batch_s = wait_s + TARGET_S + calls_per_record * CALL_S + records * WORKER_CPU_PER_RECORD_S / m.worker_vcpu
    # An invocation's duration: each job's calls one after another and our CPU per job (a batch's
    # invocation carries create_batch jobs; its own fixed share is not subtracted: conservative).
    api_s = (c["calls_api"] * CALL_S + API_OWN_S) * m.scenario.create_batch
    tick_s = c["calls_tick_idle"] * CALL_S  # a run's fixed calls, then each timer
    gb_s = {"api": c["inv_api"] * API_GB * api_s,
            "worker": c["inv_worker"] * m.worker_gb * batch_s,
            "tick": TICK_GB * (c["inv_tick"] * tick_s + TICK_S_PER_TIMER)}
    for fn, v in gb_s.items():
        lines[f"Lambda GB-s {fn}"] = v * MILLION * price("lambda_arm_gb_s")
    units = {k: v for k, v in c.items() if k.startswith(("read:", "write:"))}
    for key, v in sorted(units.items()):
        kind, table = key.split(":")
        if provisioned:
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
    idle_receives = LANES * POLLERS_PER_LANE * 3 / 60 / rate if rate < 100 else 0.0  # busy pollers find work
    lines["SQS requests"] = (c["sqs"] + idle_receives) * price("sqs_request")
    # KMS: SQS asks for a data key per producer role and lane each reuse period (two requests, per
    # the SQS guide's formula), a Decrypt per consumer; DynamoDB one per table and role. At 10,000/s
    # about 1,000 worker containers each hold their own cache.
    containers = max(1.0, rate * batch_s / records)
    kms_per_s = (LANES * (2 * 3 + 1) + 5 * 3 * containers) / KMS_REUSE_S
    lines["KMS requests"] = kms_per_s / rate * MILLION / 10_000 * price("kms_request")
    percent = m.attempt_log_percent if what_if.attempt_log_percent is None else what_if.attempt_log_percent
    unsampled = c["attempt_ok_worker"] * (1 - percent / 100) if what_if.info_lines else 0.0
    log_bytes = sum(c[f"log_{fn}"] - (0 if what_if.info_lines else c[f"loglines_{fn}"])
                    for fn in ("api", "tick", "worker")) - unsampled \
        + requests * (PLATFORM_LOG_BYTES + 3 * EVENT_OVERHEAD_BYTES) + c["create_requests"] * ACCESS_LOG_BYTES
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
    dashboards = sum(1 for r in m_rec.template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard")
    hourly = hourly_metrics(m_rec)
    lines["KMS key (+ a rotated version a year)"] = 2 * price("kms_key_month")
    lines[f"custom metrics ({len(hourly)} sent every hour; the API's "
          f"{len(m_rec.metrics - hourly)} only in hours it is called)"] = len(hourly) * price("metric_month")
    lines[f"alarms ({alarms}, {alarmed} alarm metrics)"] = alarmed * price("alarm_month")
    lines[f"dashboards ({dashboards}, 3 free)"] = max(0, dashboards - 3) * price("dashboard_month")
    lines["total"] = sum(lines.values())
    return lines


# Packs: 400 jobs created within one second (4 batch creates), so that their fires share a due
# second in each of the template's segments, as 10,000 a second fill them (bench e2e): the pack
# path priced at that fill, not at an assumed one.
PACKED = "recurring, packs filled as at 10,000/s"
SCENARIOS_FULL = [Scenario(PACKED, "recurring", 400, 1, 4, create_batch=100, settle_minutes=5),
                  Scenario("recurring, full batches", "recurring", 100, 20, 10),
                  Scenario("one-time, full batches", "one-time", 400, 20, 6),
                  Scenario("recurring, 1 a second", "recurring", 60, 1000, 5),
                  Scenario("one-time, 1 a second", "one-time", 120, 1000, 6),
                  Scenario("one-time, created in batches of 100", "one-time", 400, 20, 6, create_batch=100)]
SCENARIOS_QUICK = [Scenario(PACKED, "recurring", 400, 1, 2, create_batch=100, settle_minutes=5),
                   Scenario("recurring, full batches", "recurring", 20, 20, 2),
                   Scenario("one-time, full batches", "one-time", 20, 20, 5),
                   Scenario("recurring, 1 a second", "recurring", 5, 1000, 1),
                   Scenario("one-time, 1 a second", "one-time", 5, 1000, 5),
                   Scenario("one-time, created in batches of 100", "one-time", 100, 20, 5, create_batch=100)]


def main(argv: list[str] | None = None) -> None:
    use_local_aws()
    quick = "--quick" in (argv or sys.argv[1:])
    print(f"cost: the real code's calls, counted in-process on moto under the strict AWS layer, on {machine()}")
    measured = {s.name: measure(s, 1 if quick else IDLE_MINUTES) for s in (SCENARIOS_QUICK if quick else SCENARIOS_FULL)}
    first = next(iter(measured.values()))
    print_table(f"Price table (us-east-1, read {PRICE_DATE})",
                [(k, f"{v[0]:g}", v[1], v[2], v[3]) for k, v in PRICES.items()],
                ("line", "USD", "unit", "page", "seen in"))
    rows = []
    for name, m in measured.items():
        n = max(m.executions, 1)
        calls = Counter()
        for (f, s, o), v in m.fire.calls.items():
            calls[f] += v
        units = Counter()
        for (f, t, k), v in m.fire.units.items():
            units[(t, k)] += v
        rows.append((name, m.executions, f"{m.pack_fill:.1f}", f"{n / max(m.fire.invocations['worker'], 1):.1f}",
                     f"{calls['worker'] / n:.2f}", f"{calls['tick'] / n:.2f}", f"{calls['esm'] / n:.2f}",
                     f"{sum(v for (t, k), v in units.items() if k == 'write') / n:.2f}",
                     f"{sum(v for (t, k), v in units.items() if k == 'read') / n:.2f}",
                     f"{deployed_log_bytes(m.fire, m.attempt_log_percent) / n:.0f}",
                     f"{sum(v for (f, s, o), v in m.create.calls.items() if f == 'api') / m.scenario.jobs:.2f}",
                     f"{sum(v for (f, t, k), v in m.create.units.items() if k == 'write') / m.scenario.jobs:.2f}",
                     f"{m.create.log_bytes['api'] / m.scenario.jobs:.0f}",
                     " ".join(f"{t}:{b:.0f}" for t, b in m.stored_bytes.items())))
    print_table("Measured per execution (fire: ticks and worker; create: per created job)", rows,
                ("scenario", "executions", "pack fill", "executions/invocation", "worker calls", "tick calls", "ESM calls",
                 "fire WU", "fire RU", "worker log B (as deployed)", "create calls", "create WU", "create log B",
                 "stored B per execution"))
    idle = first.idle
    print(f"\nA tick run with nothing due: {sum(v for (f, s, o), v in idle.calls.items() if f == 'tick') / max(first.idle_tick_runs, 1):.1f} "
          f"calls, {sum(v for (f, t, k), v in idle.units.items() if k == 'write') / max(first.idle_tick_runs, 1):.1f} WU, "
          f"{sum(v for (f, t, k), v in idle.units.items() if k == 'read') / max(first.idle_tick_runs, 1):.1f} RU, "
          f"{idle.log_bytes['tick'] / max(first.idle_tick_runs, 1):.0f} log bytes")
    columns = []
    for kind, full, quiet in (("recurring", PACKED, "recurring, 1 a second"),
                              ("one-time", "one-time, full batches", "one-time, 1 a second")):
        columns += [(f"{kind} 10,000/s on-demand", bill(measured[full], 10_000.0)),
                    (f"{kind} 10,000/s {NOT_DEPLOYED}", bill(measured[full], 10_000.0, True)),
                    (f"{kind} 1/s on-demand", bill(measured[quiet], 1.0))]
    columns.append(("one-time in batches of 100, 10,000/s on-demand",
                    bill(measured["one-time, created in batches of 100"], 10_000.0)))
    names = list(dict.fromkeys(k for _, b in columns for k in b if k != "total")) + ["total"]
    print_table("Modelled cost per million executions (USD), by line",
                [(line, *(f"{b.get(line, 0.0):.3f}" for _, b in columns)) for line in names],
                ("line", *(c for c, _ in columns)))
    goals = {"recurring 10,000/s on-demand": 2.00, "one-time 10,000/s on-demand": 2.50,
             "one-time in batches of 100, 10,000/s on-demand": 1.00}
    print("\nGoals: " + "; ".join(
        f"{c}: {b['total']:.2f} against {goals[c]:.2f} ({'met' if b['total'] <= goals[c] else 'missed'})"
        for c, b in columns if c in goals))
    levers = [("as deployed", WhatIf(), ""),
              ("REST API (-c api=rest; the HTTP API gives up X-Ray on the API hop, WAF, execution logs)",
               WhatIf(api="rest"), "nothing: $2.50 more per million creates"),
              ("execution retention 7 days (not 30)", WhatIf(retention_days=7), "history readable 7 days"),
              ("PITR off", WhatIf(pitr=False), "restore to a point in the last 35 days"),
              ("no wait for the due second", WhatIf(wait=False), "sub-second precision: calls up to 1 s early"),
              ("every attempt logged (-c attemptLogPercent=100; 1 as deployed)", WhatIf(attempt_log_percent=100),
               "nothing: the line of each succeeded attempt"),
              ("no INFO log lines (metrics kept)", WhatIf(info_lines=False), "the per-attempt and per-create lines"),
              ("X-Ray tracing on (-c tracing=on; off as deployed)", WhatIf(tracing=True),
               "nothing: the functions' X-Ray traces and service map, at this price")]
    rows = []
    for label, what_if, gives in levers:
        figures = [bill(measured[name], 10_000.0, prov, what_if)["total"] for name, prov in (
            (PACKED, False), (PACKED, True), ("one-time, full batches", False),
            ("one-time, full batches", True))]
        rows.append((label, *(f"{f:.3f}" for f in figures), gives))
    print_table("Levers at 10,000/s, priced on the same counts (USD per million executions)", rows,
                ("lever", "recurring on-demand", f"recurring {NOT_DEPLOYED}", "one-time on-demand",
                 f"one-time {NOT_DEPLOYED}",
                 "gives up"))
    quiet = measured["recurring, 1 a second"]
    month = quiet_month(quiet)
    print_table("A quiet deployment: one recurring execution a second for a month (USD), as deployed by default",
                [(k, f"{v:.2f}") for k, v in month.items()], ("line", "USD a month"))
    print(f"goal: at most {QUIET_GOAL:.2f} USD a month ({'met' if month['total'] <= QUIET_GOAL else 'missed'})")
    print("metrics sent every hour: " + ", ".join(sorted(
        name + "".join(f"[{d}={v}]" for d, v in dims if d != "service") for name, dims in hourly_metrics(quiet))))
    traced = traced_functions(quiet.template)
    other = quiet_month(quiet, WhatIf(tracing=not traced))["total"]
    print(f"the same with -c tracing={'off' if traced else 'on'}: {other:.2f} USD a month (X-Ray: Lambda's "
          f"fixed sampling traces nearly every invocation at one a second)")
    print(f"\nAssumptions: DynamoDB provisioned at {PROVISIONED_UTILIZATION:.0%} utilization (auto scaling's target); "
          f"a call {CALL_S * 1000:g} ms; API {API_GB} GB, {API_OWN_S * 1000:g} ms of our CPU + its calls; worker "
          f"{first.worker_gb:g} GB (the template's), a batch = the wait for its latest record's instant + target {TARGET_S} s + a record's calls "
          f"+ {WORKER_CPU_PER_RECORD_S / first.worker_vcpu * 1000:.1f} ms CPU per record; tick {TICK_GB:.2f} GB, a run's fixed calls + "
          f"{TICK_S_PER_TIMER * 1000:.2f} ms per timer; segments by the sizing rule at 10,000/s "
          f"({segments_for(600_000)}), {QUIET_SEGMENTS} at 1/s; logs at INFO as deployed (measured) + "
          f"{PLATFORM_LOG_BYTES} B of platform lines per invocation + {EVENT_OVERHEAD_BYTES} B per event, "
          f"{ACCESS_LOG_BYTES} B per API access-log line, kept {LOG_RETENTION_DAYS} days; X-Ray's fixed Lambda "
          f"sampling ({XRAY_RESERVOIR_PER_S:g}/s + {XRAY_RATE:.0%}) per function; stored items (measured sizes + 100 B) "
          f"kept {RETENTION_DAYS} days, PITR on; {LANES} lanes x {POLLERS_PER_LANE} idle pollers x 3 long polls a "
          f"minute; KMS data keys reused {KMS_REUSE_S} s; a recurring job's create over {RECURRING_RUNS_PER_JOB} runs; "
          f"free tiers not subtracted.")
    if not quick or "--expect" in (argv or sys.argv[1:]):  # `--quick --expect`: with the quick plans
        expectation_overhead(measured["recurring, full batches"], quick)
    if not quick or "--tenants" in (argv or sys.argv[1:]):
        tenants_overhead(measured["recurring, full batches"], quick)


def tenants_overhead(plain: Measured, quick: bool, tenants: int = 10) -> None:
    """Lane shares with many tenants: the scenarios above have one tenant, whose batch of ten records
    costs one slot take and give-back per bound. The same recurring jobs created by `tenants`
    tenants put records of several tenants in a batch, each with its own slot."""
    base = plain.scenario
    many = measure(Scenario(f"{base.name}, {tenants} tenants", base.kind, base.jobs, base.create_gap_ms,
                            base.fire_minutes, tenants=tenants), 1 if quick else IDLE_MINUTES)
    rows = []
    for m in (plain, many):
        n = max(m.executions, 1)
        jobs_wu = sum(v for (f, t, k), v in m.fire.units.items() if k == "write" and t == "Jobs") / n
        all_wu = sum(v for (f, t, k), v in m.fire.units.items() if k == "write") / n
        rows.append((m.scenario.name, m.scenario.tenants, f"{n / max(m.fire.invocations['worker'], 1):.1f}",
                     f"{jobs_wu:.2f}", f"{all_wu:.2f}", f"{bill(m, 10_000.0)['total']:.3f}",
                     f"{bill(m, 10_000.0, True)['total']:.3f}"))
    print_table("Lane shares and tenants: the same recurring jobs, one tenant or several (per execution)", rows,
                ("scenario", "tenants", "records/batch", "fire WU on Jobs (lane slots)", "fire WU",
                 "USD/million on-demand", f"USD/million {NOT_DEPLOYED}"))


def expectation_overhead(plain: Measured, quick: bool) -> None:
    """Absence alerts: what `expect` adds per execution (the expectation met, as in a healthy job):
    the same recurring jobs with and without it, the difference in counted things and in the bill."""
    base = plain.scenario
    expecting = measure(Scenario(base.name + ", expect", base.kind, base.jobs, base.create_gap_ms,
                                 base.fire_minutes, expect=True), 1 if quick else IDLE_MINUTES)
    million = 1_000_000
    rows = []
    for label, get in (("worker calls", lambda m: sum(v for (f, s, o), v in m.fire.calls.items() if f == "worker")),
                       ("tick calls", lambda m: sum(v for (f, s, o), v in m.fire.calls.items() if f == "tick")),
                       ("fire write units", lambda m: sum(v for (f, t, k), v in m.fire.units.items() if k == "write")),
                       ("fire read units", lambda m: sum(v for (f, t, k), v in m.fire.units.items() if k == "read")),
                       ("worker invocations", lambda m: m.fire.invocations["worker"])):
        a, b = (get(m) / max(m.executions, 1) * million for m in (plain, expecting))
        rows.append((label, f"{a:,.0f}", f"{b:,.0f}", f"{b - a:+,.0f}"))
    print_table("Absence alerts (expect met): per million executions", rows,
                ("counted", "recurring", "with expect", "added"))
    before, after = (bill(m, 10_000.0)["total"] for m in (plain, expecting))
    print(f"modelled cost per million executions at 10,000/s (on-demand): {before:.3f} -> {after:.3f} USD "
          f"({after - before:+.3f})")


if __name__ == "__main__":
    main()
