"""bench e2e's model of AWS: its scaling constants, the simulated clock, DynamoDB billed per
key and second by the strict layer's rules, SQS lanes and Lambda's polling (see bench/e2e.py)."""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

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
        self.refuse = True  # False (--unthrottled): nothing refused, each key's peak is what it was asked

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

        if key is None or not self.enabled or not self.refuse:
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

    def _retried(self, operation: str, partition: str | None, reads: bool, indexes: list | tuple = ()) -> None:
        """botocore's standard retries of a throttled single-item call, then the error. `indexes`:
        the index partition keys the write would write (GSI back pressure, as the strict layer)."""
        for attempt in range(BOTOCORE_ATTEMPTS):
            if not any(self.billing.over(key, self._second(), reads) for key in (partition, *indexes)):
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
              ConsistentRead=False, KeyConditionExpression="", **_):
        import bisect

        from jobsched.local.strict_aws import item_size, read_units

        self.calls["Query"] += 1
        # The partition key's value, and a sort-key prefix (`begins_with`: the job snapshots' fences).
        prefix_name = re.search(r"begins_with\(\s*[#\w]+\s*,\s*(:\w+)\s*\)", KeyConditionExpression)
        prefix = ExpressionAttributeValues[prefix_name.group(1)]["S"] if prefix_name else ""
        between = re.search(r"BETWEEN\s+(:\w+)\s+AND\s+(:\w+)", KeyConditionExpression)
        bounds = tuple(ExpressionAttributeValues[between.group(i)]["S"] for i in (1, 2)) if between else None
        sort_names = {prefix_name.group(1)} if prefix_name else set(between.groups()) if between else set()
        (value,) = [v for k, v in ExpressionAttributeValues.items() if k not in sort_names]
        hash_key, range_key = self.keys[TableName]
        pk = value["S"]
        partition = self._partition(TableName, {hash_key: value})
        self._retried("Query", partition, reads=True)
        sks = self.partitions[TableName].get(pk, [])
        if prefix:
            sks = sks[bisect.bisect_left(sks, prefix):bisect.bisect_left(sks, prefix + "\U0010ffff")]
        if bounds:
            sks = sks[bisect.bisect_left(sks, bounds[0]):bisect.bisect_right(sks, bounds[1])]
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
        before = self.items[TableName].get(self._key(TableName, Item))
        self._retried("PutItem", self._partition(TableName, Item), reads=False,
                      indexes=self.billing.strict._index_partitions(TableName, before, Item))
        self._write(TableName, Item, Item, before)
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
        before = self.items[TableName].get(self._key(TableName, Key))
        after = dict(before) if before else dict(Key)
        _apply(after, UpdateExpression, ExpressionAttributeNames or {}, ExpressionAttributeValues or {})
        self._retried("UpdateItem", self._partition(TableName, Key), reads=False,
                      indexes=self.billing.strict._index_partitions(TableName, before, after))
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
        return self._make(segment, mark.get("claimed"), mark.get("done"), mark.get("minute"), mark.get("sk"),
                          dict(mark.get("claims", {})))

    def claim(self, segment: int, minute: int, at_ms: int | None = None) -> int | None:
        self._bill(segment, wcu=1)
        mark = self._marks[segment]
        if at_ms is not None and mark.get("claimed", minute - 1) < minute:
            mark.setdefault("claims", {})[minute] = at_ms
        mark["claimed"] = max(minute, mark.get("claimed", minute))
        return mark.get("claims", {}).get(minute)

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
