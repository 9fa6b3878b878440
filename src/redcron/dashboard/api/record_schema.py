"""JSON Schema of a record, read from its dataclass: what ``to_json`` sends.

The API answers records through one serializer (``redcron.model.serialize``):
every field of the dataclass, by its name, in the format its type says.  So
the reply schemas of ``GET /v1/openapi.json`` are built from the same
dataclasses, field by field from the type hints, and cannot drift from what
is sent: a field added to a record is in the document with its type.

* ``str`` / ``int`` / ``float`` / ``bool``: the JSON type; a ``datetime``: an
  ISO-8601 string (``format: date-time``); ``X | None``: nullable;
* a ``StrEnum`` (the model's states) and a ``Literal``: an ``enum`` (a state
  enum is a component, ``TaskState``, ``RunState``); a ``Enum | str`` field
  (a hash edited by hand may hold other text) is documented as the enum;
* ``tuple[X, ...]`` / ``list[X]``: an array of ``X``; a nested record: its
  component (``$ref``), named by :data:`COMPONENTS`;
* ``bytes`` (msgpack payloads: a task's arguments and result): any JSON value;
  a ``JSON_TEXT`` field: the JSON value it holds.

Every field is sent, so every field is ``required``; ``Json`` schemas given as
``fields`` replace a field's derived one (a list whose items the route shapes),
``extra`` adds what a route sends besides the record's fields.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any

from redcron.model.concurrency import ConcurrencySlots
from redcron.model.records import AttemptRecord, TaskProgress
from redcron.model.states import RunState, TaskState
from redcron.model.tenants import TenantSettings

Json = dict[str, Any]

#: the types a record nests that are components of their own (a ``$ref``): the
#: states, so that a generated client has one enum of each, and nested records
COMPONENTS: dict[type, str] = {
    TaskState: "TaskState",
    RunState: "RunState",
    AttemptRecord: "Attempt",
    TaskProgress: "TaskProgress",
    TenantSettings: "TenantSettingsValues",
    ConcurrencySlots: "ConcurrencySlots",
}


def ref(name: str) -> Json:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Json) -> Json:
    """``schema`` or null, in the form generators read best: a type list for a plain
    type, ``anyOf`` with null for a ``$ref``, an enum or a union."""
    if set(schema) <= {"description"}:
        return schema  # any JSON value: null included
    kind = schema.get("type")
    if "enum" not in schema and isinstance(kind, str | list):
        kinds = [kind] if isinstance(kind, str) else kind
        return {**schema, "type": kinds if "null" in kinds else [*kinds, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def enum_schema(kind: type[Enum]) -> Json:
    values = [member.value for member in kind]
    return {"type": "string", "enum": values}


def _any(description: str) -> Json:
    return {"description": description}


def schema_of(hint: Any, field: dataclasses.Field[Any] | None = None) -> Json:
    """The JSON Schema of a value of type ``hint`` as ``to_json`` writes it."""
    if field is not None and field.metadata.get("json"):
        return _any("the JSON value the record holds")
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        rest = [a for a in args if a is not type(None)]
        enums = [a for a in rest if isinstance(a, type) and issubclass(a, Enum)]
        # a state field reads ``State | str``: the raw text of a hash edited by hand
        inner = schema_of(enums[0]) if enums else _union(rest)
        return nullable(inner) if len(rest) < len(args) else inner
    if origin is typing.Literal:
        values = list(typing.get_args(hint))
        return {"type": "string", "enum": values}
    if origin in (tuple, list, set, frozenset):
        items = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return {"type": "array", "items": schema_of(items[0]) if items else {}}
    if origin in (dict, Mapping):
        return {"type": "object"}
    if hint is bytes:
        return _any("a msgpack payload as JSON (any value)")
    if hint is Any or hint is object:
        return {}
    if isinstance(hint, type):
        if issubclass(hint, Enum):
            name = COMPONENTS.get(hint)
            return ref(name) if name else enum_schema(hint)
        if hint is bool:
            return {"type": "boolean"}
        if issubclass(hint, str):
            return {"type": "string"}
        if hint is int:
            return {"type": "integer"}
        if hint is float:
            return {"type": "number"}
        if issubclass(hint, datetime):
            return {"type": "string", "format": "date-time"}
        if dataclasses.is_dataclass(hint):
            name = COMPONENTS.get(hint)
            return ref(name) if name else record_schema(hint)
    raise TypeError(f"no JSON Schema for {hint!r}: describe the field with fields=")


def _union(members: list[Any]) -> Json:
    if len(members) == 1:
        return schema_of(members[0])
    return {"anyOf": [schema_of(m) for m in members]}


def record_schema(
    cls: type,
    fields: Mapping[str, Json] | None = None,
    extra: Mapping[str, Json] | None = None,
    optional: Mapping[str, Json] | None = None,
    drop: Iterable[str] = (),
    description: str | None = None,
) -> Json:
    """The object ``to_json`` makes of a ``cls`` record: each field's schema (from
    its type, or ``fields``), every one required; ``extra``: more fields a route
    always adds, ``optional``: fields it adds sometimes; ``drop``: fields the
    route leaves out."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a record")
    hints = typing.get_type_hints(cls)
    given = dict(fields or {})
    left_out = set(drop)
    properties: Json = {}
    for f in dataclasses.fields(cls):
        if f.name in left_out:
            continue
        properties[f.name] = given.pop(f.name) if f.name in given else schema_of(hints[f.name], f)
    if given:
        raise KeyError(f"{cls.__name__} has no field {sorted(given)[0]!r}")
    properties.update(extra or {})
    required = list(properties)
    properties.update(optional or {})
    out: Json = {"type": "object", "required": required, "properties": properties}
    doc = description if description is not None else _summary(cls)
    if doc:
        out["description"] = doc
    return out


def extended(schema: Json, extra: Mapping[str, Json], optional: Iterable[str] = ()) -> Json:
    """``schema`` (an object) with more properties: required unless in ``optional``."""
    skip = set(optional)
    return {
        **schema,
        "properties": {**schema["properties"], **extra},
        "required": [*schema["required"], *(k for k in extra if k not in skip)],
    }


def _summary(cls: type) -> str:
    """The first paragraph of the record's docstring, on one line."""
    text = (cls.__doc__ or "").strip().split("\n\n", 1)[0]
    return " ".join(text.split())
