"""Task records: one instance (the ``ti:<id>`` hash) and its attempts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from redcron import serde
from redcron.keys import map_index, run_of_task
from redcron.model.error_classes import ErrorClasses
from redcron.model.records.fields import (
    Fields,
    _bytes,
    _csv,
    _int,
    _opt_float,
    _opt_int,
    _opt_text,
    _state,
    _text,
    _time,
    from_ms,
)
from redcron.model.states import EXPIRED, TaskState


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of a task: who ran it, when, and how it ended.

    ``outcome`` is None while the attempt runs; else ``succeeded``, ``failed``,
    ``timed_out``, ``lost`` or ``cancelled``.
    """

    number: int
    worker: str | None = None
    leased_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: str | None = None
    error: str | None = None
    exit_code: int | None = None

    @classmethod
    def from_fields(cls, number: int, fields: Fields) -> AttemptRecord:
        """``fields`` holds one attempt's ``a:<n>:*`` fields without the prefix:
        ``w`` (worker), ``l`` (leased), ``s`` (started), or as an older version
        spelt them, ``worker``, ``leased``, ``started``."""
        return cls(
            number=number,
            worker=_opt_text(fields, "w") or _opt_text(fields, "worker"),
            leased_at=_time(fields, "l") or _time(fields, "leased"),
            started_at=_time(fields, "s") or _time(fields, "started"),
            ended_at=_time(fields, "ended"),
            outcome=_opt_text(fields, "outcome"),
            error=_opt_text(fields, "error"),
            exit_code=_opt_int(fields, "exit"),
        )


@dataclass(frozen=True, slots=True)
class ProgressNote:
    """One of the recent progress messages: what was done when it was said, and when
    it was stored (``at``: the server clock of the write that carried it)."""

    done: float
    message: str
    at: datetime | None
    attempt: int


@dataclass(frozen=True, slots=True)
class TaskProgress:
    """What a running task last said of its progress (``ctx.progress``, ``POST
    /v1/worker/progress``): ``done`` of ``total`` (None: unknown), its message,
    when it was stored and by which attempt, and the recent messages (oldest
    first, at most ``model/progress.py`` ``RECENT_MAX``)."""

    done: float
    total: float | None
    message: str | None
    at: datetime | None
    attempt: int
    recent: tuple[ProgressNote, ...] = ()

    @property
    def fraction(self) -> float | None:
        """done/total within 0..1 (None: no total)."""
        if not self.total:
            return None
        return max(0.0, min(1.0, self.done / self.total))

    def summary(self) -> str:
        """``40/100 (40%)``, or ``40`` without a total."""
        done = f"{self.done:g}"
        if self.total is None:
            return done
        return f"{done}/{self.total:g} ({100 * (self.fraction or 0):.0f}%)"

    @classmethod
    def from_fields(cls, fields: Fields) -> TaskProgress | None:
        """The ``progress`` and ``progress_recent`` fields (JSON, progress.lua);
        None when the task never reported, or the field is not what progress.lua
        writes (edited by hand)."""
        latest = _json(fields.get("progress"))
        if not isinstance(latest, dict) or not _is_number(latest.get("done")):
            return None
        notes = _json(fields.get("progress_recent"))
        recent = tuple(
            ProgressNote(
                done=n["done"] if _is_number(n.get("done")) else 0,
                message=str(n.get("message", "")),
                at=_json_time(n.get("at")),
                attempt=n["attempt"] if isinstance(n.get("attempt"), int) else 0,
            )
            for n in (notes if isinstance(notes, list) else [])
            if isinstance(n, dict)
        )
        total, message = latest.get("total"), latest.get("message")
        return cls(
            done=latest["done"],
            total=total if _is_number(total) else None,
            message=message if isinstance(message, str) else None,
            at=_json_time(latest.get("at")),
            attempt=latest["attempt"] if isinstance(latest.get("attempt"), int) else 0,
            recent=recent,
        )


def _json(raw: str | bytes | None) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _json_time(ms: object) -> datetime | None:
    if not _is_number(ms):
        return None
    try:
        return from_ms(int(ms))  # type: ignore[call-overload]
    except (OverflowError, ValueError):  # edited by hand past any date
        return None


@dataclass(frozen=True, slots=True)
class MapCounts:
    """A mapped task's instances (issue 32 §2: ``Task(map_over=...)``): what it
    is mapped over, how many elements the list held (None until it was read),
    and how many instances were made, have ended and succeeded."""

    over: str
    count: int | None
    made: int
    ended: int
    succeeded: int

    @property
    def failed(self) -> int:
        """Instances that ended without success (dead, cancelled)."""
        return self.ended - self.succeeded

    def summary(self) -> str:
        """``1,000 instances: 998 succeeded, 1 failed, 1 to go`` (for the pages and the CLI)."""
        if self.count is None:
            return f"mapped over {self.over}: not made yet"
        left = self.count - self.ended
        parts = [f"{self.succeeded:,} succeeded"]
        if self.failed:
            parts.append(f"{self.failed:,} failed")
        if left:
            parts.append(f"{left:,} to go")
        noun = "instance" if self.count == 1 else "instances"
        return f"{self.count:,} {noun} over {self.over}: {', '.join(parts)}"


#: the fields of an instance hash that hold its current attempt's holder and
#: times (an ended attempt's are ``a:<n>:w``, ``l``, ``s``)
_CURRENT_ATTEMPT = ("worker", "leased", "started")


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task instance (the ``ti:<id>`` hash), as ``task_info`` returns it.

    The one place an instance hash is decoded: the hash leaves out what its key
    says (the id; for a run's task, its run and task name: ``<run id>/<task>``),
    fields at their default (``model/fields.py`` ``TI_DEFAULTS``) and, once
    terminal, its place and lease, and once succeeded its holder (``worker`` is
    then the last attempt's) and its last attempt's outcome and end (the
    instance's ``state`` and ``ended`` say them); hashes an older version wrote (every field) read
    the same.

    ``args`` and ``result`` are the raw msgpack bytes; :meth:`decoded_args`
    and :meth:`decoded_result` decode them.  ``attempt`` is the current
    attempt number (0 before the first lease); ``budget`` the attempts not
    counted against ``max_attempts`` (a DLQ replay or a hand-back moves it).
    A run's task also has ``run_id``, ``task`` (its name in the DAG) and
    ``depends_on``.
    """

    id: str
    name: str
    kind: str
    #: the raw text when the hash holds no known state (edited by hand)
    state: TaskState | str
    queue: str
    tenant: str
    priority: str
    attempt: int
    max_attempts: int
    budget: int
    created_at: datetime | None
    due_at: datetime | None
    ended_at: datetime | None
    deadline_at: datetime | None
    worker: str | None
    run_id: str | None
    task: str | None
    depends_on: tuple[str, ...]
    error: str | None
    exit_code: int | None
    cpu: float | None
    mem: int | None
    timeout_s: float | None
    cancel_requested: bool
    args: bytes
    result: bytes | None
    attempts: tuple[AttemptRecord, ...]
    shard: int
    # -- unique windows and debounce (issue 21 §4; docs/operations.md) --
    #: the key a unique window matches on (the ``_unique_key``, or ``sha1:<digest>``
    #: of the arguments), and the window's end (it also ends with the task)
    unique_key: str | None = None
    unique_until: datetime | None = None
    #: a debounced task: its key, debounce and cap (seconds), first and last call,
    #: calls folded in (the first included); its start is ``due_at``
    debounce_key: str | None = None
    debounce_s: float | None = None
    max_wait_s: float | None = None
    debounce_first_at: datetime | None = None
    debounce_last_at: datetime | None = None
    debounce_calls: int = 0
    # -- end unique windows and debounce --
    #: its concurrency key's value and cap (model/concurrency.py); None: no key
    concurrency_key: str | None = None
    max_concurrent: int | None = None
    #: the exception classes this call gave (``_retry_on``, ``_permanent_on``) by
    #: dotted name, replacing its task's; None: not given (model/error_classes.py)
    retry_on: tuple[str, ...] | None = None
    permanent_on: tuple[str, ...] | None = None
    #: its rate limit (model/rate.py): ``10/s``, the ``rate_key`` argument and this
    #: call's value of it (None: the task as a whole); None: no rate
    rate: str | None = None
    rate_key: str | None = None
    rate_group: str | None = None
    #: a mapped task: its instances' counts (None: not mapped)
    mapped: MapCounts | None = None
    #: an instance of a mapped task (``<task>[<i>]``): its index in the list, and
    #: its element of it (raw msgpack, as ``args``; :meth:`decoded_item`)
    map_index: int | None = None
    item: bytes | None = None
    #: what the running (or last) attempt said of its progress (None: nothing)
    progress: TaskProgress | None = None

    @classmethod
    def from_fields(cls, fields: Fields, shard: int, iid: str | None = None) -> TaskRecord:
        """Parse a decoded ``ti:<id>`` hash (values may be bytes or text); ``iid``
        is the id its key names (the hash's own ``id`` field when not given)."""
        per_attempt: dict[int, dict[str, str | bytes]] = {}
        for key, value in fields.items():
            if key.startswith("a:"):
                _, n, name = (*key.split(":", 2), "")[:3]
                if n.isascii() and n.isdigit():  # a field "a:x" written by hand is no attempt
                    per_attempt.setdefault(int(n), {})[name] = value
        state = _state(TaskState, fields)
        last = _opt_int(fields, "attempt")
        if last and any(f in fields for f in _CURRENT_ATTEMPT):
            # the current (or a succeeded instance's last) attempt: its holder and
            # times are the instance's worker, leased and started, not a:<n>:
            mine = per_attempt.setdefault(last, {})
            for f in _CURRENT_ATTEMPT:
                if f in fields:
                    mine.setdefault(f, fields[f])
        if state == TaskState.SUCCEEDED and last is not None and last in per_attempt:
            # the last attempt of a succeeded instance: its outcome and end are the
            # instance's state and ended (not written twice); older hashes have both
            mine = per_attempt[last]
            mine.setdefault("outcome", "succeeded")
            if "ended" in fields:
                mine.setdefault("ended", fields["ended"])
        timeout_ms = _opt_int(fields, "timeout_ms")
        iid = iid or _text(fields.get("id"))
        # a run's instance id says its run and task; hashes an older version wrote
        # repeat them
        run_task = run_of_task(iid)
        attempts = tuple(AttemptRecord.from_fields(n, per_attempt[n]) for n in sorted(per_attempt))
        errors = ErrorClasses.parse(fields.get("error_classes")) or ErrorClasses()
        return cls(
            id=iid,
            name=_text(fields.get("name")),
            kind=_text(fields.get("kind")) or "python",
            state=state,
            queue=_text(fields.get("queue")),
            tenant=_text(fields.get("tenant")),
            priority=_text(fields.get("priority")),
            attempt=_int(fields, "attempt"),
            max_attempts=_int(fields, "max_attempts"),
            budget=_int(fields, "budget"),
            created_at=_time(fields, "created"),
            due_at=_time(fields, "due"),
            ended_at=_time(fields, "ended"),
            deadline_at=_time(fields, "deadline"),
            # a terminal instance keeps its holder only in the attempt history
            worker=_opt_text(fields, "worker") or (attempts[-1].worker if attempts else None),
            run_id=_opt_text(fields, "run") or (run_task[0] if run_task else None),
            task=_opt_text(fields, "task") or (run_task[1] if run_task else None),
            depends_on=_csv(fields, "deps"),
            error=_opt_text(fields, "error"),
            exit_code=_opt_int(fields, "exit_code"),
            cpu=_opt_float(fields, "cpu"),
            mem=_opt_int(fields, "mem"),
            timeout_s=timeout_ms / 1000 if timeout_ms else None,
            cancel_requested=_text(fields.get("cancel_requested")) == "1",
            args=_bytes(fields, "args") or b"",
            result=_bytes(fields, "result") or None,
            attempts=attempts,
            shard=shard,
            unique_key=_opt_text(fields, "unique_key"),
            unique_until=_time(fields, "unique_until"),
            debounce_key=_opt_text(fields, "debounce_key"),
            debounce_s=_seconds(fields, "debounce_ms"),
            max_wait_s=_seconds(fields, "max_wait_ms"),
            debounce_first_at=_time(fields, "debounce_first"),
            debounce_last_at=_time(fields, "debounce_last"),
            debounce_calls=_int(fields, "debounce_calls"),
            concurrency_key=_opt_text(fields, "ck"),
            max_concurrent=_opt_int(fields, "ckn"),
            retry_on=errors.retry_on,
            permanent_on=errors.permanent_on,
            rate=_rate_text(fields),
            rate_key=_opt_text(fields, "rate_key"),
            rate_group=_opt_text(fields, "rate_group"),
            mapped=_map_counts(fields),
            map_index=map_index(run_task[1]) if run_task else None,
            item=_bytes(fields, "item") or None,
            progress=TaskProgress.from_fields(fields),
        )

    @property
    def attempts_used(self) -> int:
        """Attempts counted against ``max_attempts``: those since the last DLQ
        replay or run retry (each starts a fresh budget), less hand-backs."""
        return max(0, self.attempt - self.budget)

    def decoded_args(self) -> Any:
        """The arguments as plain data: ``[args, kwargs]`` for a Python task,
        ``{argv, env, cwd}`` for a command."""
        return serde.loads(self.args)

    def decoded_item(self) -> Any:
        """An instance of a mapped task: its element (None for any other task)."""
        return serde.loads(self.item)

    def decoded_result(self) -> Any:
        """The return value (None until the task succeeded)."""
        return serde.loads(self.result)


def _map_counts(fields: Fields) -> MapCounts | None:
    over = _opt_text(fields, "map_over")
    if over is None:
        return None
    return MapCounts(
        over=over,
        count=_opt_int(fields, "map_n"),
        made=_int(fields, "map_made"),
        ended=_int(fields, "map_done"),
        succeeded=_int(fields, "map_ok"),
    )


def _rate_text(fields: Fields) -> str | None:
    """An instance's rate as declared (``10/s``), from ``rate_n`` and ``rate_ms``."""
    n, unit_ms = _opt_int(fields, "rate_n"), _opt_int(fields, "rate_ms")
    if not n or not unit_ms:
        return None
    unit = {1_000: "s", 60_000: "m", 3_600_000: "h"}.get(unit_ms)
    return f"{n}/{unit}" if unit else f"{n}/{unit_ms}ms"


def _seconds(fields: Fields, name: str) -> float | None:
    """A ms field as seconds (None when absent)."""
    ms = _opt_int(fields, name)
    return None if ms is None else ms / 1000


@dataclass(frozen=True, slots=True)
class ExpiredTask:
    """A run's task whose record is gone with its retention (only its name is left)."""

    task: str
    state: str = EXPIRED
