"""Task progress (issue 34 §1): the checks of a value, and the worker's coalescer.

A running task says how far it is with ``ctx.progress(done, total, message)``
(an HTTP worker with ``POST /v1/worker/progress``).  The instance hash keeps
the latest value (``progress``) and at most :data:`RECENT_MAX` recent messages
(``progress_recent``), each at most :data:`MESSAGE_MAX` characters: the
record is bounded however often a task reports.

A task may call ``ctx.progress`` in a tight loop, so the worker does not write
each call: :class:`Coalescer` keeps the latest value (and the messages given
since the last write) and says when a write is due: at once for the first
value, then at most once per ``interval`` (the heartbeat period), or at once
when flushed (``done`` reached ``total``).  Whatever is still unwritten when
the attempt ends is written before its outcome is reported, so the last value
is never lost.  Pure: every decision takes ``now`` (monotonic seconds).
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from dataclasses import dataclass

from redcron.errors import ValidationError

#: the most recent messages an instance keeps
RECENT_MAX = 10
#: the longest message kept, in characters (a longer one is cut, with an ellipsis)
MESSAGE_MAX = 500
#: the largest done/total: what a Lua double holds exactly
MAX_VALUE = float(2**53 - 1)


@dataclass(frozen=True, slots=True)
class Value:
    """One progress report, checked: ``done`` of ``total`` (None: unknown), and
    an optional message."""

    done: float
    total: float | None = None
    message: str | None = None

    def row(self) -> dict[str, object]:
        """The JSON object progress.lua stores (``at`` and ``attempt`` are its own)."""
        out: dict[str, object] = {"done": _plain(self.done)}
        if self.total is not None:
            out["total"] = _plain(self.total)
        if self.message is not None:
            out["message"] = self.message
        return out


def _plain(x: float) -> int | float:
    """A whole float as an int, so the hash reads ``5`` and not ``5.0``."""
    return int(x) if float(x).is_integer() else x


def _count(value: object, field: str) -> float:
    x: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            x = float(value)
        except OverflowError:  # an int too large for a float
            x = None
    if x is None or not math.isfinite(x) or not 0 <= x <= MAX_VALUE:
        raise ValidationError(
            field, f"{value!r} is not a number from 0 to {MAX_VALUE:.0f} (e.g. 40)"
        )
    return x


def check(done: object, total: object = None, message: object = None) -> Value:
    """``done``/``total``/``message`` as a :class:`Value`, or a ValidationError naming
    the field: ``done`` a number >= 0; ``total`` None or a number > 0 (``done``
    may exceed it: an estimate that grew); ``message`` None or text, cut to
    :data:`MESSAGE_MAX` characters."""
    d = _count(done, "done")
    t = None if total is None else _count(total, "total")
    if t is not None and t <= 0:
        raise ValidationError("total", f"{total!r} must be above 0 (or null: unknown)")
    if message is not None and not isinstance(message, str):
        raise ValidationError("message", f"must be text (or null), not {type(message).__name__}")
    return Value(d, t, cut(message) if message else None)


def cut(message: str) -> str:
    """``message`` within :data:`MESSAGE_MAX` characters."""
    return message if len(message) <= MESSAGE_MAX else message[: MESSAGE_MAX - 1] + "…"


@dataclass(frozen=True, slots=True)
class Pending:
    """What a write carries: the latest value, and the messages given since the
    last write (oldest first, at most :data:`RECENT_MAX`), each with its ``done``."""

    value: Value
    notes: tuple[tuple[float, str], ...]

    def argv(self) -> tuple[str, str]:
        """progress.lua's two texts: the value's JSON, and the notes' JSON array."""
        latest = json.dumps(self.value.row(), ensure_ascii=False, separators=(",", ":"))
        notes = [{"done": _plain(d), "message": m} for d, m in self.notes]
        return latest, json.dumps(notes, ensure_ascii=False, separators=(",", ":"))


class Coalescer:
    """One attempt's progress between writes.

    :meth:`offer` records a value (cheap: a lock and a few assignments, no
    I/O); :meth:`take` hands out what to write when a write is due, and
    :meth:`take_rest` what is left at the attempt's end.  A write is due when
    a value is unwritten and it is the first, or ``interval`` seconds (the
    caller's: the heartbeat period) passed since the last write, or a value
    was flushed (``done >= total``).
    ``writes`` counts the writes handed out.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.value: Value | None = None
        self.notes: deque[tuple[float, str]] = deque(maxlen=RECENT_MAX)
        self.dirty = False
        self.flush = False
        self.last_write: float | None = None
        self.writes = 0

    def offer(self, value: Value) -> None:
        with self.lock:
            self.value = value
            if value.message is not None:
                self.notes.append((value.done, value.message))
            self.dirty = True
            if value.total is not None and value.done >= value.total:
                self.flush = True

    def due(self, now: float, interval: float) -> bool:
        """Whether a write is due at ``now``, writing at most every ``interval`` s."""
        return self.dirty and (
            self.flush or self.last_write is None or now - self.last_write >= interval
        )

    def take(self, now: float, interval: float) -> Pending | None:
        """What to write at ``now``, if a write is due (then it counts as written)."""
        with self.lock:
            if not self.due(now, interval):
                return None
            return self._take(now)

    def take_rest(self, now: float) -> Pending | None:
        """What is still unwritten, due or not: the attempt ended."""
        with self.lock:
            return self._take(now) if self.dirty else None

    def merge(self, pending: Pending) -> None:
        """Take in a value written elsewhere's pending (a process-pool child's)."""
        with self.lock:
            self.value = pending.value
            self.notes.extend(pending.notes)
            self.dirty = True
            v = pending.value
            if v.total is not None and v.done >= v.total:
                self.flush = True

    def restore(self, pending: Pending) -> None:
        """Put back what a write that failed carried, unless a newer value came."""
        with self.lock:
            if not self.dirty:
                self.value = pending.value
                self.notes.extendleft(reversed(pending.notes))
                self.dirty = True

    def _take(self, now: float) -> Pending:
        assert self.value is not None  # dirty: a value was offered
        out = Pending(self.value, tuple(self.notes))
        self.notes.clear()
        self.dirty = self.flush = False
        self.last_write = now
        self.writes += 1
        return out
