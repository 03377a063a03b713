"""DynamoDB's wire format (`{"S": ...}`, `{"N": ...}`), written and read directly.

The hot calls (the tick's pages, the worker's job read, claim and finish) use the low-level client
with these instead of boto3's resource layer, whose TypeSerializer and TypeDeserializer go
through Decimal contexts for every number and walk every request twice (bench/cpu.py measures
the difference). All our numbers are integers, except inside JSON text attributes."""
from __future__ import annotations

from typing import Any


def to_wire(value: Any) -> dict:
    """One value in wire format. bool is checked before int (a bool is an int in Python)."""
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if value is None:
        return {"NULL": True}
    if isinstance(value, float):
        return {"N": repr(value)}
    if isinstance(value, dict):
        return {"M": {k: to_wire(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"L": [to_wire(v) for v in value]}
    raise TypeError(f"no DynamoDB type for {type(value).__name__}")


def values_to_wire(values: dict[str, Any]) -> dict[str, dict]:
    return {k: to_wire(v) for k, v in values.items()}


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        number = float(text)
        return int(number) if number.is_integer() else number


def from_wire(value: dict) -> Any:
    ((kind, raw),) = value.items()
    if kind == "S":
        return raw
    if kind == "N":
        return _number(raw)
    if kind == "BOOL":
        return raw
    if kind == "NULL":
        return None
    if kind == "M":
        return {k: from_wire(v) for k, v in raw.items()}
    if kind == "L":
        return [from_wire(v) for v in raw]
    if kind in ("SS", "BS"):
        return set(raw)
    if kind == "NS":
        return {_number(n) for n in raw}
    if kind == "B":
        return raw
    raise TypeError(f"unknown DynamoDB type {kind}")


def item_from_wire(item: dict[str, dict] | None) -> dict[str, Any] | None:
    return {k: from_wire(v) for k, v in item.items()} if item else None
