"""bench cost's measurement: the stack run in-process on moto under the strict AWS layer, every
call, capacity unit, logged byte and invocation counted per function (see bench/cost.py)."""
from __future__ import annotations

import io
import json
import logging
import math
import random
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import boto3

from bench.common import NO_QUOTAS, deployed_template, emulator
from bench.cost_prices import RETENTION_DAYS
from jobsched.handlers.worker import logs_attempt


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
    # Timers write units that packs of one due second each would have written beyond those written
    # (a run of sparse seconds in one pack: domain/timer_packs.py second_runs), the same timers.
    timers_wu_joined: float = 0.0
    # Each lane message sent: how long before its due instant SQS makes it visible (its send's
    # instant plus its DelaySeconds), what the worker that receives it waits (Scenario.timed).
    early_ms: list = field(default_factory=list)
    busy_ms: Counter = field(default_factory=Counter)  # function → ms of the clock its invocations lasted


class Meter:
    """Counts into the current phase's tally: calls (botocore events), capacity (the strict
    layer's ledger), invocations, log bytes."""

    def __init__(self) -> None:
        self.phases: dict[str, Tally] = defaultdict(Tally)
        self.phase = "setup"
        self.tables: dict[str, str] = {}  # physical name → logical
        self.log: LogMeter | None = None
        self.clock = None
        self.open_pack = None  # a lane message's pack (the stack's seal), once the stack exists

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
            if model.name == "SendMessageBatch" and self.open_pack is not None:
                now = self.clock.now_ms()
                for entry in params.get("Entries", []):
                    due = self.open_pack(entry["MessageBody"]).due_ms
                    self.tally.early_ms.append(max(0, due - (now + entry.get("DelaySeconds", 0) * 1000)))

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
                started = self.clock.now_ms()
                try:
                    return _original(event)
                finally:
                    self.tally.busy_ms[_name] += self.clock.now_ms() - started
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


AHEAD_S = 600


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
    # One-time jobs: created this long before their fire (AHEAD_S: as a scheduler's one-time jobs are).
    lead_s: int = 0
    # Settle and fire phases run each segment's tick at its own instant of the minute and deliver each
    # lane message as SQS makes it visible (advance_timed): the worker's wait for the due second and
    # the tick's wait before its sends (aligned sends) are then measured through the real code.
    timed: bool = False

    def keys(self) -> dict[str, str]:
        return {"bench": "bench-key"} if self.tenants == 1 else {f"bench{t}": f"bench-key-{t}" for t in range(self.tenants)}

    def key(self, i: int) -> str:
        return "bench-key" if self.tenants == 1 else f"bench-key-{i % self.tenants}"

    def body(self, i: int) -> dict:
        body = {"name": f"c{i}", "target": {"type": "HTTP", "url": "http://127.0.0.1:9/x"}, "payload": {"i": i}}
        if self.kind == "recurring":
            body.update(type="RATE", schedule="PT1M")
        else:
            # Created ahead (10 minutes), so the tick hands them off in packs; a job due within 3
            # minutes (lead_s 20: the short-lead scenario) is sent by the API itself, alone.
            body.update(type="DELAYED", delaySeconds=self.lead_s or AHEAD_S)
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
    pack_capacity: int = 0  # entries of this scenario's jobs that fit one lane message (its bytes)
    # Scenario.timed: the mean earliness of the lane messages sent in the fire phase (what the worker
    # waits for a fire's instant, s) and the mean clock time of a tick run (its wait before its sends).
    worker_wait_s: float | None = None
    tick_wait_s: float | None = None

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
    with emulator(clock), capture_logs(meter), count_joined_seconds(meter):
        session = boto3.session.Session(region_name="us-east-1")
        meter.attach(session)
        tpl = deployed_template()
        stack = InProcessStack(tpl, clock, invoker=NoopTarget(), session=session, keys=scenario.keys(),
                               env_overrides=EVERY_ATTEMPT_LOGGED)
        env = stack.envs["worker"]
        from jobsched.settings import Env
        meter.tables = {env[Env.JOBS_TABLE]: "Jobs", env[Env.TIMERS_TABLE]: "Timers",
                        env[Env.EXECUTIONS_TABLE]: "Executions", env[Env.SEGMENTS_TABLE]: "Segments",
                        stack.envs["api"][Env.API_KEYS_TABLE]: "ApiKeys"}
        meter.watch_capacity(stack.strict)
        meter.clock = clock
        meter.open_pack = stack.stores.lanes.seal.open_pack
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
        ticks = random.Random(scenario.name)

        def advance(seconds: float) -> None:
            return advance_timed(stack, clock, seconds, ticks) if scenario.timed else stack.advance(seconds)
        if scenario.settle_minutes:
            meter.phase = "settle"
            advance(scenario.settle_minutes * 60)
            meter.take_logs()
        meter.phase = "count"  # the bench's own scan, billed to no phase
        before = count_executions(stack.stores.executions._table)
        meter.phase = "fire"
        advance(scenario.fire_minutes * 60)
        meter.take_logs()
        meter.phase = "after"
        meter.phase = "count"
        after = count_executions(stack.stores.executions._table)
        executions, packs, filled = (a - b for a, b in zip(after, before))
        stored_per = max(after[0], 1)  # what is stored, over every execution stored
        meter.pack_fill = filled / packs if packs else 0.0
        stored: dict[str, float] = {}
        capacity = 0
        for physical, logical in meter.tables.items():
            if logical not in RETENTION_DAYS:
                continue
            items = session.resource("dynamodb").Table(physical).scan()["Items"]
            stored[logical] = sum(item_size(i) + 100 for i in items)
            if logical == "Jobs":
                capacity = pack_capacity(items)
    idle, fire = meter.phases["idle"], meter.phases["fire"]
    waits = (sum(fire.early_ms) / max(len(fire.early_ms), 1) / 1000,
             fire.busy_ms["tick"] / max(fire.invocations["tick"], 1) / 1000) if scenario.timed else (None, None)
    return Measured(scenario, executions, idle, idle.invocations["tick"], meter.phases["create"],
                    fire, {t: b / stored_per for t, b in stored.items()},
                    set(meter.log.metrics) if meter.log else set(), tpl, meter.pack_fill, capacity, *waits)


def advance_timed(stack, clock, seconds: float, rng: random.Random) -> None:
    """Move the clock as `stack.advance` does, but run each segment's tick at its own instant of each
    minute (segment s at s/segments of the minute, plus a part of that second: an EventBridge rule
    runs at some instant of its minute, and so the runs of one minute never overlap) and deliver each
    lane message as soon as SQS makes it visible (not on a one-second grid). The parts of the second
    are stratified over the runs (one drawn within each 1/n of the second, in a drawn order), so that
    a few runs' waits for their sends average what uniform instants give."""
    from jobsched.domain.schedule import MS_PER_MINUTE

    start = clock.now_ms()
    end = start + int(seconds * 1000)
    segments = stack.settings.total_segments
    bases = [(minute + s * MS_PER_MINUTE // segments, s)
             for minute in range(start // MS_PER_MINUTE * MS_PER_MINUTE, end, MS_PER_MINUTE)
             for s in range(segments)]
    bases = [(base, s) for base, s in bases if start <= base and base + 1000 <= end]
    parts = [int((k + rng.random()) * 1000 / max(len(bases), 1)) for k in range(len(bases))]
    rng.shuffle(parts)
    ticks = sorted((base + part, s) for (base, s), part in zip(bases, parts))
    while clock.now_ms() < end:
        now = clock.now_ms()
        ready = stack.next_ready_ms()  # receivable once the clock is past it (moto)
        # One left receivable after a delivery (none here but a redelivery's): a second on, as stepping.
        ready = None if ready is None else int(ready) + 1 if int(ready) + 1 > now else now + 1000
        clock.set_ms(max(now, min([end] + [ticks[0][0] for _ in ticks[:1]] + ([ready] if ready is not None else []))))
        while ticks and ticks[0][0] <= clock.now_ms():
            stack.tick_fn.invoke({"segment": ticks.pop(0)[1]})
        stack.deliver()


def pack_capacity(items: list[dict]) -> int:
    """How many fires of these jobs one lane message holds: each pack entry carries its job's
    snapshot (domain/packs.py snapshot_of), and a pack is cut at MAX_PACK_BYTES of sealed body."""
    from jobsched.domain.executions import Dispatch, DispatchKind, execution_id_for
    from jobsched.domain.jobs import Job
    from jobsched.domain.packs import MAX_PACK_ENTRIES, packs_of, snapshot_of
    from jobsched.store.dynamo import plain

    found = [plain(i) for i in items if str(i.get("jobId", "")).startswith("job_") and "schedule" in i]
    if not found:
        return MAX_PACK_ENTRIES
    item = found[0]
    job = Job.from_item(item)
    due = 1_900_000_000_000
    snapshot = snapshot_of(job, item)
    entries = [Dispatch(DispatchKind.FIRE, job.tenant_id, job.job_id, execution_id_for(job.job_id, due + n), due + n,
                        job.generation, run=1, solo=False, snapshot=snapshot) for n in range(MAX_PACK_ENTRIES)]
    return len(packs_of(entries, 0, "NORMAL")[0].entries)


def count_executions(table) -> tuple[int, int, int]:
    """Executions recorded (their own items, and the entries of pack items that never left their
    pack), pack items, and the entries those packs carried (their fill)."""
    own = packs = filled = 0
    for item in scan_all(table):
        if str(item["jobId"]).startswith("pack#"):
            if "attempt" not in item:  # a fence (job snapshots), not a pack
                continue
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


class count_joined_seconds:
    """Adds to the phase's `timers_wu_joined` what each hand-off's next timers would have cost in
    write units as packs of one due second each (`pack_timers(..., sparse_below=1)`), less what
    they cost as written: the saving of joining sparse seconds, priced back by bench cost."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    def __enter__(self):
        import threading

        import jobsched.store.timers as timers_store
        from jobsched.local.strict_aws import item_size

        self.module, self.original, lock = timers_store, timers_store.pack_timers, threading.Lock()

        def units(packs: list[dict], singles: list) -> int:
            return sum(-(-item_size(item) // 1024) for item in packs + [t.to_wire() for t in singles])

        def counted(timers, sparse_below=None, _original=self.original):
            timers = list(timers)
            packs, singles = _original(timers, sparse_below)
            extra = units(*_original(timers, 1)) - units(packs, singles)
            with lock:
                self.meter.tally.timers_wu_joined += extra
            return packs, singles
        timers_store.pack_timers = counted
        return self

    def __exit__(self, *exc):
        self.module.pack_timers = self.original
        return False


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
