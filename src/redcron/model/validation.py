"""Checks at the edge: every message names the field and says how to fix it."""

from __future__ import annotations

import json
import math
import re

from redcron.errors import ValidationError
from redcron.keys import PRIORITIES

# matched with fullmatch: "$" would also accept a trailing newline ("acme\n")
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")

#: the longest duration anything takes, in seconds (100 years).  Durations become
#: milliseconds in Redis, where Lua reads them as doubles: 1e308 s overflowed
#: ``int(value * 1000)`` (a 500 from POST /v1/tasks), and past 2**53 ms a count is
#: no longer exact.
MAX_SECONDS = 100 * 365 * 86_400
#: the largest count (retries, keep_runs, caps...): what Lua's doubles hold exactly
MAX_COUNT = 2**53 - 1


def is_name(value: str) -> bool:
    """Whether ``value`` is a valid name (:func:`name`)."""
    return bool(_NAME.fullmatch(value))


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


def number(
    value: object,
    field: str,
    *,
    minimum: float = 0.0,
    above: bool = False,
    unit: str = "seconds",
    example: str = "30",
    maximum: float | None = None,
) -> float:
    """A finite real number ``>= minimum`` (``> minimum`` when ``above``), and
    ``<= maximum`` if given.

    The one place every number that comes in is checked.  NaN must be refused
    by name: every comparison with it is false, so ``value < 0`` lets it
    through (``_cpu=nan`` left a ``--cpus`` worker unable to lease anything);
    infinities overflow ``int(value * 1000)``.  Booleans are not numbers here.
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        try:
            ok = math.isfinite(value)  # type: ignore[arg-type]
        except OverflowError:  # an int too large for a float
            ok = False
    if ok and (value <= minimum if above else value < minimum):  # type: ignore[operator]
        ok = False
    if ok and maximum is not None and value > maximum:  # type: ignore[operator]
        ok = False
    if not ok:
        bound = f"{'>' if above else '>='} {minimum:g}"
        if maximum is not None:
            bound += f" and <= {maximum:g}"
        raise ValidationError(
            field, f"{value!r} must be a finite number of {unit} {bound}, e.g. {example}"
        )
    return float(value)  # type: ignore[arg-type]


def finite(value: float, field: str) -> float:
    """Refuse NaN and infinities where a range check is made elsewhere (click's
    ``FloatRange`` lets NaN through for the same reason as ``value < 0``)."""
    if not math.isfinite(value):
        raise ValidationError(field, f"{value!r} is not a finite number; give one such as 1.5")
    return value


def seconds(value: object, field: str, *, above: bool = False) -> float:
    """A duration in seconds: finite, ``>= 0`` (``> 0`` when ``above``), at most
    :data:`MAX_SECONDS`."""
    return number(value, field, above=above, maximum=MAX_SECONDS)


def timeout_ms(value: float | None, field: str = "timeout") -> int:
    """Seconds -> ms; ``None`` or 0 means no timeout."""
    if value is None:
        return 0
    return int(number(value, field, example="30 (0 = no timeout)", maximum=MAX_SECONDS) * 1000)


def whole_number(value: object, field: str, minimum: int = 0) -> int:
    """An ``int`` ``>= minimum`` and ``<=`` :data:`MAX_COUNT`, returned as an ``int``.

    A float with no fraction (``3.0``) is that whole number: JSON has one kind of
    number, and JSON Schema's ``integer`` (what the API's document says) includes
    it; ``2.5``, booleans and text are refused.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_COUNT:
        raise ValidationError(
            field, f"{value!r} must be a whole number >= {minimum} and <= 2**53 - 1"
        )
    return value


def non_negative_int(value: object, field: str) -> int:
    return whole_number(value, field, 0)


def delay_ms(value: float | None, field: str = "countdown") -> int:
    if value is None:
        return 0
    return int(seconds(value, field) * 1000)


def backoff(base: object, cap: object, where: str = "") -> tuple[float, float]:
    """Retry backoff seconds: finite numbers with ``0 <= retry_base <= retry_cap``.

    ``where`` prefixes the field names (``tasks.load.``).
    """
    b = seconds(base, f"{where}retry_base")
    c = seconds(cap, f"{where}retry_cap")
    if b > c:
        raise ValidationError(
            f"{where}retry_cap",
            f"{cap!r} is below retry_base {base!r}; raise it or lower retry_base",
        )
    return b, c


def fraction(value: object, field: str, example: str = "0.9") -> float:
    """A share in ``(0, 1]``."""
    try:
        share = number(value, field, above=True)
    except ValidationError:
        share = math.inf  # reported below, with the message a share deserves
    if share > 1:
        raise ValidationError(field, f"{value!r} must be a share in (0, 1], e.g. {example}")
    return share


_MEM_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "tib": 1024**4,
}
# [0-9], not \d: float() would read other scripts' digits; fullmatch, as for names
_MEM = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*")


def mem_bytes(value: object, field: str = "mem") -> int:
    """Memory as bytes: an int, or text like ``512M``, ``16G``, ``1.5GiB``."""
    if isinstance(value, bool):
        raise ValidationError(field, f"{value!r} is not an amount of memory")
    if isinstance(value, int) and 0 < value <= MAX_COUNT:
        return value
    if isinstance(value, float):
        # NaN, inf; a float is bytes whatever its spelling (5e-324 is no text _MEM reads)
        number(value, field, above=True, unit="bytes", example="512M or 16G", maximum=MAX_COUNT)
        return int(value)
    text = value if isinstance(value, str) else str(value) if isinstance(value, int | float) else ""
    match = _MEM.fullmatch(text)
    unit = match.group(2).lower() if match else ""
    amount = float(match.group(1)) * _MEM_UNITS.get(unit, 0) if match else 0.0
    if not match or unit not in _MEM_UNITS or not 0 < amount <= MAX_COUNT:
        raise ValidationError(field, f"{value!r} is not an amount of memory; use e.g. 512M or 16G")
    return int(amount)


def cpus(value: object, field: str = "cpu") -> float:
    return number(value, field, above=True, unit="cpus", example="0.5 or 2")


def _plain_text(value: object) -> bool:
    # a NUL cannot cross execve: Popen raised ValueError in the worker's pool thread
    return isinstance(value, str) and "\x00" not in value


def argv(value: object, field: str) -> list[str]:
    """A command: a non-empty list of strings without NUL characters."""
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(_plain_text(a) for a in value)
        or not value[0]
    ):
        raise ValidationError(
            field, "must be a non-empty list of strings (no NUL characters), e.g. ['rsync', '-a']"
        )
    return list(value)


def env(value: object, field: str) -> dict[str, str]:
    """Environment variables: names (no ``=``, no NUL, not empty) to string values."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(field, "must be a mapping of variable names to strings")
    for key, val in value.items():
        if not _plain_text(key) or not key or "=" in key:
            raise ValidationError(field, f"{key!r} is not a variable name (no '=', no NUL)")
        if not _plain_text(val):
            raise ValidationError(
                member(field, key), f"{val!r} must be a string (quote numbers: '1')"
            )
    return dict(value)


def member(field: str, key: str) -> str:
    """The field of one key of a mapping: ``env.HOME``, or ``env[":"]`` (JSON-quoted)
    for a key that is not a plain name, which would blur the ``field: message`` line."""
    plain = key.isascii() and key.replace("_", "a").isalnum() and not key[0].isdigit()
    return f"{field}.{key}" if plain else f"{field}[{json.dumps(key, ensure_ascii=False)}]"


def cwd(value: object, field: str) -> str | None:
    """A working directory: a non-empty path, or None."""
    if value is None:
        return None
    if not _plain_text(value) or not value:
        raise ValidationError(field, f"{value!r} must be a directory path")
    return str(value)


def image(value: object, field: str) -> str:
    """A container image reference: no spaces, and no leading ``-`` (which the
    container runtime would read as an option, e.g. ``--privileged``)."""
    text = value if isinstance(value, str) else ""
    if not _plain_text(text) or not text or text.startswith("-") or any(c.isspace() for c in text):
        raise ValidationError(
            field, f"{value!r} is not an image name; use e.g. registry.example.com/app:1.2"
        )
    return text


# -- the same checks as JSON Schema ------------------------------------------------------
# What the API's OpenAPI document (dashboard/api/openapi.py) says of a value these
# functions check: built from the constants above, so the document cannot drift from
# the checks.  Where a check goes beyond what JSON Schema says (a memory amount's
# total, a backoff's base <= cap) the schema is the closest superset, and the API
# answers 400 naming the field for the rest.

Schema = dict[str, object]


def anchored(regex: re.Pattern[str]) -> str:
    """``regex`` as a JSON Schema ``pattern``, which matches anywhere unless anchored
    (the checks here use ``fullmatch``)."""
    return f"^(?:{regex.pattern})$"


def name_schema(optional: bool = False) -> Schema:
    """:func:`name`; ``optional``: an empty text too (a query filter left blank)."""
    body = _NAME.pattern
    return {"type": "string", "pattern": f"^(?:{body})?$" if optional else anchored(_NAME)}


def priority_schema() -> Schema:
    return {"type": "string", "enum": list(PRIORITIES)}


def number_schema(
    minimum: float = 0.0, *, above: bool = False, maximum: float | None = None
) -> Schema:
    """:func:`number` (a JSON number is finite: a body with ``1e400`` is a 400)."""
    out: Schema = {"type": "number", ("exclusiveMinimum" if above else "minimum"): minimum}
    if maximum is not None:
        out["maximum"] = maximum
    return out


def seconds_schema(*, above: bool = False) -> Schema:
    """:func:`seconds`, :func:`timeout_ms` and :func:`delay_ms` (null: none)."""
    return number_schema(above=above, maximum=MAX_SECONDS)


def whole_number_schema(minimum: int = 0) -> Schema:
    """:func:`whole_number` (JSON Schema's integer includes ``3.0``, as it does)."""
    return {"type": "integer", "minimum": minimum, "maximum": MAX_COUNT}


def mem_schema() -> Schema:
    """:func:`mem_bytes`: a positive number of bytes, or text such as ``512M`` (an
    amount with a non-zero digit and one of :data:`_MEM_UNITS`, in any case)."""
    units = "|".join(
        "".join(f"[{c}{c.upper()}]" for c in u)
        for u in sorted((u for u in _MEM_UNITS if u), key=len, reverse=True)
    )
    amount = r"[0-9]*[1-9][0-9]*(?:\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*"
    text = rf"^\s*(?:{amount})\s*(?:{units})?\s*$"
    return {"anyOf": [number_schema(above=True, maximum=MAX_COUNT),
                      {"type": "string", "pattern": text}]}  # fmt: skip


def cpus_schema() -> Schema:
    return number_schema(above=True)


def text_schema(non_empty: bool = True) -> Schema:
    """:func:`argv`'s and :func:`cwd`'s strings: no NUL character."""
    return {"type": "string", "pattern": "^[^\\x00]+$" if non_empty else "^[^\\x00]*$"}


def argv_schema() -> Schema:
    return {"type": "array", "minItems": 1, "prefixItems": [text_schema()],
            "items": text_schema(non_empty=False)}  # fmt: skip


def env_schema() -> Schema:
    return {"type": ["object", "null"], "propertyNames": {"pattern": "^[^=\\x00]+$"},
            "additionalProperties": text_schema(non_empty=False)}  # fmt: skip


def image_schema() -> Schema:
    return {"type": "string", "pattern": "^[^\\s\\x00-][^\\s\\x00]*$"}
