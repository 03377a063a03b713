"""Reports: the items a DynamoDB call's bill needs, read by the emulator's process in the call's own
hold of its lock and returned in the answer's body (a field botocore's parser ignores), for a
request that asks with REPORT_HEADER; and moto's items read in this process."""
from __future__ import annotations

import base64
from typing import Callable

from jobsched.local.moto_lock import EMULATOR_LOCK
from jobsched.local.strict_aws.base import ACCOUNT, REGION


# The strict layer's request for the items its bill needs: the header the emulator answers to.
REPORT_HEADER = "X-Jobsched-Items"
REPORT_FIELD = "__jobschedItems"


def report_keys(operation: str, request: dict, primary: Callable[[str, dict], dict]) -> list[tuple[str, dict, str]]:
    """(table, key, kind) for each item the bill of `operation` needs, in the request's order.
    kind: "put", "delete", "check" (the item before), "update" (before and after), "read" (the
    whole item, for a projected read)."""
    if operation == "PutItem":
        return [(request["TableName"], primary(request["TableName"], request["Item"]), "put")]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(request["TableName"], request["Key"], "update" if operation == "UpdateItem" else "delete")]
    if operation == "GetItem":
        return [(request["TableName"], request["Key"], "read")] if "ProjectionExpression" in request else []
    if operation == "BatchGetItem":
        return [(name, key, "read") for name, r in request["RequestItems"].items()
                if "ProjectionExpression" in r for key in r["Keys"]]
    if operation == "BatchWriteItem":
        return [(name, primary(name, r["PutRequest"]["Item"]), "put") if "PutRequest" in r
                else (name, primary(name, r["DeleteRequest"]["Key"]), "delete")
                for name, rs in request["RequestItems"].items() for r in rs]
    if operation == "TransactWriteItems":
        kinds = {"Put": "put", "Update": "update", "Delete": "delete", "ConditionCheck": "check"}
        return [(action["TableName"], primary(action["TableName"], action.get("Item") or action["Key"]), kinds[kind])
                for entry in request["TransactItems"] for kind, action in entry.items()]
    if operation == "TransactGetItems":
        return [(e["Get"]["TableName"], e["Get"]["Key"], "read") for e in request["TransactItems"]]
    return []


def items_report(operation: str, request: dict) -> Callable[[], list] | None:
    """In the emulator's process, with its lock held, before the request is answered: reads the
    items before, and returns what reads them after ([before, after] per report_keys entry).
    None for a request with nothing to report (or on tables this process does not hold)."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    backend = dynamodb_backends.get(ACCOUNT, {}).get(REGION) if ACCOUNT in dynamodb_backends else None
    if backend is None:
        return None

    def primary(table: str, item: dict) -> dict:
        stored = backend.tables.get(table)
        if stored is None:
            return item
        return {k: item[k] for k in (stored.hash_key_attr, stored.range_key_attr) if k and k in item}

    def peek(table: str, key: dict) -> dict | None:
        # A binary key value arrives base64 in the request's JSON; moto keeps it as bytes.
        stored_key = {name: {"B": base64.b64decode(value["B"])} if isinstance(value, dict) and "B" in value else value
                      for name, value in key.items()}
        return _peek_locked(dynamodb_backends, DynamoType, table, stored_key)[1]

    try:
        keys = report_keys(operation, request, primary)
        if not keys:
            return None
        before = [peek(table, key) if kind != "read" else None for table, key, kind in keys]
    except Exception:  # noqa: BLE001 - a request moto refuses: it answers with its error, unreported
        return None

    def finish() -> list:
        return [[b, peek(table, key) if kind in ("update", "read") else None]
                for (table, key, kind), b in zip(keys, before)]
    return finish


def _peek_moto(table: str, key: dict, region: str = REGION) -> tuple[bool, dict | None]:
    """(found the table in this process's moto, the item's wire form)."""
    try:
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType
    except ImportError:  # pragma: no cover - moto is a dev dependency
        return False, None

    with EMULATOR_LOCK:  # moto is not thread-safe: read it as a request would
        return _peek_locked(dynamodb_backends, DynamoType, table, key, region)


def _peek_locked(dynamodb_backends, DynamoType, table: str, key: dict,
                 region: str = REGION) -> tuple[bool, dict | None]:
    backend = dynamodb_backends.get(ACCOUNT, {}).get(region) if ACCOUNT in dynamodb_backends else None
    stored = backend.tables.get(table) if backend is not None else None
    if stored is None:
        return False, None
    hash_name, range_name = stored.hash_key_attr, stored.range_key_attr
    if hash_name not in key or (range_name and range_name not in key):
        return True, None  # no such item (DynamoDB refuses the request itself)
    item = stored.get_item(DynamoType(key[hash_name]), DynamoType(key[range_name]) if range_name else None)
    return True, (item.to_json()["Attributes"] if item is not None else None)
