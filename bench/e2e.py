"""End to end on a simulated clock: the real tick and the real worker, under AWS's documented
scaling rules, at rates moto cannot reach (issue 27, item 2).

What runs for real: service/tick.py's Ticker.run (its pages, the hand-off of service/handoff.py,
the next FIRE timers of recurring jobs, the watermark protocol) and service/worker.py's
Worker.process with service/outcomes.py behind it (claim, target call, fenced end, a one-time
job's completion and quota give-back), over the real stores of store/timers.py, store/jobs.py,
store/executions.py and store/queues.py (LaneQueues: real seals, whole-second DelaySeconds).
The worker invocation repeats the handler's order (handlers/worker.py): open the batch, read its
jobs in one consistent BatchGetItem (not the ones that wait for their second), then each record.

What is modelled (`BilledDynamo` below, and the event loop):
- DynamoDB: a low-level client double in memory. Every read and write is billed to its partition
  key and second by the strict AWS layer's own rules (local/strict_aws.py: item sizes, 1 KB write
  and 4 KB read units, a write billed on the larger of before and after, index writes, a
  projection billed on the whole item), and refused over 1,000 WCU / 3,000 RCU a key a second as
  the strict layer refuses it: batch calls leave the keys unprocessed (the stores back off and
  retry), single calls are retried as botocore's standard mode does (5 attempts), then fail.
  Conditions are not evaluated: each execution is delivered once here (no duplicates modelled).
- SQS: a message becomes visible DelaySeconds (whole seconds, as the real LaneQueues computes
  them) after its send; the worker's wait for its due second is the real Worker's, on this clock.
- Lambda's SQS polling: standard mode starts with 5 concurrent invocations and adds up to 300 a
  minute while messages wait, up to 1,250 per event source and the mapping's MaximumConcurrency
  (AWS: services-sqs-scaling.html; docs/AWS-LIMITS.md); provisioned mode (ProvisionedPollerConfig
  in the template) 10 invocations per poller, MinimumPollers at the start, 1,000 more a minute up
  to MaximumPollers. Unreserved account concurrency: 1,000. Batches of up to 10 (the template's
  BatchSize), no batching window. Scaling down is not modelled (once scaled, it stays).
- EventBridge: each segment's tick at a random second of each minute (seeded; "within the minute");
  a tick still running delays the segment's next one. The tick's own pace is bench herd's measured
  0.36 ms of the tick's time per timer handed off, calls included (30,000 in 10.9 s).
- Lane shares (service/lane_shares.py) are modelled as a cap on one tenant's concurrency in a lane
  (share_of(cap, LANE_TENANT_PERCENT)); their slot writes are not billed.
- Sampling: a deterministic part of the load runs for real (whole tenants when there are many,
  whole jobs for one tenant) and stands for all of it: units on keys the sample shares with the
  rest (Timers buckets; Jobs when one tenant is sampled by job) are billed times 1/sample, and
  each lane's concurrency is scaled by the sample (the queue then behaves as the whole would).

`python -m bench e2e [--quick] [--sample=N] [--profile=NAME] [--scenario=sustained|herd|tenant]
`"""
from __future__ import annotations

import heapq
import json
import math
import os
import random
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

from bench.common import ROOT, machine, percentile, print_table

GOAL_P99_MS = 1_000
ACCOUNT_CONCURRENCY = 1_000  # a new account's default (AWS-LIMITS.md, Lambda)
STANDARD_START = 5  # concurrent invocations an SQS mapping starts with
STANDARD_RAMP_PER_MINUTE = 300
STANDARD_MAX = 1_250
PROVISIONED_PER_POLLER = 10
PROVISIONED_RAMP_PER_MINUTE = 1_000
TABLE_QUOTA_UNITS = 40_000  # per table and second, on demand (adjustable)
NEW_TABLE_WARM = {"read": 12_000, "write": 4_000}  # a new on-demand table's warm throughput
TICK_MS_PER_TIMER = 10_900 / 30_000  # bench herd: one segment's 30,000 timers handed off in 10.9 s
DYNAMODB_MS = 6  # one DynamoDB call from a worker, round trip
POLL_TO_INVOKE_MS = 20  # a poller's receive to the function's start
COLD_START_MS = 800  # a new worker environment (init and the first calls' connections)
HANDLER_MS = 5  # the handler's own work around the records (parsing, the visibility change)
TARGET_MEDIAN_MS = 100  # the target's latency: log-normal, this median ...
TARGET_SIGMA = 0.6  # ... and spread (p99 about 4 times the median)
BOTOCORE_ATTEMPTS = 5  # store/aws.py: standard retry mode, 5 attempts
PAYLOAD_BYTES = 256


# ---------------------------------------------------------------------------------------------
# Time

class SimClock:
    """The one clock of the simulation: set to an event's instant before the real code runs,
    moved by the calls it makes (their latency) and by its sleeps (the worker's wait)."""

    def __init__(self, now_ms: int) -> None:
        self._now = now_ms

    def now_ms(self) -> int:
        return self._now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._now += int(seconds * 1000)

    def set_ms(self, now_ms: int) -> None:
        self._now = now_ms


# ---------------------------------------------------------------------------------------------
# DynamoDB, billed

class SizeMemo:
    """strict_aws.item_size, remembered per item object while the run lasts: the billing sizes each
    stored item again at every read and write (the object is kept, so its id is not reused)."""

    LIMIT = 300_000

    def __init__(self, size) -> None:
        self._size = size
        self._known: dict[int, tuple[dict, int]] = {}

    def __call__(self, item: dict | None) -> int:
        if not item:
            return 0
        known = self._known.get(id(item))
        if known is not None and known[0] is item:
            return known[1]
        if len(self._known) > self.LIMIT:
            self._known.clear()
        size = self._size(item)
        self._known[id(item)] = (item, size)
        return size


class Billing:
    """Units per partition key and second, with the strict layer's partition names and write
    rules (StrictAws._bill_write: the item's larger size, index entries). Order-independent: the
    events of the simulation bill seconds out of order."""

    def __init__(self, template: dict, tables: dict[str, str], weights: dict[str, float],
                 table_weights: dict[str, float] | None = None) -> None:
        from jobsched.local.strict_aws import StrictAws

        self.strict = StrictAws(template, {logical: name for logical, name in tables.items()})
        self.strict.ledger = self  # _bill_write bills through `ledger.bill`
        self.weights = weights  # table name → units billed per unit used (1 / sample on shared keys)
        # A table's total stands for the whole load: 1 / sample for every table the sample spans
        # (a key the sample owns is billed as it is, but the table holds the other keys too).
        self.table_weights = table_weights or {}
        self.usage: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
        self.table_usage: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
        self.throttled: dict[str, int] = defaultdict(int)
        self.enabled = False

    @staticmethod
    def table_of(key: str) -> str:
        return key.split("[", 1)[0].split("/", 1)[0]

    def bill(self, key: str, second: int, rcu: float = 0.0, wcu: float = 0.0) -> None:
        if not self.enabled:
            return
        weight = self.weights.get(self.table_of(key), 1.0)
        cell = self.usage[(key, second)]
        cell[0] += rcu * weight
        cell[1] += wcu * weight
        table_weight = self.table_weights.get(self.table_of(key), weight)
        table = self.table_usage[(self.table_of(key), second)]
        table[0] += rcu * table_weight
        table[1] += wcu * table_weight

    def over(self, key: str | None, second: int, reads: bool) -> bool:
        """The strict layer's rule: a key that used its second's units is refused."""
        from jobsched.local.strict_aws import PARTITION_RCU_PER_SECOND, PARTITION_WCU_PER_SECOND

        if key is None or not self.enabled:
            return False
        rcu, wcu = self.usage.get((key, second), (0.0, 0.0))
        over = rcu >= PARTITION_RCU_PER_SECOND if reads else wcu >= PARTITION_WCU_PER_SECOND
        if over:
            self.throttled[key] += 1
        return over

    def peaks(self) -> list[tuple[str, float, float]]:
        """(key, peak RCU/s, peak WCU/s), the hottest first (against 3,000 and 1,000)."""
        best: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for (key, _), (rcu, wcu) in self.usage.items():
            best[key][0] = max(best[key][0], rcu)
            best[key][1] = max(best[key][1], wcu)
        return sorted(((k, r, w) for k, (r, w) in best.items()), key=lambda x: -max(x[1] / 3000, x[2] / 1000))

    def table_peaks(self) -> dict[str, tuple[float, float]]:
        best: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for (table, _), (rcu, wcu) in self.table_usage.items():
            best[table][0] = max(best[table][0], rcu)
            best[table][1] = max(best[table][1], wcu)
        return {t: (r, w) for t, (r, w) in best.items()}


def _throttled(operation: str):
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": "ProvisionedThroughputExceededException",
                                  "Message": "Throughput exceeds the current capacity (KeyRangeThroughputExceeded)"}},
                       operation)


_ASSIGNMENT = re.compile(r"\s*([#\w.]+)\s*=\s*(.+)\s*", re.S)


_TOP_COMMA = re.compile(r",(?![^(]*\))")  # a comma outside parentheses (the stores nest one level)


def _split_top(text: str) -> list[str]:
    """Comma-separated parts outside parentheses."""
    return [p.strip() for p in _TOP_COMMA.split(text) if p.strip()]


class BilledDynamo:
    """The low-level DynamoDB client the stores' hot calls use, in memory, billed (see Billing).
    Update expressions are applied (SET with if_not_exists, list_append and +, ADD, REMOVE) so that
    an item's size grows as DynamoDB's would; conditions are not evaluated."""

    def __init__(self, billing: Billing, clock: SimClock, key_names: dict[str, tuple[str, str | None]],
                 unit_random) -> None:
        self.billing = billing
        self.clock = clock
        self.keys = key_names  # table name → (hash, range)
        self.items: dict[str, dict[tuple, dict]] = defaultdict(dict)
        self.partitions: dict[str, dict[str, list[str]]] = defaultdict(dict)  # Timers: bucket → sorted sks
        self.call_ms = 0  # each call's round trip on the clock (the worker's calls)
        self.tick_ms_per_item = 0.0  # the tick's pace, charged per timer a Query returns
        self.random = unit_random
        self.calls: dict[str, int] = defaultdict(int)

    # --- helpers ---------------------------------------------------------------------------------
    def _key(self, table: str, item: dict) -> tuple:
        hash_key, range_key = self.keys[table]
        return (item[hash_key]["S" if "S" in item[hash_key] else "N"],
                item[range_key]["S" if "S" in item[range_key] else "N"] if range_key else None)

    def _partition(self, table: str, item: dict) -> str | None:
        return self.billing.strict._partition(table, item)

    def _second(self) -> int:
        return self.clock.now_ms() // 1000

    def _latency(self) -> None:
        self.clock.sleep(self.call_ms / 1000)

    def _retried(self, operation: str, partition: str | None, reads: bool) -> None:
        """botocore's standard retries of a throttled single-item call, then the error."""
        for attempt in range(BOTOCORE_ATTEMPTS):
            if not self.billing.over(partition, self._second(), reads):
                return
            if attempt + 1 < BOTOCORE_ATTEMPTS:
                self.clock.sleep(self.random() * min(20.0, 2 ** attempt))
        raise _throttled(operation)

    def put_wire(self, table: str, item: dict) -> None:
        """Data loaded before the run: not billed."""
        key = self._key(table, item)
        fresh = key not in self.items[table]
        self.items[table][key] = item
        if fresh and self.keys[table][1] is not None and table in self.partitions:
            import bisect

            bisect.insort(self.partitions[table].setdefault(key[0], []), key[1])

    def _write(self, table: str, item: dict | None, key_item: dict, before: dict | None) -> None:
        from jobsched.local.strict_aws import item_size, MAX_ITEM_BYTES

        if item is not None and item_size(item) > MAX_ITEM_BYTES:
            raise RuntimeError(f"item over 400 KB in {table}")
        key = self._key(table, key_item)
        self.billing.strict._bill_write(table, {n: key_item[n] for n in self.keys[table] if n},
                                        before, item, 1, self._second())
        if item is None:
            self.items[table].pop(key, None)
        else:
            self.put_wire(table, item)

    # --- the calls the stores make ---------------------------------------------------------------
    def get_item(self, TableName, Key, ConsistentRead=False, **_):  # noqa: N803 - boto3's names
        from jobsched.local.strict_aws import item_size, read_units

        self.calls["GetItem"] += 1
        self._retried("GetItem", self._partition(TableName, Key), reads=True)
        item = self.items[TableName].get(self._key(TableName, Key))
        self.billing.bill(self._partition(TableName, Key), self._second(), rcu=read_units(item_size(item), ConsistentRead))
        self._latency()
        return {"Item": item} if item else {}

    def batch_get_item(self, RequestItems, **_):  # noqa: N803
        from jobsched.local.strict_aws import item_size, read_units

        self.calls["BatchGetItem"] += 1
        responses, unprocessed = {}, {}
        for table, request in RequestItems.items():
            names = request.get("ExpressionAttributeNames", {})
            wanted = [names.get(p.strip(), p.strip()) for p in request["ProjectionExpression"].split(",")] \
                if "ProjectionExpression" in request else None
            found, left = [], []
            for key in request["Keys"]:
                partition = self._partition(table, key)
                if self.billing.over(partition, self._second(), reads=True):
                    left.append(key)
                    continue
                item = self.items[table].get(self._key(table, key))
                # A projection is billed on the whole item (AWS's read-unit rules).
                self.billing.bill(partition, self._second(), rcu=read_units(item_size(item), bool(request.get("ConsistentRead"))))
                if item:
                    found.append({n: item[n] for n in wanted if n in item} if wanted else item)
            responses[table] = found
            if left:
                unprocessed[table] = {**request, "Keys": left}
        self._latency()
        return {"Responses": responses, "UnprocessedKeys": unprocessed}

    def query(self, TableName, ExpressionAttributeValues, Limit=None, ExclusiveStartKey=None,  # noqa: N803
              ConsistentRead=False, **_):
        import bisect

        from jobsched.local.strict_aws import item_size, read_units

        self.calls["Query"] += 1
        (value,) = ExpressionAttributeValues.values()
        hash_key, range_key = self.keys[TableName]
        pk = value["S"]
        partition = self._partition(TableName, {hash_key: value})
        self._retried("Query", partition, reads=True)
        sks = self.partitions[TableName].get(pk, [])
        start = bisect.bisect_right(sks, ExclusiveStartKey[range_key]["S"]) if ExclusiveStartKey else 0
        page_sks = sks[start:start + (Limit or len(sks))]
        items = [self.items[TableName][(pk, sk)] for sk in page_sks]
        self.billing.bill(partition, self._second(), rcu=read_units(sum(item_size(i) for i in items), ConsistentRead))
        # The tick's pace: its time per timer, for every timer this one stands for (a timer pack's
        # item holds `count` of them).
        timers = sum(int(i["count"]["N"]) if i.get("kind", {}).get("S") == "PACK" else 1 for i in items)
        self.clock.sleep(timers * self.tick_ms_per_item / 1000)
        answer: dict = {"Items": items, "Count": len(items)}
        if start + len(page_sks) < len(sks):
            last = items[-1]
            answer["LastEvaluatedKey"] = {hash_key: last[hash_key], range_key: last[range_key]}
        return answer

    def put_item(self, TableName, Item, **_):  # noqa: N803
        self.calls["PutItem"] += 1
        self._retried("PutItem", self._partition(TableName, Item), reads=False)
        self._write(TableName, Item, Item, self.items[TableName].get(self._key(TableName, Item)))
        self._latency()
        return {}

    def batch_write_item(self, RequestItems, **_):  # noqa: N803
        self.calls["BatchWriteItem"] += 1
        unprocessed = {}
        for table, requests in RequestItems.items():
            left = []
            for request in requests:
                item = request["PutRequest"]["Item"]
                if self.billing.over(self._partition(table, item), self._second(), reads=False):
                    left.append(request)
                    continue
                self._write(table, item, item, self.items[table].get(self._key(table, item)))
            if left:
                unprocessed[table] = left
        self._latency()
        return {"UnprocessedItems": unprocessed}

    def update_item(self, TableName, Key, UpdateExpression, ExpressionAttributeValues=None,  # noqa: N803
                    ExpressionAttributeNames=None, ReturnValues=None, **_):
        self.calls["UpdateItem"] += 1
        self._retried("UpdateItem", self._partition(TableName, Key), reads=False)
        before = self.items[TableName].get(self._key(TableName, Key))
        after = dict(before) if before else dict(Key)
        _apply(after, UpdateExpression, ExpressionAttributeNames or {}, ExpressionAttributeValues or {})
        self._write(TableName, after, Key, before)
        self._latency()
        if ReturnValues == "ALL_NEW":
            return {"Attributes": after}
        return {"Attributes": before} if ReturnValues == "ALL_OLD" and before else {}


_VERBS = re.compile(r"\b(SET|ADD|REMOVE)\b")
_PLUS = re.compile(r"\s\+\s")
_COMPILED: dict[str, list] = {}


def _apply(item: dict, expression: str, names: dict, values: dict) -> None:
    """SET / ADD / REMOVE of an update expression, on a wire-format item (each expression parsed once)."""
    steps = _COMPILED.get(expression)
    if steps is None:
        steps = _COMPILED[expression] = _compile(expression)
    for verb, name, evaluate in steps:
        if verb == "SET" and "." in name:  # a map's entry (store/packs.py's checkpoints)
            top, entry = (names.get(n, n) for n in name.split(".", 1))
            item.setdefault(top, {"M": {}})["M"][entry] = evaluate(item, names, values)
            continue
        name = names.get(name, name)
        if verb == "REMOVE":
            item.pop(name, None)
        elif verb == "ADD":
            old = int(item.get(name, {"N": "0"})["N"])
            item[name] = {"N": str(old + int(values[evaluate]["N"]))}
        else:
            item[name] = evaluate(item, names, values)


def _compile(expression: str) -> list:
    clauses = _VERBS.split(expression)
    steps = []
    for verb, body in zip(clauses[1::2], clauses[2::2]):
        for part in _split_top(body):
            if verb == "REMOVE":
                steps.append((verb, part, None))
            elif verb == "ADD":
                name, value = part.split()
                steps.append((verb, name, value))
            else:
                match = _ASSIGNMENT.fullmatch(part)
                steps.append((verb, match.group(1), _operand(match.group(2).strip())))
    return steps


def _operand(text: str):
    """An evaluator of one SET operand: a value, an attribute, `a + b`, if_not_exists, list_append."""
    terms = [t.strip() for t in _PLUS.split(text)]
    if len(terms) > 1:
        parts = [_operand(t) for t in terms]
        return lambda item, names, values: {"N": str(sum(int(p(item, names, values)["N"]) for p in parts))}
    if text.startswith("if_not_exists("):
        attribute, default = _split_top(text[len("if_not_exists("):-1])
        fallback = _operand(default)
        return lambda item, names, values: item.get(names.get(attribute, attribute)) or fallback(item, names, values)
    if text.startswith("list_append("):
        first, second = (_operand(p) for p in _split_top(text[len("list_append("):-1]))
        return lambda item, names, values: {"L": first(item, names, values)["L"] + second(item, names, values)["L"]}
    if text.startswith(":"):
        return lambda item, names, values: values[text]
    return lambda item, names, values: item.get(names.get(text, text), {"NULL": True})


class BilledWatermarks:
    """store/segments.py's watermarks in memory: a consistent GetItem and conditional updates of
    one small item per segment, billed to its key."""

    def __init__(self, billing: Billing, clock: SimClock, table: str) -> None:
        from jobsched.domain.timers import Watermark

        self._make = Watermark
        self._billing, self._clock, self._table = billing, clock, table
        self._marks: dict[int, dict] = defaultdict(dict)

    def _bill(self, segment: int, rcu: float = 0.0, wcu: float = 0.0) -> None:
        self._billing.bill(f"{self._table}[{segment}]", self._clock.now_ms() // 1000, rcu=rcu, wcu=wcu)

    def get(self, segment: int):
        self._bill(segment, rcu=1)
        mark = self._marks.get(segment)
        if not mark:
            return None
        return self._make(segment, mark.get("claimed"), mark.get("done"), mark.get("minute"), mark.get("sk"))

    def claim(self, segment: int, minute: int) -> None:
        self._bill(segment, wcu=1)
        self._marks[segment]["claimed"] = max(minute, self._marks[segment].get("claimed", minute))

    def mark_done(self, segment: int, minute: int) -> None:
        self._bill(segment, wcu=1)
        self._marks[segment]["done"] = max(minute, self._marks[segment].get("done", minute))

    def save_position(self, segment: int, minute: int, sort_key: str) -> None:
        self._bill(segment, wcu=1)
        self._marks[segment].update(minute=minute, sk=sort_key)

    def done_through(self, segment: int) -> int | None:
        """For the simulation's own bookkeeping: not a call, not billed."""
        return self._marks.get(segment, {}).get("done")


# ---------------------------------------------------------------------------------------------
# SQS, Lambda

@dataclass(order=True)
class Message:
    visible_ms: int
    seq: int
    body: str = field(compare=False)
    receives: int = field(default=0, compare=False)


class LaneSqs:
    """SendMessageBatch as the lane sees it: each message visible after its whole-second delay."""

    def __init__(self, sim: "Simulation") -> None:
        self._sim = sim

    def send_message_batch(self, QueueUrl, Entries):  # noqa: N803
        now = self._sim.clock.now_ms()
        for entry in Entries:
            self._sim.enqueue(QueueUrl, now + int(entry.get("DelaySeconds", 0)) * 1000, entry["MessageBody"])
        return {"Successful": [{"Id": e["Id"], "MessageId": e["Id"]} for e in Entries], "Failed": []}


@dataclass
class Lane:
    name: str
    cap: int  # the mapping's most concurrent invocations
    provisioned: tuple[int, int] | None  # (MinimumPollers, MaximumPollers)
    limit: float = 0.0  # what the pollers reach now (before sampling)
    active: int = 0
    environments: int = 0
    waiting: list = field(default_factory=list)  # heap of Message
    peak: float = 0.0
    in_flight: int = 0  # messages received and not yet deleted (sampled)
    in_flight_peak: float = 0.0  # its peak, scaled to the whole deployment
    capped_s: int = 0  # seconds with messages waiting at the cap
    ramping_s: int = 0  # seconds with messages waiting below the cap (the pollers still scaling)

    def ceiling(self) -> int:
        if self.provisioned:
            return min(self.cap, self.provisioned[1] * PROVISIONED_PER_POLLER)
        return min(self.cap, STANDARD_MAX)  # standard mode: 1,250 per mapping at most


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


def profile_template(profile: str | None, segments: int = 4) -> dict:
    """Today's template, or the one a `-c profile=NAME` context deploys (passed to the CDK app
    through CDK_CONTEXT_JSON, which cdk.App reads as context)."""
    from jobsched.local.synth import synthesize

    if not profile:
        from bench.common import template

        return template(segments)
    saved = os.environ.get("CDK_CONTEXT_JSON")
    os.environ["CDK_CONTEXT_JSON"] = json.dumps({"profile": profile})
    try:
        return synthesize(ROOT / ".build" / "bench" / f"cdk.out-{profile}", segments=segments, allow_private_targets=True)
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
    sample_by: str = "tenant"  # "tenant": whole tenants run for real; "job": whole jobs (one tenant)

    @property
    def kind(self) -> str:
        return "herd" if self.herd else "tenant" if self.tenants == 1 else "sustained"


SCENARIOS = [
    Scenario("10,000 a second for 10 minutes (1,000 tenants)", 10_000, 10, 1_000, sample=1 / 50),
    Scenario("a herd of 1,000,000 timers at :00 (1,000 tenants)", 1_000_000, 1, 1_000, herd=True, sample=1 / 20),
    Scenario("one tenant at 10,000 a second (3 minutes)", 10_000, 3, 1, sample=1 / 50, sample_by="job"),
]
QUICK = [
    Scenario("quick: 20 a second for 1 minute (10 tenants)", 20, 1, 10),
    Scenario("quick: a herd of 200 at :00 (10 tenants)", 200, 1, 10, herd=True),
    Scenario("quick: one tenant at 20 a second (1 minute)", 20, 1, 1),
]


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
        shared = {"timers"} | ({"jobs"} if scenario.sample_by == "job" else set())
        # Segments are not sampled: every segment's tick runs, its watermark item billed as it is.
        self.billing = Billing(template, tables, {t: 1 / scenario.sample for t in shared},
                               {t: 1 / scenario.sample for t in ("jobs", "timers", "executions")})
        key_names = {name: self.billing.strict.template.tables[name][""] for name in tables.values()}
        self.dynamo = BilledDynamo(self.billing, self.clock, key_names, self.rng.random)
        self.dynamo.partitions["timers"] = {}
        self.dynamo.tick_ms_per_item = TICK_MS_PER_TIMER / scenario.sample
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
        self.stores.timers.page_size = max(1, round(self.stores.timers.page_size * scenario.sample))
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
        from jobsched.domain.jobs import Job, JobSpec, JobState, Target as JobTarget, TargetType
        from jobsched.domain.schedule import cron_schedule, one_time_schedule
        from jobsched.domain.timers import Timer, TimerKind, segment_of
        from jobsched.store.wire import values_to_wire

        s = self.scenario
        first_minute = self.start_ms // 60_000 + 2  # the first bucket the first ticks hand off
        first_ms = first_minute * 60_000
        total = s.rate if s.herd else s.rate * 60  # jobs: the herd, or a minute's worth firing each minute
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
            elif n % round(1 / s.sample):
                continue
            # As new_job_id makes them (creation millisecond, then 20 random hex digits), from a seeded
            # generator.
            job_id = f"job_{self.start_ms - 86_400_000:012x}{ids.getrandbits(80):020x}"
            spec = JobSpec(name=f"e2e-{n}", schedule=schedule, payload=payload, jitter_sec=jitter,
                           target=JobTarget(TargetType.HTTP, {"url": f"https://t{n % 97}.example.com/hook"}))
            # Registered a day before (as its id says): not a job its writer may have just sent (packs).
            job = Job(f"tenant-{tenant:05d}", job_id, spec, JobState.ACTIVE, 1, 1, self.start_ms - 86_400_000,
                      self.start_ms - 86_400_000)
            self.dynamo.put_wire("jobs", values_to_wire(job.to_item()))
            due = job.fire_at(first_ms)
            timer = Timer(due, TimerKind.FIRE, job.tenant_id, job_id, 1, segment_of(job_id, self.deployment.segments))
            self.dynamo.put_wire("timers", timer.to_wire())
            count += 1
        self.expected = count if s.herd else count * s.minutes
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
            if dispatch.due_ms >= (self.due_window[0] + self.due_window[1]) // 2:
                self.late_second_half.append(call_ms - dispatch.due_ms)

    def slots(self, lane: Lane) -> int:
        """Concurrent invocations the sample may hold: the lane's reach times the sample, within
        the tenant's lane share when one tenant is all the load."""
        limit = min(lane.limit, lane.ceiling(), self.deployment.reserved_worker or self.deployment.account_concurrency)
        if self.scenario.tenants == 1 and self.deployment.tenant_percent:
            from jobsched.domain.lane_shares import share_of

            limit = min(limit, share_of(lane.cap, self.deployment.tenant_percent))
        return max(1, int(limit * self.scenario.sample))

    def run(self) -> dict:
        from jobsched.local import strict_aws

        exact = strict_aws.item_size
        strict_aws.item_size = SizeMemo(exact)  # the same sizes, each item's computed once
        try:
            return self._run()
        finally:
            strict_aws.item_size = exact

    def _run(self) -> dict:
        real = self.load()
        s = self.scenario
        last_bucket = (self.due_window[1] - 1) // 60_000
        for lane in self.lanes.values():
            lane.limit = lane.provisioned[0] * PROVISIONED_PER_POLLER if lane.provisioned else STANDARD_START
        ticks_from = self.start_ms // 60_000
        for segment in range(self.deployment.segments):
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
            lane.peak = max(lane.peak, lane.active / self.scenario.sample)
            end = self.invoke(lane, batch, at + POLL_TO_INVOKE_MS + (COLD_START_MS if cold else 0))
            self.invocations.append((len(batch), end - at))
            lane.in_flight += len(batch)
            lane.in_flight_peak = max(lane.in_flight_peak, lane.in_flight / self.scenario.sample)
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

def run_scenario(template: dict, scenario: Scenario) -> dict:
    sim = Simulation(template, scenario)
    timing = sim.run()
    late = sim.late_ms
    lane = max(sim.lanes.values(), key=lambda lane: lane.peak)
    peaks = sim.billing.peaks()
    throttled = dict(sim.billing.throttled)
    p99 = percentile(late, 99)
    return {"sim": sim, "timing": timing, "late": late, "p50": percentile(late, 50), "p99": p99,
            "max": max(late) if late else float("nan"), "lane": lane, "peaks": peaks, "throttled": throttled,
            "tables": sim.billing.table_peaks(), "verdict": verdict(sim, lane, peaks, throttled, p99)}


def verdict(sim: Simulation, lane: Lane, peaks, throttled: dict, p99: float) -> str:
    """Which limit bound the lateness, and what it would take."""
    if p99 <= GOAL_P99_MS:
        return "met: p99 within one second"
    reasons = []
    s = sim.scenario
    hot = [k for k, n in sorted(throttled.items(), key=lambda kv: -kv[1]) if n]
    if hot:
        key = hot[0]
        rcu, wcu = next(((r, w) for k, r, w in peaks if k == key), (0.0, 0.0))
        spread = max(math.ceil(rcu / 3000), math.ceil(wcu / 1000), 2)
        refusals = f"(limit 3,000 / 1,000; {sum(throttled.values()):,} refusals on {len(hot)} keys)"
        if key.startswith("timers"):
            reach = next_minute_slices(sim)
            reasons.append(f"partition throughput: {key} asked {wcu:,.0f} WCU a second {refusals}. The jobs of one "
                           f"Timers slice land in {reach} slice(s) of the next minute; the tick writes each "
                           "slice's next timers at its full pace: more slices (TIMER_SLICES) or segments")
        else:
            reasons.append(f"partition throughput: {key} asked {rcu:,.0f} RCU / {wcu:,.0f} WCU a second {refusals}: "
                           f"spread that key over {spread}+ keys (a shard suffix on a busy tenant's Jobs key: "
                           "the tick's and the worker's consistent reads of its jobs all land on it)")
    rate = s.rate if not s.herd else s.rate / 60
    if s.herd and sim.invocations:
        records = sum(n for n, _ in sim.invocations)
        held_s = sum(ms for _, ms in sim.invocations) / 1000
        need = math.ceil(s.rate * held_s / records)
        beyond = f" (beyond the account's {ACCOUNT_CONCURRENCY:,} and a mapping's reach)" if need > ACCOUNT_CONCURRENCY else ""
        reasons.append(f"a herd of {s.rate:,} due in one second: within one second it would hold about "
                       f"{need:,} concurrent invocations{beyond}; spread over its minute (jitterSec 59) it is the "
                       "rate below")
    if lane.ramping_s:
        reasons.append(f"Lambda's SQS polling ramp: {lane.ramping_s} s with messages waiting while the "
                       f"{lane.name} mapping was still adding pollers (+{STANDARD_RAMP_PER_MINUTE}/min from "
                       f"{STANDARD_START}): provisioned mode with MinimumPollers near the peak")
    if lane.capped_s:
        share = s.tenants == 1 and sim.deployment.tenant_percent
        what = (f"the tenant's lane share ({sim.deployment.tenant_percent}% of {lane.cap})" if share
                else f"the {lane.name} lane cap ({lane.ceiling()} concurrent)")
        records = sum(n for n, _ in sim.invocations) or 1
        held_s = sum(ms for _, ms in sim.invocations) / 1000
        need = math.ceil(rate * held_s / records)
        reasons.append(f"{what}: {lane.capped_s} s with messages waiting at the cap; at the invocations' measured "
                       f"{held_s / len(sim.invocations) * 1000:,.0f} ms for {records / len(sim.invocations):.1f} "
                       f"records, {rate:,.0f} a second holds about {need:,} concurrent invocations")
    late_ticks = [t for t in sim.tick_late if t > 0]
    if late_ticks:
        reasons.append(f"the tick's hand-off: {len(late_ticks)} bucket(s) handed off after their first second "
                       f"(up to {max(late_ticks) / 1000:,.0f} s): more segments")
    return "; ".join(reasons) or "not attributed"


def next_minute_slices(sim: Simulation) -> int:
    """How many Timers slices of the next minute the jobs of one slice of this minute fall into
    (the real slice_of, over the run's own job ids)."""
    from jobsched.domain.timers import slice_of

    minute = sim.due_window[0] // 60_000
    jobs = [key[1] for key in list(sim.dynamo.items["jobs"])[:2_000]]
    first = [j for j in jobs if slice_of(j, minute) == 0]
    return len({slice_of(j, minute + 1) for j in first})


def main(flags: list[str], template: dict | None = None) -> None:
    from bench.common import int_option

    profile = next((f.split("=", 1)[1] for f in flags if f.startswith("--profile=")), None)
    only = next((f.split("=", 1)[1] for f in flags if f.startswith("--scenario=")), None)
    template = template or profile_template(profile)
    deployment = deployment_of(template)
    scenarios = QUICK if "--quick" in flags else SCENARIOS
    sample_n = int_option(flags, "sample", 0)
    print(f"machine: {machine()}")
    print(f"deployment ({profile or 'default template'}): {deployment.segments} segments; lanes "
          + ", ".join(f"{n} cap {c}" + (f" provisioned {p[0]}-{p[1]} pollers" if p else " standard mode")
                      for n, (c, p) in deployment.lanes.items())
          + f"; worker reserved concurrency {deployment.reserved_worker or 'none'} (account {ACCOUNT_CONCURRENCY:,})"
          + f"; lane share of one tenant {deployment.tenant_percent}%; batch {deployment.batch_size}")
    print("tables: " + "; ".join(f"{k} {v}" for k, v in deployment.tables.items()))
    print("assumptions: target latency log-normal, median "
          f"{TARGET_MEDIAN_MS} ms, sigma {TARGET_SIGMA}; DynamoDB call {DYNAMODB_MS} ms; poll to invoke "
          f"{POLL_TO_INVOKE_MS} ms; cold start {COLD_START_MS} ms per new environment; tick {TICK_MS_PER_TIMER:.2f} ms "
          f"a timer (bench herd); SQS polling {STANDARD_START} at first, +{STANDARD_RAMP_PER_MINUTE}/min to "
          f"{STANDARD_MAX:,} (provisioned: {PROVISIONED_PER_POLLER} per poller, +{PROVISIONED_RAMP_PER_MINUTE:,}/min); "
          "no scale-down; the deployment starts idle; partition refusals at 1,000 WCU / 3,000 RCU a key a "
          "second (strict layer); table quotas and warm throughput reported, not enforced; lane shares as a "
          f"concurrency cap; payload {PAYLOAD_BYTES} B; every target call succeeds; a sample's concurrency is whole "
          "invocations (a lane below 1/sample concurrent runs as 1/sample); lateness is of the sample's executions")
    rows, details = _run_all(template, scenarios, only, sample_n)
    _print(rows, details)


def _run_all(template: dict, scenarios: list[Scenario], only: str | None, sample_n: int) -> tuple[list, list]:
    rows, details = [], []
    for scenario in scenarios:
        if only and only != scenario.kind:
            continue
        if sample_n:
            scenario = replace(scenario, sample=1 / sample_n)
        r = run_scenario(template, scenario)
        lane = r["lane"]
        rows.append((scenario.name, f"1/{round(1 / scenario.sample)}", f"{len(r['late']):,}",
                     f"{r['p50']:,.0f}", f"{r['p99']:,.0f}", f"{r['max']:,.0f}",
                     "met" if r["p99"] <= GOAL_P99_MS else "MISSED", f"{lane.name} {lane.peak:,.0f}",
                     f"{r['timing']['seconds']:,.0f}"))
        details.append((scenario, r))
    return rows, details


def _print(rows: list, details: list) -> None:
    print_table("End to end lateness (scheduled second -> target call), real tick and worker on a simulated clock",
                rows, ("scenario", "sample", "executions run", "p50 ms", "p99 ms", "max ms", "goal p99 <= 1 s",
                       "peak concurrency", "run s"))
    for scenario, r in details:
        sim = r["sim"]
        print(f"\n{scenario.name}")
        print("  hottest partition keys (peak units a second; limits 3,000 RCU / 1,000 WCU):")
        for key, rcu, wcu in r["peaks"][:5]:
            refused = r["throttled"].get(key, 0)
            print(f"    {key}: {rcu:,.0f} RCU/s, {wcu:,.0f} WCU/s" + (f", refused {refused:,}" if refused else ""))
        print("  tables (peak units a second; quota 40,000 each; a new on-demand table is warm for 12,000 RU / 4,000 WU):")
        for table, (rcu, wcu) in sorted(r["tables"].items()):
            print(f"    {table}: {rcu:,.0f} RCU/s, {wcu:,.0f} WCU/s")
        print("  lanes: " + ", ".join(f"{lane.name} peak {lane.peak:,.0f} (reached {lane.limit:,.0f} of "
                                      f"{lane.ceiling():,})" for lane in sim.lanes.values() if lane.peak))
        sizes = sim.pack_sizes
        print(f"  pack fill: {sum(sizes) / max(len(sizes), 1):.1f} entries a message received "
              f"({len(sizes):,} messages, largest {max(sizes, default=0)}); peak in flight: "
              + ", ".join(f"{lane.name} {lane.in_flight_peak:,.0f}" for lane in sim.lanes.values() if lane.peak))
        collapsed = sim.expected - len(sim.late_ms)
        print(f"  due in the window: {sim.expected:,}; ran: {len(sim.late_ms):,}"
              + (f"; {collapsed:,} never ran: handed off over a minute late, a recurring job's missed fires "
                 "are one (misfirePolicy RUN_ONCE, the default)" if collapsed > 0 else ""))
        if not scenario.herd:
            half = sim.late_second_half
            print(f"  due in the second half of the window: p50 {percentile(half, 50):,.0f} ms, p99 "
                  f"{percentile(half, 99):,.0f} ms, max {max(half, default=0):,.0f} ms")
        latest = max(sim.tick_late, default=0) / 1000
        print(f"  record errors handed back: {sim.record_errors:,}; failed ticks: {sim.tick_errors}; the latest "
              f"bucket's hand-off ended {abs(latest):,.1f} s {'after' if latest > 0 else 'before'} its first second")
        print(f"  verdict: {r['verdict']}")
