"""JSON text as the API accepts, stores and sends it: RFC 8259 only, compact, UTF-8.

One home for it so that what is size-checked at creation is byte for byte what a target gets."""
from __future__ import annotations

import json
from typing import Any


class NotStrictJson(ValueError):
    """Valid for Python's parser, not for RFC 8259 (NaN, Infinity, numbers out of range,
    duplicate keys)."""


def compact(value: Any) -> str:
    """No spaces, non-ASCII as UTF-8 rather than \\u escapes, and never NaN or Infinity."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def size_bytes(value: Any) -> int:
    """The size of the value as sent: compact JSON in UTF-8 (an "é" is 2 bytes, not 6)."""
    return len(compact(value).encode("utf-8"))


def _refuse_constant(name: str) -> Any:
    raise NotStrictJson(f"{name} is not JSON (RFC 8259)")


def _finite_float(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise NotStrictJson(f"the number {text[:40]} is out of range")
    return number


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    result: dict = {}
    for key, value in pairs:
        if key in result:
            raise NotStrictJson(f"duplicate key {key[:64]!r}")
        result[key] = value
    return result


# Deeper documents are refused: DynamoDB nests at most 32 levels, and deep nesting is how a body
# exhausts a parser's recursion.
MAX_DEPTH = 32


def depth_within(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether objects and arrays nest at most `limit` levels (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        current, level = stack.pop()
        if isinstance(current, dict):
            children = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        if level > limit:
            return False
        stack.extend((child, level + 1) for child in children)
    return True


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON text, refusing what RFC 8259 does not allow and what would not survive a
    round trip (NaN, Infinity, 1e400, duplicate keys). Raises ValueError (NotStrictJson or
    json.JSONDecodeError) with a message fit for a client."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                           object_pairs_hook=_unique_keys)
    except RecursionError:
        raise NotStrictJson(f"nested more than {MAX_DEPTH} levels deep") from None
    if not depth_within(value):
        raise NotStrictJson(f"nested more than {MAX_DEPTH} levels deep")
    return value
