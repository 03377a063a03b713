"""DynamoDB: sizes as DynamoDB counts them (AWS-LIMITS.md §1), the limits a request is held to,
and the throttle of a partition key past its capacity within one second of the emulator's clock."""
from __future__ import annotations

import math
import re

from jobsched.local.strict_aws.base import (BATCH_GET_MAX_KEYS, BATCH_WRITE_MAX_ITEMS, KB,
    MAX_EXPRESSION_BYTES, MAX_ITEM_BYTES, MAX_PARTITION_KEY_BYTES, MAX_PLACEHOLDER_BYTES, MAX_SORT_KEY_BYTES,
    MAX_SUBSTITUTION_BYTES, TRANSACTION_MAX_BYTES, TRANSACTION_MAX_ITEMS, StrictLayerError, _Call, _error,
    _raw_bytes)


# ---------------------------------------------------------------------------------------------
# DynamoDB sizes (AWS-LIMITS.md §1, "Size formula")

def number_size(text: str) -> int:
    digits = text.lstrip("+-").lower().split("e")[0].replace(".", "").lstrip("0").rstrip("0")
    return (len(digits) + 1) // 2 + 1


def value_size(value: dict) -> int:
    (kind, inner), = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        return number_size(inner)
    if kind == "B":
        return len(_raw_bytes(inner))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in inner)
    if kind == "NS":
        return sum(number_size(n) for n in inner)
    if kind == "BS":
        return sum(len(_raw_bytes(b)) for b in inner)
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in inner)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(v) + 1 for k, v in inner.items())
    raise StrictLayerError(f"unknown DynamoDB type {kind!r}")


def item_size(item: dict | None) -> int:
    """An item's size as DynamoDB counts it (attribute names count), from its wire form."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / KB))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / (4 * KB)))
    return units if consistent else units / 2


class DynamoDbChecks:
    """DynamoDB's limits before a call (a mixin of StrictAws): key, item, expression, batch and
    transaction sizes, and each partition key's throughput within its second."""

    def _keys_of(self, table: str, item: dict, index: str = "") -> tuple[str, str | None] | None:
        keys = self.template.tables.get(table, {}).get(index)
        return keys

    def _partition(self, table: str, item: dict, index: str = "") -> str | None:
        keys = self._keys_of(table, item, index)
        if keys is None or keys[0] not in item:
            return None
        (kind, value), = item[keys[0]].items()
        name = f"{table}/{index}" if index else table
        return f"{name}[{value if kind != 'B' else '<binary>'}]"

    def _check_key(self, client, operation: str, table: str, key: dict) -> None:
        keys = self.template.tables.get(table, {}).get("")
        if keys is None:
            return
        for name, limit in zip(keys, (MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES)):
            if name and name in key and value_size(key[name]) > limit:
                raise _error(client, operation, "ValidationException",
                             f"One or more parameter values were invalid: Size of {'hashkey' if limit == MAX_PARTITION_KEY_BYTES else 'rangekey'} "
                             f"has exceeded the maximum size limit of {limit} bytes", 400)

    def _check_expressions(self, client, operation: str, request: dict) -> None:
        for name in ("KeyConditionExpression", "FilterExpression", "ConditionExpression", "UpdateExpression",
                     "ProjectionExpression"):
            text = request.get(name)
            if isinstance(text, str) and len(text.encode("utf-8")) > MAX_EXPRESSION_BYTES:
                raise _error(client, operation, "ValidationException",
                             f"Invalid {name}: Expression size has exceeded the maximum allowed size; "
                             f"expression size: {len(text.encode())}", 400)
        for placeholder in list(request.get("ExpressionAttributeNames") or {}) + list(
                request.get("ExpressionAttributeValues") or {}):
            if len(placeholder.encode("utf-8")) > MAX_PLACEHOLDER_BYTES:
                raise _error(client, operation, "ValidationException",
                             f"ExpressionAttributeNames or Values contains invalid key: {placeholder[:40]}...: "
                             f"longer than {MAX_PLACEHOLDER_BYTES} bytes", 400)
        values = request.get("ExpressionAttributeValues") or {}
        if values and sum(value_size(v) for v in values.values()) > MAX_SUBSTITUTION_BYTES:
            raise _error(client, operation, "ValidationException",
                         "ExpressionAttributeValues exceed the 2 MB limit of all substitutions", 400)

    def _check_item(self, client, operation: str, table: str, item: dict) -> None:
        size = item_size(item)
        if size > MAX_ITEM_BYTES:
            raise _error(client, operation, "ValidationException",
                         f"Item size has exceeded the maximum allowed size (item of {size} bytes in {table})", 400)
        self._check_key(client, operation, table, item)

    def _throttle(self, client, call: _Call, partitions: list[str | None], reads: bool) -> None:
        for key in partitions:
            if key is None:
                continue
            rcu, wcu = self.ledger.used(key, call.second)
            over = rcu >= self.limits.partition_rcu if reads else wcu >= self.limits.partition_wcu
            if over:
                self.ledger.partitions[key].throttled += 1
                # AWS's reason names the resource (Table or Index), the operation and the limit.
                resource = "Index" if "/" in key.split("[", 1)[0] else "Table"
                raise _error(client, call.operation, "ProvisionedThroughputExceededException",
                             f"Throughput exceeds the current capacity for one or more partitions: {key} "
                             f"(ThrottlingReason: {resource}{'Read' if reads else 'Write'}KeyRangeThroughputExceeded)",
                             400)

    def _index_partitions(self, table: str, before: dict | None, after: dict | None,
                          update: dict | None = None) -> list[str | None]:
        """The index partition keys a write to `table` writes: GSI back pressure (DynamoDB
        Developer Guide, "GSI write throttling and back pressure"): an index updates from its
        table, and a write whose index partition has no capacity left is refused on the table
        itself (ProvisionedThroughputExceededException, reason IndexWriteKeyRangeThroughputExceeded),
        as its index partition key is held to the same 1,000 WCU a second as a table's. An index
        is written only where the item's entry changes (dynamodb_billing.py); a key-changing write
        writes the old entry's partition and the new one's. `before`: the item as stored, when known
        (unknown under use_reports: then an update or delete checks only the index partition its
        update expression assigns). `update`: an UpdateItem's request (its item after is not known
        before the call: it writes an index whose key or projected attribute the expression names)."""
        partitions: list[str | None] = []
        for index, keys in self.template.tables.get(table, {}).items():
            if not index:
                continue
            old = self._index_entry(table, index, before)
            if update is None:
                new = self._index_entry(table, index, after)
                if old != new:
                    partitions += [self._partition(table, version, index)
                                   for version, entry in ((before, old), (after, new)) if entry is not None]
                continue
            names = _updated_names(update)
            kind, extra = self.template.projections.get(table, {}).get(index, ("ALL", frozenset()))
            if old is not None and (kind == "ALL" or names & ({k for k in keys if k} | set(extra))):
                partitions.append(self._partition(table, before, index))
            assigned = _assigned_value(update, keys[0])
            if assigned is not None:
                partitions.append(self._partition(table, {keys[0]: assigned}, index))
        return list(dict.fromkeys(partitions))

    def _check_dynamodb(self, client, call: _Call) -> None:
        p, op = call.params, call.operation
        self._check_expressions(client, op, p)
        table = p.get("TableName")
        if op == "PutItem":
            self._check_item(client, op, table, p["Item"])
            self._note_before(call, table, self._primary(table, p["Item"]))
            self._throttle(client, call, [self._partition(table, p["Item"])] + self._index_partitions(
                table, self._known_before(call, table, p["Item"]), p["Item"]), reads=False)
        elif op in ("UpdateItem", "DeleteItem"):
            self._check_key(client, op, table, p["Key"])
            self._note_before(call, table, p["Key"])
            self._throttle(client, call, [self._partition(table, p["Key"])] + self._index_partitions(
                table, self._known_before(call, table, p["Key"]), None, p if op == "UpdateItem" else None),
                reads=False)
        elif op == "GetItem":
            self._check_key(client, op, table, p["Key"])
            self._throttle(client, call, [self._partition(table, p["Key"])], reads=True)
        elif op in ("Query", "Scan"):
            index = p.get("IndexName") or ""
            values = p.get("ExpressionAttributeValues") or {}
            partition = None
            keys = self.template.tables.get(table, {}).get(index)
            if op == "Query" and keys:
                # The partition is the value the key condition compares the hash key with.
                names = p.get("ExpressionAttributeNames") or {}
                match = re.search(r"([#\w]+)\s*=\s*(:\w+)", p.get("KeyConditionExpression", ""))
                if match and names.get(match.group(1), match.group(1)) == keys[0] and match.group(2) in values:
                    partition = self._partition(table, {keys[0]: values[match.group(2)]}, index)
            call.before["partition"] = partition
            self._throttle(client, call, [partition], reads=True)
        elif op == "BatchGetItem":
            count = sum(len(r["Keys"]) for r in p["RequestItems"].values())
            if count > BATCH_GET_MAX_KEYS:
                raise _error(client, op, "ValidationException",
                             f"Too many items requested for the BatchGetItem call: {count} > {BATCH_GET_MAX_KEYS}", 400)
            for name, request in p["RequestItems"].items():
                self._check_expressions(client, op, request)
                for key in request["Keys"]:
                    self._check_key(client, op, name, key)
                self._throttle(client, call, [self._partition(name, k) for k in request["Keys"]], reads=True)
        elif op == "BatchWriteItem":
            requests = [(name, r) for name, rs in p["RequestItems"].items() for r in rs]
            if len(requests) > BATCH_WRITE_MAX_ITEMS:
                raise _error(client, op, "ValidationException",
                             "1 validation error detected: Value at 'requestItems' failed to satisfy constraint: "
                             f"Map value must satisfy constraint: [Member must have length less than or equal to "
                             f"{BATCH_WRITE_MAX_ITEMS}] ({len(requests)} requests)", 400)
            for name, request in requests:
                item = request["PutRequest"]["Item"] if "PutRequest" in request else request["DeleteRequest"]["Key"]
                if "PutRequest" in request:
                    self._check_item(client, op, name, item)
                else:
                    self._check_key(client, op, name, item)
                self._note_before(call, name, self._primary(name, item))
                self._throttle(client, call, [self._partition(name, item)] + self._index_partitions(
                    name, self._known_before(call, name, item), item if "PutRequest" in request else None),
                    reads=False)
        elif op in ("TransactWriteItems", "TransactGetItems"):
            items = p["TransactItems"]
            if len(items) > TRANSACTION_MAX_ITEMS:
                raise _error(client, op, "ValidationException",
                             f"Member must have length less than or equal to {TRANSACTION_MAX_ITEMS}", 400)
            total = 0
            for entry in items:
                (kind, action), = entry.items()
                self._check_expressions(client, op, action)
                name = action["TableName"]
                key = self._primary(name, action.get("Item") or action["Key"])
                if kind == "Put":
                    self._check_item(client, op, name, action["Item"])
                    total += item_size(action["Item"])
                else:
                    self._check_key(client, op, name, key)
                indexes: list[str | None] = []
                if op == "TransactWriteItems":
                    self._note_before(call, name, key)
                    if kind != "ConditionCheck":
                        indexes = self._index_partitions(name, self._known_before(call, name, key), action.get("Item"),
                                                         action if kind == "Update" else None)
                self._throttle(client, call, [self._partition(name, key)] + indexes, reads=(kind == "Get"))
            if total > TRANSACTION_MAX_BYTES:
                raise _error(client, op, "ValidationException",
                             f"Transaction request cannot be larger than 4 MB ({total} bytes)", 400)


_UPDATE_CLAUSE = re.compile(r"\b(SET|REMOVE|ADD|DELETE)\b", re.I)


def _updated_names(update: dict) -> set[str]:
    """The attributes an update expression names (placeholders resolved; values, function names
    and clause words left out): those it may change (a path's inner names too: more, never fewer)."""
    names = update.get("ExpressionAttributeNames") or {}
    text = re.sub(r":\w+", " ", update.get("UpdateExpression", ""))
    text = _UPDATE_CLAUSE.sub(" ", re.sub(r"\b\w+\s*\(", "(", text))
    return {names.get(token, token) for token in re.findall(r"#?\w+", text)}


def _assigned_value(update: dict, attribute: str) -> dict | None:
    """The value an update's SET gives `attribute` straight from a placeholder (`attr = :v`), or None."""
    names = update.get("ExpressionAttributeNames") or {}
    values = update.get("ExpressionAttributeValues") or {}
    for name, value in re.findall(r"(#?\w+)\s*=\s*(:\w+)\s*(?:,|$|\s+(?:REMOVE|ADD|DELETE)\b)",
                                  update.get("UpdateExpression", ""), re.I):
        if names.get(name, name) == attribute and value in values:
            return values[value]
    return None
