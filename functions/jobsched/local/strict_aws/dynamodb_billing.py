"""DynamoDB billing: what each call costs in capacity units per partition key (tables and
indexes), and the items before and after a write the bill is sized on."""
from __future__ import annotations

import json
import logging
from typing import Callable

from botocore.exceptions import ClientError

from jobsched.local.strict_aws.base import MAX_ITEM_BYTES, _Call, _error, _internal
from jobsched.local.strict_aws.dynamodb import item_size, read_units, write_units
from jobsched.local.strict_aws.reports import REPORT_FIELD, _peek_moto, report_keys


logger = logging.getLogger(__name__)


class DynamoDbBilling:
    """Capacity units of each DynamoDB call (a mixin of StrictAws), billed per partition key on
    the larger of the item before and after a write (indexes where their entry changes), with
    the items read from the emulator's report, moto's backend or an unchecked GetItem."""

    def _primary(self, table: str, item: dict) -> dict:
        keys = self.template.tables.get(table, {}).get("")
        if keys is None:
            return item
        return {k: item[k] for k in keys if k and k in item}

    def _bill_write(self, table: str, key: dict, before: dict | None, after: dict | None, units_factor: int,
                    second: int, written: bool = True) -> None:
        size = max(item_size(before), item_size(after))
        wcu = write_units(size) * units_factor
        partition = self._partition(table, key)
        if partition:
            self.ledger.bill(partition, second, wcu=wcu)
        # An index is written only where its entry changes (DynamoDB's GSI write rules): none when
        # neither its key nor a projected attribute changed, one to add, update or remove an entry,
        # two when its key changed (the old entry removed, the new one added). An entry is sized
        # by what the index projects (KEYS_ONLY: the table's and the index's keys). A write refused
        # by its condition writes no index.
        if not written or (after is None and before is None):
            return
        for index in self.template.tables.get(table, {}):
            if not index:
                continue
            old, new = self._index_entry(table, index, before), self._index_entry(table, index, after)
            if old == new:
                continue
            keys_of = self.template.tables[table][index]
            moved = old is not None and new is not None and any(old.get(k) != new.get(k) for k in keys_of if k)
            for version, entry in ((before, old), (after, new)) if moved or new is None else ((after, new),):
                part = self._partition(table, version or {}, index)
                if part and entry is not None:
                    self.ledger.bill(part, second, wcu=write_units(item_size(entry)))

    def _index_entry(self, table: str, index: str, item: dict | None) -> dict | None:
        """The entry `item` has in `index` (None: the item is not in it: a key attribute missing)."""
        keys = self.template.tables[table][index]
        if not item or any(k and k not in item for k in keys):
            return None
        kind, extra = self.template.projections.get(table, {}).get(index, ("ALL", frozenset()))
        if kind == "ALL":
            return item
        wanted = {k for k in keys + self.template.tables[table][""] if k} | (extra if kind == "INCLUDE" else set())
        return {k: v for k, v in item.items() if k in wanted}

    def _bill_dynamodb(self, client, call: _Call, parsed: dict, ok: bool) -> None:
        p, op, second = call.params, call.operation, call.second
        table = p.get("TableName")
        consistent = bool(p.get("ConsistentRead"))
        if op in ("PutItem", "UpdateItem", "DeleteItem"):
            key = self._primary(table, p["Item"]) if op == "PutItem" else p["Key"]
            before = call.before.get(_ref(table, key))
            after = None if op == "DeleteItem" else (p["Item"] if op == "PutItem" else self._peek_after(call, table, key))
            if not ok:
                after = p["Item"] if op == "PutItem" else None  # a failed condition is billed too
            if ok and op == "UpdateItem" and item_size(after) > MAX_ITEM_BYTES:
                if not call.unreported:  # the item before unknown: never "restored" by deleting it
                    self._restore(table, key, before)
                raise _error(client, op, "ValidationException",
                             f"Item size to update has exceeded the maximum allowed size ({item_size(after)} bytes)", 400)
            self._bill_write(table, key, before, after, 1, second, written=ok)
        elif op == "GetItem" and ok:
            item = parsed.get("Item")
            size = item_size(self._peek_after(call, table, p["Key"])) if item and "ProjectionExpression" in p else item_size(item)
            self.ledger.bill(self._partition(table, p["Key"]) or table, second, rcu=read_units(size, consistent))
        elif op in ("Query", "Scan") and ok:
            size = sum(item_size(i) for i in parsed.get("Items", []))
            self.ledger.bill(call.before.get("partition") or f"{table}(scan)", second,
                             rcu=read_units(size, consistent))
        elif op == "BatchGetItem" and ok:
            unprocessed = {_ref(n, k) for n, r in (parsed.get("UnprocessedKeys") or {}).items() for k in r["Keys"]}
            for name, request in p["RequestItems"].items():
                consistent = bool(request.get("ConsistentRead"))
                if "ProjectionExpression" in request:
                    # Billed on the whole item, which the answer does not hold (nor, projected
                    # away, its key): each key asked for, as stored (a missing item costs a read).
                    for key in request["Keys"]:
                        if _ref(name, key) not in unprocessed:
                            self.ledger.bill(self._partition(name, key) or name, second,
                                             rcu=read_units(item_size(self._peek_after(call, name, key)), consistent))
                    continue
                items = parsed.get("Responses", {}).get(name, [])
                for item in items:
                    key = self._primary(name, item)
                    self.ledger.bill(self._partition(name, key) or name, second, rcu=read_units(item_size(item), consistent))
                found = {_ref(name, self._primary(name, i)) for i in items}
                for key in request["Keys"]:  # a missing item still costs a read
                    if _ref(name, key) not in found and _ref(name, key) not in unprocessed:
                        self.ledger.bill(self._partition(name, key) or name, second, rcu=read_units(0, consistent))
        elif op == "BatchWriteItem" and ok:
            unprocessed = {_ref(n, self._primary(n, (r.get("PutRequest") or {}).get("Item")
                                                 or r.get("DeleteRequest", {}).get("Key")))
                           for n, rs in (parsed.get("UnprocessedItems") or {}).items() for r in rs}
            for name, requests in p["RequestItems"].items():
                for request in requests:
                    item = request.get("PutRequest", {}).get("Item")
                    key = self._primary(name, item or request["DeleteRequest"]["Key"])
                    if _ref(name, key) in unprocessed:
                        continue
                    self._bill_write(name, key, call.before.get(_ref(name, key)), item, 1, second)
        elif op == "TransactWriteItems":
            for entry in p["TransactItems"]:
                (kind, action), = entry.items()
                name = action["TableName"]
                key = self._primary(name, action.get("Item") or action["Key"])
                after = action.get("Item") if kind == "Put" else (self._peek_after(call, name, key) if kind == "Update" and ok else None)
                self._bill_write(name, key, call.before.get(_ref(name, key)), after, 2, second, written=ok)
        elif op == "TransactGetItems" and ok:
            for entry in p["TransactItems"]:
                action = entry["Get"]
                self.ledger.bill(self._partition(action["TableName"], action["Key"]) or action["TableName"], second,
                                 rcu=2 * read_units(item_size(self._peek_after(call, action["TableName"], action["Key"])), True))

    def _note_before(self, call: _Call, table: str, key: dict) -> None:
        """The item before a write: read now, or (reports on) answered with the write itself."""
        if not self._reports:
            call.before[_ref(table, key)] = self._peek(table, key)

    def _known_before(self, call: _Call, table: str, item: dict) -> dict | None:
        """The item before a write, where read before the call (_note_before), else None."""
        return call.before.get(_ref(table, self._primary(table, item)))

    def _peek_after(self, call: _Call, table: str, key: dict) -> dict | None:
        """The item after a write (or in full, for a projected read): as reported, else read now."""
        ref = _ref(table, key)
        return call.after[ref] if ref in call.after else self._peek(table, key)

    def _take_report(self, call: _Call, http_response) -> None:
        """The items the emulator read for this call under the same hold of its lock (before the
        write and after it), in the order of report_keys: no request of their own."""
        keys = report_keys(call.operation, call.params, self._primary)
        if not keys:
            return  # nothing to report (a query, a read without projection): the answer is not read again
        content = http_response.content or b""
        at = content.rfind(b'"' + REPORT_FIELD.encode() + b'":')
        try:
            reported = json.loads(content[at + len(REPORT_FIELD) + 3:-1]) if at >= 0 else None
        except ValueError:
            reported = None
        if not isinstance(reported, list) or len(reported) != len(keys):
            # Not reported (a request the emulator could not read for): billed on what the call
            # carries and the item as it now is, and an oversize update is refused but not undone.
            call.unreported = True
            logger.warning("the emulator sent no items report for %s; billed without the item before it",
                           call.operation)
            return
        for (table, key, kind), (before, after) in zip(keys, reported):
            ref = _ref(table, key)
            if kind != "read":
                call.before[ref] = before
            if kind in ("update", "read"):
                call.after[ref] = after

    def use_reports(self) -> None:
        """Have the emulator's process answer each DynamoDB call with the items the layer bills
        and checks (read in the request's own hold of the lock), instead of a read before and one
        after: the local stack's emulator, whose lock those reads held most of the time."""
        self._reports = True

    # The item as stored, without billing it: from moto's backend when it runs in this process,
    # else with an unchecked GetItem to the emulator.
    def _peek(self, table: str, key: dict) -> dict | None:
        if self._peek_fn is not None:
            try:
                return self._peek_fn(table, key)
            except LookupError:
                pass  # a table the peek does not hold: read as below
        found, item = _peek_moto(table, key, self.region)
        if found:
            return item
        token = _internal.set(True)
        try:
            return self._client().get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        except ClientError:
            return None
        finally:
            _internal.reset(token)

    def use_peek(self, peek: Callable[[str, dict], dict | None]) -> None:
        """Read the items the layer bills and checks with `peek` (the local stack's emulator
        process reads them from moto's backend, without a GetItem request through moto's API);
        `peek` raises LookupError for a table it does not hold, which is then read by GetItem."""
        self._peek_fn = peek

    def _restore(self, table: str, key: dict, before: dict | None) -> None:
        token = _internal.set(True)
        try:
            if before is None:
                self._client().delete_item(TableName=table, Key=key)
            else:
                self._client().put_item(TableName=table, Item=before)
        finally:
            _internal.reset(token)

    def same_keys(self, ids: dict[str, str]) -> None:
        """Key ids the emulator answers for another key (the local stack's key restored under a
        new id, local/state.py): a ciphertext naming one is checked on the key it is now, as a
        key on AWS keeps its one id."""
        self._kms_ids.update(ids)

    def _client(self):
        if self._raw_client is None:
            import boto3

            self._raw_client = boto3.session.Session().client("dynamodb", region_name=self.region)
        return self._raw_client


def _ref(table: str, key: dict) -> str:
    return table + json.dumps(key, sort_keys=True, default=str)
