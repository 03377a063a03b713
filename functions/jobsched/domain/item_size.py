"""An item's size as DynamoDB counts it (the 400 KB item limit, and capacity units: a read unit per
4 KB, a write unit per 1 KB). Plain Python: the values as boto3's resource layer takes and gives
them (str, int, float, Decimal, bool, None, bytes, dict, list, set).

The formula (AWS's "Item sizes and formats"): an attribute costs its name's UTF-8 bytes plus its
value; a string its UTF-8 bytes; a number about one byte per two significant digits, plus one; a
binary its raw bytes; null and booleans one byte; a list or map 3 bytes plus one per element,
plus its elements (map keys counted as names). Sets have no formula on that page: they are
counted as a list of their members, which is what DynamoDB has been seen to bill."""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Mapping

MAX_ITEM_BYTES = 400 * 1024
READ_UNIT_BYTES = 4 * 1024
WRITE_UNIT_BYTES = 1024


def _number_bytes(value: int | float | Decimal) -> int:
    digits = Decimal(str(value)).normalize().as_tuple().digits
    significant = str(int("".join(map(str, digits)) or "0")).rstrip("0") or "0"
    return (len(significant) + 1) // 2 + 1


def value_bytes(value: Any) -> int:
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, (int, float, Decimal)):
        return _number_bytes(value)
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(getattr(value, "value", None), (bytes, bytearray)):
        return len(value.value)  # boto3's Binary, as the resource layer gives a binary back (a timer pack)
    if isinstance(value, Mapping):
        return 3 + sum(1 + value_bytes(str(k)) + value_bytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return 3 + sum(1 + value_bytes(v) for v in value)
    raise TypeError(f"not a DynamoDB value: {type(value).__name__}")


def attribute_bytes(name: str, value: Any) -> int:
    return len(name.encode("utf-8")) + value_bytes(value)


def item_bytes(item: Mapping[str, Any]) -> int:
    return sum(attribute_bytes(name, value) for name, value in item.items())


def read_units(total_bytes: int, consistent: bool) -> float:
    """Read units of a read of `total_bytes` (a Query's items summed, then rounded up)."""
    units = max(1, -(-total_bytes // READ_UNIT_BYTES))
    return units if consistent else units / 2
