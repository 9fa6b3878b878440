"""Checks at the edge: every message names the field and says how to fix it."""

from __future__ import annotations

import re

from redcron.errors import ValidationError
from redcron.keys import PRIORITIES

# matched with fullmatch: "$" would also accept a trailing newline ("acme\n")
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def name(field: str, value: object) -> str:
    """A tenant or queue name: 1-64 of letters, digits, ``_ . -``.

    Braces would break the shard hash tag, and ``:`` or spaces the key layout.
    """
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValidationError(
            field,
            f"{value!r} is not a valid name; use 1-64 letters, digits, '_', '.' or '-' "
            "(no spaces, ':', '{' or '}')",
        )
    return value


def priority(value: object, field: str = "priority") -> str:
    if value not in PRIORITIES:
        raise ValidationError(field, f"{value!r} is not one of {', '.join(PRIORITIES)}")
    return str(value)


def timeout_ms(value: float | None, field: str = "timeout") -> int:
    """Seconds -> ms; ``None`` or 0 means no timeout."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValidationError(field, f"{value!r} must be a number of seconds >= 0 (0 = none)")
    return int(value * 1000)


def non_negative_int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(field, f"{value!r} must be a whole number >= 0")
    return value


def delay_ms(value: float | None, field: str = "countdown") -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValidationError(field, f"{value!r} must be a number of seconds >= 0")
    return int(value * 1000)


def backoff(base: object, cap: object) -> None:
    """Retry backoff seconds: numbers with ``0 <= retry_base <= retry_cap``."""
    for field, value in (("retry_base", base), ("retry_cap", cap)):
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValidationError(field, f"{value!r} must be a number of seconds >= 0")
    assert isinstance(base, int | float) and isinstance(cap, int | float)
    if base > cap:
        raise ValidationError("retry_cap", f"{cap!r} is below retry_base {base!r}; raise it")


_MEM_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2,
              "mib": 1024**2, "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4,
              "tb": 1024**4, "tib": 1024**4}
_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def mem_bytes(value: object, field: str = "mem") -> int:
    """Memory as bytes: an int, or text like ``512M``, ``16G``, ``1.5GiB``."""
    if isinstance(value, bool):
        raise ValidationError(field, f"{value!r} is not an amount of memory")
    if isinstance(value, int) and value > 0:
        return value
    match = _MEM.match(str(value)) if isinstance(value, str | float | int) else None
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _MEM_UNITS or float(match.group(1)) <= 0:
        raise ValidationError(field, f"{value!r} is not an amount of memory; use e.g. 512M or 16G")
    return int(float(match.group(1)) * _MEM_UNITS[unit])


def cpus(value: object, field: str = "cpu") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValidationError(field, f"{value!r} must be a number of cpus > 0")
    return float(value)
