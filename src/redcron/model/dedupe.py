"""Unique windows and debounce (issue 21 §4): the options, checked, the key a
call is matched by, and the one string enqueue.lua's ``lib/dedupe.lua`` reads.

Pure: no Redis.  The semantics are in docs/operations.md ("Unique windows and
debounce"); in short:

- ``unique_for``: an enqueue whose key matches a task that has not ended and
  whose window (from its own enqueue) has not passed returns that task,
  marked a duplicate, and writes nothing.  The key is the task name and its
  arguments (a canonical digest of them), or the name and ``_unique_key``.
- ``debounce`` (with an optional ``max_wait``): the first enqueue of a key
  creates the task due ``debounce`` later; each later one while it waits
  moves its start to ``debounce`` after that call, never past ``max_wait``
  after the first, and replaces its arguments.  The key is the task name,
  or the name and ``_unique_key``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redcron import serde
from redcron.errors import ValidationError
from redcron.model import validation

#: the two modes, and their one-letter name on the wire (lib/dedupe.lua)
UNIQUE = "unique"
DEBOUNCE = "debounce"
WIRE_MODE = {UNIQUE: "u", DEBOUNCE: "d"}
#: the mode of ``dedupe:<tenant>:<mode>:<digest>`` that holds ``ctx.once`` records
#: (not an enqueue mode: its ``<digest>`` is ``<idem_key>:<key>`` as given)
ONCE = "once"
#: the longest explicit key (it is kept in the instance hash)
MAX_KEY = 256
#: the prefix of a digest shown where no explicit key was given
DIGEST_LABEL = "sha1:"


@dataclass(frozen=True, slots=True)
class Dedupe:
    """A unique window or a debounce, checked (``options`` builds it)."""

    mode: str  # UNIQUE | DEBOUNCE
    window_ms: int  # unique_for, or debounce
    max_wait_ms: int = 0  # debounce only; 0 = no cap


def _window(value: object, field: str) -> int:
    """Seconds -> ms: finite, > 0 and at least 1 ms (0 is refused, not "off")."""
    ms = int(validation.number(value, field, above=True, example="60",
                               maximum=validation.MAX_SECONDS) * 1000)  # fmt: skip
    if ms < 1:
        raise ValidationError(field, f"{value!r} is under a millisecond; give at least 0.001")
    return ms


def options(
    unique_for: object = None,
    debounce: object = None,
    max_wait: object = None,
    prefix: str = "",
) -> Dedupe | None:
    """Check the options (None = not given); ``prefix`` goes before each field
    name in an error (``_`` for per-call options).

    Raises:
        ValidationError: a window that is not a finite number > 0 (0, negative,
            NaN, inf), ``max_wait`` without ``debounce`` or below it, or
            ``unique_for`` with ``debounce`` (they are exclusive: a debounced
            task is already one per key while it waits).
    """
    if unique_for is not None and debounce is not None:
        raise ValidationError(
            f"{prefix}debounce",
            "cannot be combined with unique_for; use one (debounce already makes "
            "one task per key while it waits)",
        )
    if max_wait is not None and debounce is None:
        raise ValidationError(f"{prefix}max_wait", "applies to debounce only; give debounce too")
    if unique_for is not None:
        return Dedupe(UNIQUE, _window(unique_for, f"{prefix}unique_for"))
    if debounce is None:
        return None
    window = _window(debounce, f"{prefix}debounce")
    cap = 0
    if max_wait is not None:
        cap = _window(max_wait, f"{prefix}max_wait")
        if cap < window:
            raise ValidationError(
                f"{prefix}max_wait",
                f"{max_wait!r} is below debounce {debounce!r}; raise it to at least the debounce",
            )
    return Dedupe(DEBOUNCE, window, cap)


def explicit_key(value: object, field: str = "_unique_key") -> str:
    """A ``_unique_key``: a non-empty string of at most :data:`MAX_KEY` characters."""
    if not isinstance(value, str) or not value or len(value) > MAX_KEY:
        raise ValidationError(
            field, f"{value!r} must be a non-empty string of at most {MAX_KEY} characters"
        )
    return value


def canonical(value: Any) -> Any:
    """``value`` with every map's keys in one order (by their msgpack bytes), so
    equal arguments pack to equal bytes whatever order kwargs came in."""
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: serde.dumps(kv[0]))
        return {k: canonical(v) for k, v in items}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    return value


def digest(name: str, key: Any) -> str:
    """The hex SHA-1 a key's Redis key is named by: of the msgpack of
    ``[task name, canonical(key)]`` (a key is scoped to its task)."""
    return hashlib.sha1(serde.dumps([name, canonical(key)]), usedforsecurity=False).hexdigest()


def wire(d: Dedupe, name: str, key: str | None, payload: Any) -> str:
    """The row field enqueue.lua reads: ``<u|d>|<digest>|<window ms>|<max wait
    ms>|<label>``; the label (the explicit key, or ``sha1:<digest>``) is what
    the instance hash shows, last so that it may hold ``|``.  ``payload`` is
    the call's ``[args, kwargs]``.

    Without an explicit key a unique window matches on the arguments, a
    debounce on the task name alone (the last call's arguments win, so they
    cannot be the key)."""
    if key is not None:
        matched: Any = ["key", key]
    elif d.mode == UNIQUE:
        matched = ["args", payload]
    else:
        matched = ["task"]
    hexd = digest(name, matched)
    label = key if key is not None else DIGEST_LABEL + hexd
    return f"{WIRE_MODE[d.mode]}|{hexd}|{d.window_ms}|{d.max_wait_ms}|{label}"
