"""JSON text as the API accepts, stores and sends it: RFC 8259 only, compact, UTF-8.

One home for it so that what is size-checked at creation is byte for byte what a target gets."""
from __future__ import annotations

import json
import re
from typing import Any


class NotStrictJson(ValueError):
    """Valid for Python's parser, not for RFC 8259 (NaN, Infinity, numbers out of range,
    duplicate keys)."""


class NotText(NotStrictJson):
    """A string or a key holding a lone UTF-16 surrogate ("\\ud800" without its pair): valid JSON
    escapes, but no Unicode text (RFC 8259, 8.2), so it can be neither encoded in UTF-8, sized,
    stored nor sent. `path` names where it is, from the document's root ("payload.a.0")."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path or 'the document'}: a lone UTF-16 surrogate (\\ud800-\\udfff without "
                         "its pair) is not Unicode text")
        self.path = path


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


# Python refuses to read an integer of more digits (sys.get_int_max_str_digits), with a message
# about its own settings: refused here first, with one for a client.
MAX_INT_DIGITS = 4300


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise NotStrictJson(f"a number of more than {MAX_INT_DIGITS:,} digits")
    return int(text)


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


_SURROGATE = re.compile("[\ud800-\udfff]")


def _path_part(key: Any) -> str:
    """A key or index as a field path shows it: a surrogate written as its escape, so that the
    path itself is text."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", str(key))


def check_text(value: Any) -> None:
    """Raise NotText naming the first string or key (at any depth) that holds a lone surrogate
    (iterative: no recursion; a path is only spelled out for the one it names)."""
    stack: list[tuple[Any, tuple | None]] = [(value, None)]  # (value, (its parent's entry, its key))
    while stack:
        entry = stack.pop()
        current = entry[0]
        if isinstance(current, str):
            if _SURROGATE.search(current):
                raise NotText(_path_of(entry))
        elif isinstance(current, dict):
            for key, child in current.items():
                if _SURROGATE.search(key):
                    raise NotText(_path_of((None, (entry, key))))
                if isinstance(child, (str, dict, list)):
                    stack.append((child, (entry, key)))
        elif isinstance(current, list):
            stack.extend((child, (entry, i)) for i, child in enumerate(current) if isinstance(child, (str, dict, list)))


def _path_of(entry: tuple) -> str:
    parts = []
    while entry[1] is not None:
        entry, key = entry[1]
        parts.append(_path_part(key))
    return ".".join(reversed(parts))


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
    round trip (NaN, Infinity, 1e400, duplicate keys, a lone surrogate: NotText). Raises
    ValueError (NotStrictJson or json.JSONDecodeError) with a message fit for a client."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int,
                           object_pairs_hook=_unique_keys)
    except RecursionError:
        raise NotStrictJson(f"nested more than {MAX_DEPTH} levels deep") from None
    if not depth_within(value):
        raise NotStrictJson(f"nested more than {MAX_DEPTH} levels deep")
    check_text(value)
    return value
