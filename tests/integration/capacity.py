"""A counting double for what moto does not bill: read units of every GetItem, BatchGetItem and
Query on one table, computed from the items DynamoDB returned by AWS's size formula
(domain/item_size.py). Installed around botocore's call, so every function's client is counted."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from boto3.dynamodb.types import TypeDeserializer
from botocore.client import BaseClient

from jobsched.domain.item_size import item_bytes, read_units

_wire = TypeDeserializer()


def _plain(item: dict) -> dict:
    """A client's items come in wire format; a resource's (boto3 Table) already deserialized."""
    return {k: _wire.deserialize(v) if _is_wire(v) else v for k, v in item.items()}


def _is_wire(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in (
        "S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS")


@dataclass
class ReadUnits:
    table: str
    units: float = 0.0
    items_read: int = 0  # items DynamoDB read (a Query's ScannedCount: a filter drops them after)
    calls: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, operation: str, params: dict, answer: dict) -> None:
        if operation in ("GetItem", "Query") and params.get("TableName") == self.table:
            items = [answer["Item"]] if operation == "GetItem" and "Item" in answer else answer.get("Items", [])
            # (A projected read is billed on whole items; the double sees only what came back,
            # so it under-counts those: none of the reads it is used to compare is projected.)
            size = sum(item_bytes(_plain(i)) for i in items)
            units = read_units(size, bool(params.get("ConsistentRead")))
            read = answer.get("ScannedCount", len(items))
        elif operation == "BatchGetItem" and self.table in params.get("RequestItems", {}):
            consistent = bool(params["RequestItems"][self.table].get("ConsistentRead"))
            # Each item rounded up on its own (BatchGetItem bills as a GetItem per item).
            found = answer.get("Responses", {}).get(self.table, [])
            units = sum(read_units(item_bytes(_plain(i)), consistent) for i in found)
            read = len(found)
        else:
            return
        with self._lock:
            self.units += units
            self.items_read += read
            self.calls[operation] = self.calls.get(operation, 0) + 1

    def install(self, monkeypatch) -> "ReadUnits":
        original = BaseClient._make_api_call

        def counted(client, operation, params):
            answer = original(client, operation, params)
            self.count(operation, params, answer)
            return answer

        monkeypatch.setattr(BaseClient, "_make_api_call", counted)
        return self
