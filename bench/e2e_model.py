"""bench e2e's simulation: the deployment read from the template, the scenario, and the event
loop that runs the real tick and worker on the simulated clock (see bench/e2e.py)."""
from __future__ import annotations

import heapq
import json
import math
import os
import random
import re
import time
from dataclasses import dataclass
from types import SimpleNamespace

from bench.common import ROOT
from bench.e2e_aws import (ACCOUNT_CONCURRENCY, COLD_START_MS, DYNAMODB_MS, HANDLER_MS, PAYLOAD_BYTES,
                           POLL_TO_INVOKE_MS, PROVISIONED_PER_POLLER, PROVISIONED_RAMP_PER_MINUTE, STANDARD_MAX,
                           STANDARD_RAMP_PER_MINUTE, STANDARD_START, TARGET_MEDIAN_MS, TARGET_SIGMA,
                           TICK_MS_PER_TIMER, BilledDynamo, BilledWatermarks, Billing, Lane, Message, SimClock,
                           SizeMemo)


class LaneSqs:
    """SendMessageBatch as the lane sees it: each message visible after its whole-second delay."""

    def __init__(self, sim: "Simulation") -> None:
        self._sim = sim

    def send_message_batch(self, QueueUrl, Entries):  # noqa: N803
        now = self._sim.clock.now_ms()
        for entry in Entries:
            self._sim.enqueue(QueueUrl, now + int(entry.get("DelaySeconds", 0)) * 1000, entry["MessageBody"])
        return {"Successful": [{"Id": e["Id"], "MessageId": e["Id"]} for e in Entries], "Failed": []}


class Target:
    """The job's target: records the call's instant, answers after a log-normal latency."""

    def __init__(self, sim: "Simulation", rng: random.Random) -> None:
        self._sim, self._rng = sim, rng

    def invoke(self, job, dispatch, attempt, callback_token=None, progress=None):
        from jobsched.domain.executions import AttemptOutcome, ExecutionStatus

        now = self._sim.clock.now_ms()
        self._sim.record(dispatch, now)
        self._sim.clock.sleep(TARGET_MEDIAN_MS * math.exp(self._rng.gauss(0, TARGET_SIGMA)) / 1000)
        return AttemptOutcome(True, ExecutionStatus.SUCCEEDED)


# ---------------------------------------------------------------------------------------------
# The deployment, from the template

@dataclass
class Deployment:
    segments: int
    lanes: dict[str, tuple[int, tuple[int, int] | None]]  # lane → (cap, provisioned pollers)
    batch_size: int
    tenant_percent: int
    tick_timeout_ms: int
    reserved_worker: int | None
    tables: dict[str, str]  # kind (Jobs, Timers, ...) → what the table's capacity is
    account_concurrency: int = ACCOUNT_CONCURRENCY


def deployment_of(template: dict) -> Deployment:
    resources = template["Resources"]
    functions = {k: r["Properties"] for k, r in resources.items() if r["Type"] == "AWS::Lambda::Function"}
    worker = next(p for p in functions.values() if p["Handler"].endswith("worker.handler"))
    tick = next(p for p in functions.values() if p["Handler"].endswith("tick.handler"))
    env = worker["Environment"]["Variables"]
    queues = {k: r for k, r in resources.items() if r["Type"] == "AWS::SQS::Queue"}
    lanes = {}
    batch = 10
    for r in resources.values():
        if r["Type"] != "AWS::Lambda::EventSourceMapping":
            continue
        p = r["Properties"]
        queue = p["EventSourceArn"]["Fn::GetAtt"][0]
        if queue not in queues:
            continue
        name = next((n for n in ("High", "Normal", "Low") if f"Lanes{n}" in queue), queue).upper()
        pollers = p.get("ProvisionedPollerConfig")
        provisioned = (pollers.get("MinimumPollers", 2), pollers.get("MaximumPollers", 200)) if pollers else None
        # Provisioned mode has no MaximumConcurrency (the two exclude each other): its pollers bound it.
        reach = provisioned[1] * PROVISIONED_PER_POLLER if provisioned else STANDARD_MAX
        cap = (p.get("ScalingConfig") or {}).get("MaximumConcurrency", reach)
        lanes[name] = (cap, provisioned)
        batch = p.get("BatchSize", 10)
    tables = {}
    for logical, r in resources.items():
        if r["Type"] != "AWS::DynamoDB::Table":
            continue
        p = r["Properties"]
        kind = re.sub(r"^Storage|[0-9A-F]{8}$", "", logical)
        warm = p.get("WarmThroughput")
        if p.get("BillingMode") == "PROVISIONED" or "ProvisionedThroughput" in p:
            tp = p.get("ProvisionedThroughput", {})
            tables[kind] = f"provisioned {tp.get('ReadCapacityUnits')} RCU / {tp.get('WriteCapacityUnits')} WCU"
        elif warm:
            tables[kind] = "on demand, warm " + " / ".join(
                f"{warm[key]:,} {unit}" for key, unit in (("ReadUnitsPerSecond", "RU"), ("WriteUnitsPerSecond", "WU"))
                if warm.get(key))
        else:
            tables[kind] = "on demand, no warm throughput (a new table: 12,000 RU / 4,000 WU)"
    return Deployment(int(env.get("SEGMENTS", "4")), lanes, batch, int(env.get("LANE_TENANT_PERCENT", "0")),
                      int(tick.get("Timeout", 60)) * 1000, worker.get("ReservedConcurrentExecutions"), tables)


def profile_template(profile: str | None, segments: int = 4, state_index: str | None = None) -> dict:
    """Today's template, or the one a `-c profile=NAME` context deploys (passed to the CDK app
    through CDK_CONTEXT_JSON, which cdk.App reads as context); `state_index`: `-c stateIndex=`."""
    from jobsched.local.synth import synthesize

    if not profile and not state_index:
        from bench.common import template

        return template(segments)
    saved = os.environ.get("CDK_CONTEXT_JSON")
    context = {**({"profile": profile} if profile else {}), **({"stateIndex": state_index} if state_index else {})}
    os.environ["CDK_CONTEXT_JSON"] = json.dumps(context)
    try:
        return synthesize(ROOT / ".build" / "bench" / f"cdk.out-{profile}-{state_index}", segments=segments,
                          allow_private_targets=True)
    finally:
        if saved is None:
            os.environ.pop("CDK_CONTEXT_JSON", None)
        else:
            os.environ["CDK_CONTEXT_JSON"] = saved


# ---------------------------------------------------------------------------------------------
# Scenarios

@dataclass
class Scenario:
    name: str
    rate: int  # executions a second (sustained), or the herd's size
    minutes: int  # minutes of fires (sustained)
    tenants: int
    herd: bool = False
    sample: float = 1.0
    # "segment": whole segments run for real (every tenant's jobs in them: a pack holds what it holds
    # at full scale); "tenant": whole tenants; "job": whole jobs (one tenant). Only "segment" keeps
    # the pack fill of the whole: packs gather one segment's second of every tenant.
    sample_by: str = "segment"
    one_time: bool = False  # one-time jobs due `rate` a second over the minutes, each completed once

    @property
    def kind(self) -> str:
        return "herd" if self.herd else "one-time" if self.one_time else "tenant" if self.tenants == 1 \
            else "sustained"




class Simulation:
    def __init__(self, template: dict, scenario: Scenario, seed: int = 27) -> None:
        from jobsched.domain.jobs import Priority
        from jobsched.service.handoff import HandOff
        from jobsched.service.outcomes import Outcomes
        from jobsched.service.tick import Ticker
        from jobsched.service.worker import Worker
        from jobsched.store.executions import ExecutionsStore
        from jobsched.store.jobs import JobsStore
        from jobsched.store.queues import LaneQueues
        from jobsched.store.timers import TimersStore
        from jobsched.domain.timers import segment_of
        from jobsched.service.packs import PackRunner
        from jobsched.store.packs import PacksStore

        self.scenario = scenario
        self.deployment = deployment_of(template)
        self.rng = random.Random(seed)
        minute0 = 29_000_000  # an epoch minute (2025-02-21): the run starts at its first second
        self.start_ms = minute0 * 60_000
        self.clock = SimClock(self.start_ms)
        names = {"Jobs": "jobs", "Timers": "timers", "Executions": "executions", "Segments": "segments"}
        logical = {k: r for k, r in template["Resources"].items() if r["Type"] == "AWS::DynamoDB::Table"}
        tables = {lid: names[kind] for lid in logical for kind in names if lid.startswith(f"Storage{kind}")}
        segments = self.deployment.segments
        # The sample: by segment, the first `ticking` segments run whole (their ticks, timers, packs
        # and Timers keys are as at full scale) and stand for the rest; otherwise every segment's tick
        # runs over a part of the jobs.
        self.ticking = max(1, round(segments * scenario.sample)) if scenario.sample_by == "segment" else segments
        self.sample = self.ticking / segments if scenario.sample_by == "segment" else scenario.sample
        shared = ({"jobs"} if scenario.sample_by == "segment" else
                  {"timers"} | ({"jobs"} if scenario.sample_by == "job" else set()))
        self.billing = Billing(template, tables, {t: 1 / self.sample for t in shared},
                               {t: 1 / self.sample for t in ("jobs", "timers", "executions")})
        key_names = {name: self.billing.strict.template.tables[name][""] for name in tables.values()}
        self.dynamo = BilledDynamo(self.billing, self.clock, key_names, self.rng.random)
        self.dynamo.partitions["timers"] = {}
        whole_segments = scenario.sample_by == "segment"  # a segment's tick sees all of its timers
        self.dynamo.tick_ms_per_item = TICK_MS_PER_TIMER / (1 if whole_segments else self.sample)
        resource = SimpleNamespace(Table=lambda name: None)
        urls = {p: f"https://sqs.local/{p.value}" for p in Priority}
        self.lanes = {p.value: Lane(p.value, *self.deployment.lanes.get(p.value, (STANDARD_MAX, None))) for p in Priority}
        lanes = LaneQueues(LaneSqs(self), urls, self.clock, lambda: b"e2e-dispatch-key-".ljust(32, b"."), parallelism=1)
        lanes.segment_of = lambda job_id: segment_of(job_id, self.deployment.segments)  # packs' key
        self.stores = SimpleNamespace(
            jobs=JobsStore(resource, "jobs", sleep=self.clock.sleep, client=self.dynamo),
            timers=TimersStore(resource, "timers", sleep=self.clock.sleep, client=self.dynamo, parallelism=1),
            executions=ExecutionsStore(resource, "executions", 30, client=self.dynamo),
            watermarks=BilledWatermarks(self.billing, self.clock, "segments"),
            lanes=lanes, calendars=None, flow=None, alerts=None,
            packs=PacksStore(resource, "executions", 30, client=self.dynamo))
        # A page stands for as many timers as a real one (500): its next timers' writes then come
        # in bursts of a real page's size, not of 1/sample pages at once.
        if not whole_segments:
            self.stores.timers.page_size = max(1, round(self.stores.timers.page_size * self.sample))
        self.handoff = HandOff(self.stores, self.clock, self.deployment.segments)
        self.ticker = Ticker(self.stores, self.handoff, self.clock)
        self.outcomes = Outcomes(self.stores, self.handoff, self.clock, self.rng.random)
        self.worker = Worker(self.stores, self.outcomes, Target(self, random.Random(seed + 1)), self.clock, None)
        self.side_by_side = SideBySide(self.clock)
        self.packs = PackRunner(self.worker, self.stores, self.outcomes, self.clock, pool=self.side_by_side)
        self.pack_sizes: list[int] = []  # entries per pack message received (the pack fill)
        self.events: list = []
        self.seq = 0
        self.pending = 0  # events other than the pollers' scaling
        self.polls: set = set()  # (lane, instant) polls already scheduled
        self.late_ms: list[int] = []
        self.sent_alone = 0  # of the executions run in the window: fires sent alone (`Dispatch.solo`)
        self.late_second_half: list[int] = []  # due in the window's second half (the pollers scaled)
        self.due_window = (0, 0)
        self.tick_late: list[int] = []  # ms a bucket's hand-off ended after its first second
        self.record_errors = 0
        self.expected = 0  # executions due in the window (the sample's)
        self.invocations: list[tuple[int, int]] = []  # (records, ms) of each worker invocation
        self.tick_errors = 0

    # --- the load ---------------------------------------------------------------------------------
    def load(self) -> int:
        """The jobs of the sample, and their first timers (written before the run: not billed).
        Returns the number that run for real."""
        from jobsched.domain.jobs import KEYED_BY_SHARD, Job, JobSpec, JobState, Target as JobTarget, TargetType
        from jobsched.domain.schedule import cron_schedule, one_time_schedule
        from jobsched.domain.timers import Timer, TimerKind, segment_of
        from jobsched.store.wire import values_to_wire

        s = self.scenario
        first_minute = self.start_ms // 60_000 + 2  # the first bucket the first ticks hand off
        first_ms = first_minute * 60_000
        # jobs: the herd, one-time jobs due over the minutes, or a minute's worth firing each minute
        total = s.rate if s.herd else s.rate * 60 * s.minutes if s.one_time else s.rate * 60
        self.due_window = (first_ms, first_ms + (1_000 if s.herd else s.minutes * 60_000))
        payload = {"data": "x" * PAYLOAD_BYTES}
        ids = random.Random(f"{s.name}-ids")
        schedule, jitter = (one_time_schedule(first_ms), 0) if s.herd else (
            cron_schedule("* * * * *", "UTC", self.start_ms), 59)
        count = 0
        for n in range(total):
            tenant = n % s.tenants
            if s.sample_by == "tenant":
                if tenant >= max(1, round(s.tenants * s.sample)):
                    continue
            elif s.sample_by == "job" and n % round(1 / s.sample):
                continue
            # As new_job_id makes them (creation millisecond, the shard mark, then 19 random hex
            # digits: the job's item on one of its tenant's 32 keys), from a seeded generator.
            job_id = f"job_{self.start_ms - 86_400_000:012x}{KEYED_BY_SHARD}{ids.getrandbits(76):019x}"
            if s.sample_by == "segment" and segment_of(job_id, self.deployment.segments) >= self.ticking:
                continue
            nominal = first_ms  # a recurring job's first occurrence; the herd's instant
            if s.one_time:  # due `rate` a second, evenly, at its instant: each completes its job once
                # No jitter: spread evenly already (the recurring scenario's jitter spreads a minute's
                # cron fires over it).
                nominal = first_ms + n * 1000 // s.rate
                schedule, jitter = one_time_schedule(nominal), 0
            spec = JobSpec(name=f"e2e-{n}", schedule=schedule, payload=payload, jitter_sec=jitter,
                           target=JobTarget(TargetType.HTTP, {"url": f"https://t{n % 97}.example.com/hook"}))
            # Registered a day before (as its id says): not a job its writer may have just sent (packs).
            job = Job(f"tenant-{tenant:05d}", job_id, spec, JobState.ACTIVE, 1, 1, self.start_ms - 86_400_000,
                      self.start_ms - 86_400_000)
            self.dynamo.put_wire("jobs", values_to_wire(job.to_item()))
            due = job.fire_at(nominal)  # its timer at its own first instant (a one-time job's: its runAt)
            # Written by a deployment that keeps write instants (the two-senders rule, docs/architecture.md
            # "Packs"), when the job was registered: a timer without one (written before the rule) is
            # sent undecided, and its chain's next timer is never sole (sent alone when the tick that
            # wrote it claims its bucket seconds later, as a run behind does).
            timer = Timer(due, TimerKind.FIRE, job.tenant_id, job_id, 1, segment_of(job_id, self.deployment.segments),
                          written_ms=job.created_ms)
            self.dynamo.put_wire("timers", timer.to_wire())
            count += 1
        self.expected = count if s.herd or s.one_time else count * s.minutes
        return count

    # --- events -------------------------------------------------------------------------------------
    def push(self, at_ms: int, kind: str, payload=None) -> None:
        self.seq += 1
        self.pending += kind != "scale"
        heapq.heappush(self.events, (at_ms, self.seq, kind, payload))

    def enqueue(self, url: str, visible_ms: int, body: str, receives: int = 0) -> None:
        lane = self.lanes[url.rsplit("/", 1)[-1]]
        self.seq += 1
        heapq.heappush(lane.waiting, Message(visible_ms, self.seq, body, receives))
        if (lane.name, visible_ms) not in self.polls:
            self.polls.add((lane.name, visible_ms))
            self.push(visible_ms, "poll", lane.name)

    def record(self, dispatch, call_ms: int) -> None:
        if self.due_window[0] <= dispatch.due_ms < self.due_window[1]:
            self.late_ms.append(call_ms - dispatch.due_ms)
            self.sent_alone += dispatch.solo is True  # a message of one by the two-senders rule
            if dispatch.due_ms >= (self.due_window[0] + self.due_window[1]) // 2:
                self.late_second_half.append(call_ms - dispatch.due_ms)

    def slots(self, lane: Lane) -> int:
        """Concurrent invocations the sample may hold: the lane's reach times the sample, within
        the tenant's lane share when one tenant is all the load."""
        limit = min(lane.limit, lane.ceiling(), self.deployment.reserved_worker or self.deployment.account_concurrency)
        if self.scenario.tenants == 1 and self.deployment.tenant_percent:
            from jobsched.domain.lane_shares import share_of

            limit = min(limit, share_of(lane.cap, self.deployment.tenant_percent))
        return max(1, int(limit * self.sample))

    def run(self) -> dict:
        from jobsched.local import strict_aws
        from jobsched.local.strict_aws import dynamodb, dynamodb_billing

        # The same sizes, each item's computed once. Each module of the strict layer holds its own
        # reference to item_size (the package's, for BilledDynamo; dynamodb's and the billing's, for
        # the layer's own checks and Billing's write rules), so each is replaced and restored.
        holders = (strict_aws, dynamodb, dynamodb_billing)
        exact = dynamodb.item_size
        memo = SizeMemo(exact)
        for holder in holders:
            holder.item_size = memo
        try:
            return self._run()
        finally:
            for holder in holders:
                holder.item_size = exact

    def _run(self) -> dict:
        real = self.load()
        last_bucket = (self.due_window[1] - 1) // 60_000
        for lane in self.lanes.values():
            lane.limit = lane.provisioned[0] * PROVISIONED_PER_POLLER if lane.provisioned else STANDARD_START
        ticks_from = self.start_ms // 60_000
        for segment in range(self.ticking):
            self.push(self.start_ms + self.rng.randrange(60_000), "tick", (segment, ticks_from))
        self.push(self.start_ms + 1_000, "scale", None)
        self.billing.enabled = True
        started = time.perf_counter()
        while self.events:
            at, _, kind, payload = heapq.heappop(self.events)
            self.pending -= kind != "scale"
            if kind == "tick":
                segment, minute = payload
                end = self.tick(segment, at)
                # Ticks go on until the last bucket with fires counted is handed off (a tick that
                # ran out of time, or was refused, leaves the rest to the next one).
                done = self.stores.watermarks.done_through(segment)
                if done is None or done < last_bucket:
                    following = max(minute + 1, end // 60_000)
                    self.push(max(following * 60_000 + self.rng.randrange(60_000), end), "tick", (segment, following))
            elif kind == "poll":
                self.polls.discard((payload, at))
                self.pump(self.lanes[payload], at)
            elif kind == "done":
                lane = self.lanes[payload[0]]
                lane.active -= 1
                lane.in_flight -= payload[1]
                self.pump(lane, at)
            elif kind == "scale":
                self.scale(at)
                if self.pending or any(lane.waiting for lane in self.lanes.values()):
                    self.push(at + 1_000, "scale", None)
        return {"real": real, "seconds": time.perf_counter() - started}

    def tick(self, segment: int, at: int) -> int:
        self.clock.set_ms(at)
        self.dynamo.call_ms = 0
        deadline = at + self.deployment.tick_timeout_ms
        try:
            report = self.ticker.run(segment, lambda: deadline - self.clock.now_ms())
        except Exception:  # noqa: BLE001 - a failed tick: the next one resumes (as in AWS)
            self.tick_errors += 1
            return self.clock.now_ms()
        for minute in report.buckets:
            if minute * 60_000 >= self.due_window[0]:  # the first run's catch-up of empty buckets aside
                self.tick_late.append(self.clock.now_ms() - minute * 60_000)
        return self.clock.now_ms()

    def scale(self, at: int) -> bool:
        """Each second: a mapping with messages waiting adds pollers (its documented rate)."""
        busy = False
        for lane in self.lanes.values():
            backlog = bool(lane.waiting) and lane.waiting[0].visible_ms <= at
            if not backlog:
                continue
            busy = True
            if lane.limit >= lane.ceiling():
                lane.capped_s += 1
            else:
                lane.ramping_s += 1
            ramp = PROVISIONED_RAMP_PER_MINUTE if lane.provisioned else STANDARD_RAMP_PER_MINUTE
            lane.limit = min(lane.ceiling(), lane.limit + ramp / 60)
            self.pump(lane, at)
        return busy

    def pump(self, lane: Lane, at: int) -> None:
        """Start invocations while the lane has visible messages and a free slot."""
        while lane.waiting and lane.waiting[0].visible_ms <= at and lane.active < self.slots(lane):
            batch = []
            while lane.waiting and lane.waiting[0].visible_ms <= at and len(batch) < self.deployment.batch_size:
                batch.append(heapq.heappop(lane.waiting))
            lane.active += 1
            cold = lane.active > lane.environments
            lane.environments = max(lane.environments, lane.active)
            lane.peak = max(lane.peak, lane.active / self.sample)
            end = self.invoke(lane, batch, at + POLL_TO_INVOKE_MS + (COLD_START_MS if cold else 0))
            self.invocations.append((len(batch), end - at))
            lane.in_flight += len(batch)
            lane.in_flight_peak = max(lane.in_flight_peak, lane.in_flight / self.sample)
            self.push(end, "done", (lane.name, len(batch)))

    def invoke(self, lane: Lane, batch: list[Message], start: int) -> int:
        """One worker invocation, as handlers/worker.py runs it; returns when it ends."""
        from jobsched.service.worker import batch_read_keys

        self.clock.set_ms(start + HANDLER_MS)
        self.dynamo.call_ms = DYNAMODB_MS
        opened = [(m, self.stores.lanes.seal.open_pack(m.body)) for m in batch]
        now = self.clock.now_ms()
        keys = batch_read_keys([d for _, p in opened for d in p.entries], now)
        jobs: dict = {}
        if len(keys) >= 2:
            try:
                found = self.stores.jobs.get_many(keys, whole=True)
                jobs = {k: found.get(k) for k in keys}
            except Exception:  # noqa: BLE001 - each record reads its own job, as the handler does
                jobs = {}
        after_read = self.clock.now_ms()
        with self.outcomes.batched_give_backs():  # as the handler: a batch's quota places at once
            return self._records(lane, opened, jobs, after_read, now)

    def _records(self, lane: Lane, opened: list, jobs: dict, after_read: int, read_at: int) -> int:
        """The batch's records, each from the instant the batch read ended (which started at
        `read_at`, as the handler passes it); returns the last end."""
        from jobsched.handlers.worker import MAX_TRANSIENT_RETRY_SECONDS, TRANSIENT_RETRY_SECONDS
        from jobsched.service.worker import UNREAD, ArrivedEarly

        end = after_read
        for message, pack in opened:
            self.clock.set_ms(after_read)  # the records run side by side, a thread each
            self.pack_sizes.append(len(pack.entries))
            try:
                if pack.pack_id is not None:  # the pack path (service/packs.py), its calls side by side
                    self.side_by_side.end = 0
                    self.packs.run(pack, jobs, read_at, lambda d, job: self.worker.process(d, job, read_at))
                    self.clock.set_ms(max(self.clock.now_ms(), self.side_by_side.end))
                    end = max(end, self.clock.now_ms())
                    continue
                (dispatch,) = pack.entries
                self.worker.process(dispatch, jobs.get((dispatch.tenant_id, dispatch.job_id), UNREAD), read_at)
            except ArrivedEarly as early:
                self.requeue(lane, message, self.clock.now_ms() + early.early_ms // 1000 * 1000)
            except Exception:  # noqa: BLE001 - handed back, as the handler does
                self.record_errors += 1
                wait = min(MAX_TRANSIENT_RETRY_SECONDS, TRANSIENT_RETRY_SECONDS * 2 ** message.receives)
                self.requeue(lane, message, self.clock.now_ms() + wait * 1000)
            end = max(end, self.clock.now_ms())
        return end

    def requeue(self, lane: Lane, message: Message, visible_ms: int) -> None:
        self.enqueue(lane.name, visible_ms, message.body, message.receives + 1)


class SideBySide:
    """The pack path's executor in the simulation: each call runs at once from the same instant
    (calls side by side, as the worker's pool runs them); `end` is when the last one ended."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.end = 0

    def submit(self, fn, *args, **kwargs):
        from concurrent.futures import Future

        future: Future = Future()
        at = self.clock.now_ms()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # noqa: BLE001 - the future carries it, as a pool's does
            future.set_exception(error)
        self.end = max(self.end, self.clock.now_ms())
        self.clock.set_ms(at)
        return future


# ---------------------------------------------------------------------------------------------
# Report
