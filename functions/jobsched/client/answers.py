"""Answers as the API's own response models (api/schemas.py), read leniently.

The API validates its answers against api/schemas.py, whose models forbid unknown fields and
name each enumeration's values: right for the server, wrong for a client that must keep working
when the server it talks to is newer (API.md: the contract is extended, never renamed). So each
answer is parsed with a subclass of the API's model, made here at run time, that differs in two
ways only: an unknown field is kept (`model_extra`, and dumped back), and an enumeration of
strings is read as a string. Nothing is typed twice: the fields, their types, aliases and
defaults are the API's; `isinstance(answer, schemas.Job)` holds."""
from __future__ import annotations

import types
import typing
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

M = TypeVar("M", bound=BaseModel)

_LENIENT: dict[type, type] = {}


def lenient(model: type[M]) -> type[M]:
    """The API's model `model`, reading unknown fields and new enumeration values too."""
    found = _LENIENT.get(model)
    if found is None:
        namespace: dict[str, Any] = {"model_config": ConfigDict(extra="allow"), "__module__": __name__,
                                     "__qualname__": model.__qualname__, "__annotations__": {}}
        for name, info in model.model_fields.items():
            relaxed = _relax(info.annotation)
            if relaxed is not info.annotation:
                namespace["__annotations__"][name] = relaxed
                namespace[name] = info  # alias, default and constraints stay the API's
        found = _LENIENT[model] = types.new_class(model.__name__, (model,), exec_body=lambda ns: ns.update(namespace))
    return found  # type: ignore[return-value]


def _relax(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return lenient(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return str if all(isinstance(a, str) for a in args) else annotation
    if not args:
        return annotation
    relaxed = tuple(_relax(a) for a in args)
    if all(r is a for r, a in zip(relaxed, args)):
        return annotation
    if origin in (typing.Union, types.UnionType):
        return typing.Union[relaxed]
    return origin[relaxed]


def parse(model: type[M], data: Any) -> M:
    """An answer's JSON as `model` (a subclass of it that reads what a newer server adds)."""
    return lenient(model).model_validate(data)


def dump(value: Any) -> Any:
    """An answer (a model, or a list of them) back to the JSON the API sent: its field names, the
    fields it held and no others."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, list):
        return [dump(v) for v in value]
    return value
