"""DynamoDB global tables in multi-Region eventual consistency (MREC) between the emulator's
backends of several regions: the replication of the region simulation (local/regions.py, whose
docstring says what is and is not modelled)."""
from __future__ import annotations

import copy
import heapq
import itertools
import json
import random
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable

from jobsched.local.emulator import EMULATOR_LOCK
from jobsched.local.stack import ACCOUNT

# --- Replication ---------------------------------------------------------------------------------

Version = tuple  # (timestamp ms, region rank, sequence): compared as a tuple; the later write wins


@dataclass(order=True)
class _Replication:
    due_ms: int
    seq: int
    src: str = field(compare=False)
    dst: str = field(compare=False)
    table: str = field(compare=False)  # logical id
    key: str = field(compare=False)  # the item's key, canonical JSON of its wire form
    image: dict | None = field(compare=False)  # the item's new image (wire form); None: deleted
    version: Version = field(compare=False)


class Replicator:
    """DynamoDB global tables in multi-Region eventual consistency, between the emulator's
    backends of several regions (see the module's docstring for what is and is not modelled).

    `tables`: region → logical id → physical table name (CloudFormation names each region's
    tables afresh: tables are matched across regions by logical id). A write captured in a region
    (`capture`, after it succeeded there) is read from that region's backend and queued to every
    other region, due after the pair's lag plus jitter; `apply_due` writes what is due straight
    into the destination's backend (no client: not captured again, not billed), unless an item's
    version there is already later (last writer wins)."""

    def __init__(self, clock, regions: list[str], tables: dict[str, dict[str, str]], lag_ms: int = 1000,
                 pair_lag_ms: dict[tuple[str, str], int] | None = None, jitter_ms: int = 0, seed: int = 0,
                 region_clocks: dict[str, Any] | None = None) -> None:
        self.clock = clock
        self.regions = list(regions)
        self.rank = {r: i for i, r in enumerate(self.regions)}
        self.tables = tables
        self.logical = {(r, name): logical for r, names in tables.items() for logical, name in names.items()}
        self.lag_ms = lag_ms
        self.pair_lag_ms = dict(pair_lag_ms or {})
        self.jitter_ms = jitter_ms
        self.random = random.Random(seed)
        self.region_clocks = region_clocks or {}
        self.versions: dict[str, dict[tuple[str, str], Version]] = {r: {} for r in self.regions}
        self._pending: list[_Replication] = []  # a heap by due time
        self._held: list[_Replication] = []  # due, but its source or destination is cut off
        self._seq = itertools.count()
        # A function's thread pools may write at once: captures and deliveries take turns.
        self._lock = threading.RLock()
        self._down: set[str] = set()  # killed: inbound held (outbound dropped or held)
        self._isolated: set[str] = set()  # partitioned with replication=True: both ways held
        self.enabled = True  # False: writes are captured (versions kept) but queued to nobody
        self.captured = 0
        self.applied = 0
        self.superseded = 0  # arrived older than the destination's version: discarded (LWW)
        self.lost = 0  # dropped with their region's loss

    # --- capture --------------------------------------------------------------------------------

    def capture(self, region: str, operation: str, params: dict, parsed: dict) -> int:
        """Record the items a successful write changed in `region`; returns how many."""
        changed = 0
        for table, key in self._written_keys(region, operation, params, parsed):
            logical = self.logical.get((region, table))
            if logical is None:
                continue  # not a replicated table (the ownership table, another stack's)
            self.record(region, logical, key)
            changed += 1
        return changed

    def record(self, region: str, logical: str, key: dict) -> None:
        """The item `key` of `logical` was just written in `region`: stamp its new version and
        queue it to every other region."""
        with self._lock:
            self._record(region, logical, key)

    def _record(self, region: str, logical: str, key: dict) -> None:
        image = self._read(region, logical, key)
        ref = (logical, _canonical(key))
        now = self._now(region)
        current = self.versions[region].get(ref)
        if current is not None and current[0] >= now:
            now = current[0] + 1  # never below the version it overwrote (see the docstring)
        version = (now, self.rank[region], next(self._seq))
        self.versions[region][ref] = version
        self.captured += 1
        if not self.enabled:
            return
        sent_at = self.clock.now_ms()
        for dst in self.regions:
            if dst == region:
                continue
            due = sent_at + self.pair_lag_ms.get((region, dst), self.lag_ms)
            if self.jitter_ms:
                due += self.random.randint(0, self.jitter_ms)
            heapq.heappush(self._pending, _Replication(due, next(self._seq), region, dst, logical, ref[1],
                                                       copy.deepcopy(image), version))

    def _now(self, region: str) -> int:
        clock = self.region_clocks.get(region)
        return (clock or self.clock).now_ms()

    def _written_keys(self, region: str, operation: str, params: dict, parsed: dict) -> Iterable[tuple[str, dict]]:
        if operation in ("UpdateItem", "DeleteItem"):
            yield _name(params["TableName"]), params["Key"]
        elif operation == "PutItem":
            table = _name(params["TableName"])
            yield table, self._key_of(region, table, params["Item"])
        elif operation == "BatchWriteItem":
            unprocessed = {_name(t): [json.dumps(r, sort_keys=True) for r in rs]
                           for t, rs in (parsed.get("UnprocessedItems") or {}).items()}
            for table, requests in params.get("RequestItems", {}).items():
                left = unprocessed.get(_name(table), [])
                for request in requests:
                    if json.dumps(request, sort_keys=True) in left:
                        continue  # not written: the caller sends it again
                    if "PutRequest" in request:
                        yield _name(table), self._key_of(region, _name(table), request["PutRequest"]["Item"])
                    elif "DeleteRequest" in request:
                        yield _name(table), request["DeleteRequest"]["Key"]
        elif operation == "TransactWriteItems":
            for entry in params.get("TransactItems", []):
                if "Put" in entry:
                    table = _name(entry["Put"]["TableName"])
                    yield table, self._key_of(region, table, entry["Put"]["Item"])
                elif "Update" in entry:
                    yield _name(entry["Update"]["TableName"]), entry["Update"]["Key"]
                elif "Delete" in entry:
                    yield _name(entry["Delete"]["TableName"]), entry["Delete"]["Key"]

    def _table(self, region: str, logical: str):
        from moto.dynamodb.models import dynamodb_backends

        return dynamodb_backends[ACCOUNT][region].tables[self.tables[region][logical]]

    def _key_of(self, region: str, table: str, item: dict) -> dict:
        from moto.dynamodb.models import dynamodb_backends

        stored = dynamodb_backends[ACCOUNT][region].tables.get(table)
        if stored is None:
            return {}
        names = [stored.hash_key_attr] + ([stored.range_key_attr] if stored.range_key_attr else [])
        return {n: item[n] for n in names if n in item}

    def _read(self, region: str, logical: str, key: dict) -> dict | None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        with EMULATOR_LOCK:
            table = self._table(region, logical)
            hash_key, range_key = _key_types(table, key, DynamoType)
            item = table.get_item(hash_key, range_key)
            return item.to_json()["Attributes"] if item is not None else None

    # --- delivery -------------------------------------------------------------------------------

    def _deliverable(self, event: _Replication) -> bool:
        cut = self._down | self._isolated
        return event.src not in cut and event.dst not in cut

    def next_due_ms(self) -> int | None:
        """When the next replication that can be applied is due (None: nothing pending)."""
        while self._pending and not self._deliverable(self._pending[0]):
            self._held.append(heapq.heappop(self._pending))
        return self._pending[0].due_ms if self._pending else None

    def apply_due(self, now_ms: int | None = None) -> int:
        """Apply every replication due by now (the shared clock); returns how many arrived."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        with self._lock:
            return self._apply_due(now)

    def _apply_due(self, now: int) -> int:
        arrived = 0
        while self._pending and self._pending[0].due_ms <= now:
            event = heapq.heappop(self._pending)
            if not self._deliverable(event):
                self._held.append(event)
                continue
            self._apply(event)
            arrived += 1
        return arrived

    def _apply(self, event: _Replication) -> None:
        ref = (event.table, event.key)
        current = self.versions[event.dst].get(ref)
        if current is not None and current >= event.version:
            self.superseded += 1
            return
        from moto.dynamodb.models.dynamo_type import DynamoType

        with EMULATOR_LOCK:
            table = self._table(event.dst, event.table)
            if event.image is None:
                hash_key, range_key = _key_types(table, json.loads(event.key), DynamoType)
                if table.get_item(hash_key, range_key) is not None:
                    table.delete_item(hash_key, range_key)
            else:
                table.put_item(copy.deepcopy(event.image))
        self.versions[event.dst][ref] = event.version
        self.applied += 1

    def flush(self) -> int:
        """Apply everything that can be applied now, whatever its due time (a test's shortcut)."""
        arrived = 0
        for event in sorted(self._pending):
            if self._deliverable(event):
                self._apply(event)
                arrived += 1
        self._pending = [e for e in self._pending if not self._deliverable(e)]
        heapq.heapify(self._pending)
        return arrived

    # --- faults ---------------------------------------------------------------------------------

    def region_down(self, region: str, lose_unreplicated: bool = True) -> int:
        """`region` is lost: what it wrote that has not arrived elsewhere is dropped (or held, with
        lose_unreplicated=False); what others send it is held. Returns how many writes were lost."""
        self._down.add(region)
        if not lose_unreplicated:
            return 0
        before = len(self._pending) + len(self._held)
        self._pending = [e for e in self._pending if e.src != region]
        self._held = [e for e in self._held if e.src != region]
        heapq.heapify(self._pending)
        lost = before - len(self._pending) - len(self._held)
        self.lost += lost
        return lost

    def region_up(self, region: str) -> None:
        self._down.discard(region)
        self._release()

    def isolate(self, region: str) -> None:
        self._isolated.add(region)

    def reconnect(self, region: str) -> None:
        self._isolated.discard(region)
        self._release()

    def _release(self) -> None:
        for event in self._held:
            heapq.heappush(self._pending, event)
        self._held = []

    def backlog(self) -> dict[tuple[str, str], int]:
        """(source, destination) → writes queued between them and not yet applied (held included)."""
        counts: dict[tuple[str, str], int] = {}
        for event in itertools.chain(self._pending, self._held):
            counts[(event.src, event.dst)] = counts.get((event.src, event.dst), 0) + 1
        return counts


def _name(table: str) -> str:
    return table.rsplit("/", 1)[-1] if table.startswith("arn:") else table


def _canonical(key: dict) -> str:
    return json.dumps(key, sort_keys=True)


def _key_types(table, key: dict, DynamoType):
    hash_key = DynamoType(key[table.hash_key_attr])
    range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
    return hash_key, range_key


def _tables_named(params: dict) -> set[str]:
    names = set()
    if "TableName" in params:
        names.add(_name(params["TableName"]))
    for table in (params.get("RequestItems") or {}):
        names.add(_name(table))
    for entry in params.get("TransactItems") or ():
        for action in entry.values():
            if isinstance(action, dict) and "TableName" in action:
                names.add(_name(action["TableName"]))
    return names
