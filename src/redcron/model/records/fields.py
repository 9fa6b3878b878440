"""Parsing a Redis hash's text fields into typed values, shared by every record.

Redis holds plain text (times as ms integers, numbers as digits, '' for
unset); these helpers turn one field into a typed value: timezone-aware UTC
``datetime`` (None when unset), ints and floats, enums, tuples.  Pure
functions of a decoded hash (no Redis here).  The underscored helpers are the
records package's own, used by its modules only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from redcron.model.states import RunState, TaskState

#: a decoded hash or stream entry: field name -> value (bytes or text)
Fields = Mapping[str, str | bytes]

#: field metadata: the text holds JSON, serialized as the JSON value it holds
JSON_TEXT = {"json": True}


# -- field parsing (hash fields are text; '' means unset) -----------------------


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def _opt_text(fields: Fields, name: str) -> str | None:
    return _text(fields.get(name)) or None


def _int(fields: Fields, name: str, default: int = 0) -> int:
    value = _opt_int(fields, name)
    return default if value is None else value


def _opt_int(fields: Fields, name: str) -> int | None:
    value = _opt_float(fields, name)  # exact for the integers stored (below 2**53)
    return None if value is None or not math.isfinite(value) else int(value)


def _opt_float(fields: Fields, name: str) -> float | None:
    raw = _text(fields.get(name))
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


_S = TypeVar("_S", TaskState, RunState)


def _state(kind: type[_S], fields: Fields) -> _S | str:
    """The ``state`` field as its enum member, or the raw text when it is none of
    them (a hash edited by hand): shown as it is, never a ValueError that takes
    down ``task show``, the API or the dashboard."""
    raw = _text(fields.get("state"))
    try:
        return kind(raw)
    except ValueError:
        return raw


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def from_ms(ms: int | None) -> datetime | None:
    """A millisecond epoch as an aware UTC datetime (exact); None stays None."""
    if ms is None:
        return None
    return EPOCH + ms * _MS


def epoch_ms(dt: datetime) -> int:
    """A record's time as the millisecond epoch Redis holds (exact inverse of
    :func:`from_ms`)."""
    return (dt - EPOCH) // _MS


def _time(fields: Fields, name: str) -> datetime | None:
    return from_ms(_opt_int(fields, name))


def _csv(fields: Fields, name: str) -> tuple[str, ...]:
    return tuple(part for part in _text(fields.get(name)).split(",") if part)


def _bytes(fields: Fields, name: str) -> bytes | None:
    value = fields.get(name)
    if value is None:
        return None
    return value if isinstance(value, bytes) else value.encode()
