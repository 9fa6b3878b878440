"""One serializer for every record: the CLI's ``--json`` and the REST API print
the same field names in the same formats.

* times: ISO-8601 UTC with milliseconds (``2026-11-30T07:00:00.123Z``), fixed
  width so they sort as text;
* numbers as numbers, enums as their values, tuples as lists, None as null;
* a float that is not finite, which JSON cannot carry (a result or argument
  stored through the Python API, where msgpack keeps it), as the string
  ``"Infinity"``, ``"-Infinity"`` or ``"NaN"``: the output is always strict
  JSON, and a stored infinity stays distinguishable from no value at all;
* payload bytes (task arguments and results) decoded from msgpack; bytes that
  are not msgpack become ``{"undecodable": "<n> bytes"}`` rather than an error;
* a text field marked ``JSON_TEXT`` (a job's spec, a run's params) as the
  JSON value it holds.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from redcron import serde


def iso(dt: datetime) -> str:
    """``2026-11-30T07:00:00.123Z`` (a naive datetime is taken as UTC)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def to_json(obj: Any) -> Any:
    """``obj`` (a record, or lists/dicts of them) as JSON-able plain data."""
    # exact types first: most values are plain leaves or containers (a job's spec
    # holds hundreds), and a page of 50 records walks them all; a subclass (a
    # StrEnum, a bool) takes the general path below
    kind = type(obj)
    if kind is str or kind is int or obj is None:
        return obj
    if kind is dict:
        return {_key(k): to_json(v) for k, v in obj.items()}
    if kind is list:
        return [to_json(v) for v in obj]
    if isinstance(obj, Enum):  # before str: a StrEnum is a str
        return to_json(obj.value)
    if isinstance(obj, float) and not math.isfinite(obj):
        return non_finite(obj)
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, datetime):
        return iso(obj)
    if isinstance(obj, bytes | bytearray):
        return payload(bytes(obj))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.metadata.get("json") and isinstance(value, str):
                value = _json_text(value)
            out[f.name] = to_json(value)
        return out
    if isinstance(obj, Mapping):
        return {_key(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_json(v) for v in obj]
    return str(obj)


def non_finite(value: float) -> str:
    """How JSON output spells a float that is not finite (it has no number for it)."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def dumps(obj: Any, indent: int | None = 2) -> str:
    """``to_json(obj)`` as strict JSON text (keys sorted; never ``NaN``)."""
    return json.dumps(to_json(obj), indent=indent, sort_keys=True, allow_nan=False)


def payload(data: bytes) -> Any:
    """msgpack bytes as JSON-able data; a marker for bytes that are not msgpack."""
    try:
        value = serde.loads(data)
    except Exception:  # corrupt or foreign payload: say so rather than fail the listing
        return {"undecodable": f"{len(data)} bytes"}
    # msgpack may hold binary values of its own: show them as text when they are
    return _plain(value)


def plain(value: Any) -> Any:
    """A decoded payload (a result) as JSON-able data, as :func:`payload` shows
    it: bytes as text, floats that are not finite spelled out, keys as text."""
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return _text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return non_finite(value)
    if isinstance(value, Mapping):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _key(key: Any) -> str:
    return _text(key) if isinstance(key, bytes) else str(key)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _json_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # not JSON (written by hand): shown as it is
        return text
