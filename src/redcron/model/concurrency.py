"""Concurrency keys: a task's ``concurrency_key`` / ``max_concurrent``, checked.

``@app.task(concurrency_key="customer_id", max_concurrent=2)`` lets at most 2
instances of the task with the same ``customer_id`` hold a lease at once (per
tenant); the lease script enforces it (``lua/lib/ckeys.lua``).  This module is
the Python edge: the declaration is checked against the function at
registration, and each call's key value is read from its arguments (or a
per-call ``_concurrency_key=``), stringified and bounded, before anything is
written.  No Redis here.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redcron.errors import ValidationError
from redcron.model.binding import CallShape

#: the longest key value (UTF-8 bytes), as enqueue.lua's CK_MAX_LEN
MAX_KEY_BYTES = 200
#: the largest max_concurrent (a cap above it is no cap worth a key)
MAX_CONCURRENT = 10_000

_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True, slots=True)
class ConcurrencySlots:
    """The slots of one task's concurrency key value, as ``task show`` and the
    task page and API show them: who holds a slot (leased instances, or a woken
    waiter's reservation), how many wait, and where this instance stands."""

    key: str
    max_concurrent: int
    holders: tuple[str, ...]
    waiting: int
    #: this instance's place among the waiters (1 = next), None when not waiting
    position: int | None = None

    def summary(self) -> str:
        """One line: ``'cust-7' 2/2 held, 3 waiting (this one #1)``."""
        held = f"{len(self.holders)}/{self.max_concurrent}"
        text = f"{self.key!r} {held} held, {self.waiting} waiting"
        return text + (f" (this one #{self.position})" if self.position else "")


def check_declaration(shape: CallShape, key: str | None, max_concurrent: object) -> int | None:
    """The declared cap (None: no concurrency key), or ValidationError naming
    ``concurrency_key`` / ``max_concurrent`` and the fix."""
    if max_concurrent is None:
        if key is not None:
            raise ValidationError(
                "max_concurrent",
                f"concurrency_key={key!r} needs max_concurrent (how many instances with "
                "the same key value may run at once), e.g. max_concurrent=1",
            )
        return None
    if (
        isinstance(max_concurrent, bool)
        or not isinstance(max_concurrent, int)
        or not 1 <= max_concurrent <= MAX_CONCURRENT
    ):
        raise ValidationError(
            "max_concurrent",
            f"{max_concurrent!r} is not an integer from 1 to {MAX_CONCURRENT}",
        )
    if key is None:
        return max_concurrent  # each call names its key: _concurrency_key=
    if not isinstance(key, str) or not key:
        raise ValidationError("concurrency_key", f"{key!r} is not an argument name")
    sig = shape.signature
    if sig is None:
        raise ValidationError(
            "concurrency_key",
            f"{shape.name}()'s signature cannot be read: pass _concurrency_key= per call "
            "instead of naming an argument",
        )
    p = sig.parameters.get(key)
    if p is None or p.kind not in _BY_NAME:
        takes = ", ".join(q.name for q in sig.parameters.values() if q.kind in _BY_NAME)
        raise ValidationError(
            "concurrency_key",
            f"{shape.name}() takes no argument {key!r} by name"
            f" (it takes: {takes or 'none'}); name one of its arguments",
        )
    return max_concurrent


def key_value(value: object, field: str = "_concurrency_key") -> str:
    """A key value as stored: ``str(value)``, not empty, at most MAX_KEY_BYTES."""
    if value is None:
        raise ValidationError(
            field, "is None: pass a value (a str or a number), or declare no concurrency_key"
        )
    text = value if isinstance(value, str) else str(value)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size == 0 or size > MAX_KEY_BYTES:
        raise ValidationError(
            field, f"the key value must be 1 to {MAX_KEY_BYTES} bytes (UTF-8), got {size}"
        )
    return text


def for_call(
    shape: CallShape | None,
    key: str | None,
    max_concurrent: int | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    per_call: object = None,
) -> tuple[str, int]:
    """(key value, cap) of one call; ("", 0) when it has no key.

    ``per_call`` (``_concurrency_key=``) wins over the argument ``key``.  An
    argument the call leaves out takes the function's default; one without a
    default is missing, and that error is the argument check's (ck "" here).
    """
    if per_call is not None:
        if max_concurrent is None:
            raise ValidationError(
                "_concurrency_key",
                "the task declares no max_concurrent: declare it, e.g. @app.task(max_concurrent=1)",
            )
        return key_value(per_call), max_concurrent
    if key is None or max_concurrent is None or shape is None or shape.signature is None:
        return "", 0
    field = f"kwargs.{key}"
    if key in kwargs:
        return key_value(kwargs[key], field), max_concurrent
    params = list(shape.signature.parameters.values())
    for i, p in enumerate(params):
        if p.name != key:
            continue
        if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD and i < len(args):
            return key_value(args[i], f"args[{i}]"), max_concurrent
        if p.default is not p.empty:
            return key_value(p.default, field), max_concurrent
    return "", 0
