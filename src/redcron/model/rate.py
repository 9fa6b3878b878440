"""Rate limits: a task's ``rate`` / ``rate_key``, checked.

``@app.task(rate="10/s")`` lets at most 10 instances of the task be handed to
the workers in any second (per tenant); ``rate="100/m", rate_key="customer_id"``
does so per value of the call's ``customer_id`` argument (each value its own
group).  ``promote.lua`` enforces it (``lua/lib/rate.lua``); this module is the
Python edge: the declaration is parsed and checked against the function at
registration, and each call's group is read from its arguments before anything
is written.  No Redis here.

The group of a call: the argument its function's signature binds to the
parameter named ``rate_key`` (positional or keyword), else that parameter's
default, as ``str()`` (1 to 200 bytes of UTF-8); a call without it (no default)
fails the argument check anyway.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redcron.errors import ValidationError
from redcron.model.binding import CallShape

#: unit letter -> its length in ms
UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000}
#: the most starts one unit may allow (each release of the last unit is kept)
MAX_PER_UNIT = 10_000
#: the longest group value (UTF-8 bytes), as for a concurrency key's
MAX_GROUP_BYTES = 200

_RATE = re.compile(r"^\s*(\d+)\s*/\s*([smh])\s*$")
_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True, slots=True)
class Rate:
    """A parsed rate: ``n`` starts per ``unit_ms``."""

    n: int
    unit_ms: int

    def __str__(self) -> str:
        unit = next(u for u, ms in UNITS.items() if ms == self.unit_ms)
        return f"{self.n}/{unit}"


def parse(rate: object, field: str = "rate") -> Rate:
    """``"10/s"``, ``"100/m"``, ``"5/h"`` into a :class:`Rate` (ValidationError otherwise)."""
    m = _RATE.match(rate) if isinstance(rate, str) else None
    if m is None:
        raise ValidationError(field, f"{rate!r} is not a rate like '10/s', '100/m' or '5/h'")
    n = int(m.group(1))
    if not 1 <= n <= MAX_PER_UNIT:
        raise ValidationError(field, f"{rate!r}: the count must be from 1 to {MAX_PER_UNIT}")
    return Rate(n, UNITS[m.group(2)])


def check_declaration(shape: CallShape, rate: object, key: object) -> Rate | None:
    """The declared rate (None: none), ``rate_key`` checked against the function."""
    if rate is None:
        if key is not None:
            raise ValidationError("rate_key", f"rate_key={key!r} needs a rate, e.g. rate='10/s'")
        return None
    parsed = parse(rate)
    if key is None:
        return parsed
    if not isinstance(key, str) or not key:
        raise ValidationError("rate_key", f"{key!r} is not an argument name")
    sig = shape.signature
    p = sig.parameters.get(key) if sig is not None else None
    if sig is None or p is None or p.kind not in _BY_NAME:
        takes = (
            ", ".join(q.name for q in sig.parameters.values() if q.kind in _BY_NAME)
            if sig is not None
            else "its signature cannot be read"
        )
        raise ValidationError(
            "rate_key",
            f"{shape.name}() takes no argument {key!r} by name (it takes: {takes or 'none'})",
        )
    return parsed


def group_of(shape: CallShape, key: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """The group of one call (see the module's docstring); "" when the call
    leaves a parameter without a default out (the argument check refuses it)."""
    sig = shape.signature
    if sig is None:
        return ""
    if key in kwargs:
        return _value(kwargs[key], f"kwargs.{key}")
    for i, p in enumerate(sig.parameters.values()):
        if p.name != key:
            continue
        if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD and i < len(args):
            return _value(args[i], f"args[{i}]")
        if p.default is not p.empty:
            return _value(p.default, f"kwargs.{key}")
    return ""


def _value(value: object, field: str) -> str:
    if value is None:
        raise ValidationError(field, "is None: the rate_key argument needs a value")
    text = value if isinstance(value, str) else str(value)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size == 0 or size > MAX_GROUP_BYTES:
        raise ValidationError(
            field, f"the rate_key value must be 1 to {MAX_GROUP_BYTES} bytes (UTF-8), got {size}"
        )
    return text
