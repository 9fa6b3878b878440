"""Job records: one job (the ``job:<id>`` hash) and its place on the schedule,
what writing a job did, and the events its circuit breaker records."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from redcron.model.fields import JOB_DEFAULTS
from redcron.model.records.fields import (
    JSON_TEXT,
    Fields,
    _int,
    _opt_float,
    _opt_text,
    _text,
    _time,
    from_ms,
)

#: what writing a job did (``deleted``: removed by ``jobs apply --prune``)
JobChangeKind = Literal["created", "updated", "unchanged", "deleted"]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job (the ``job:<id>`` hash) and its place on the schedule.

    ``spec`` is the stored spec (JSON text; ``spec_from_json`` makes it a
    ``JobSpec``); ``cron``/``every``/``at``/``tz`` are its trigger and
    ``trigger`` says it in words (``cron 0 2 * * *``, ``every 30s``,
    ``manual``).  ``next_fire`` is the nominal time of the next fire and
    ``scheduled_due`` when the beat will fire it (nominal + jitter); both are
    None while the job is paused or has no next fire.  ``parked_reason`` says
    why the beat took the job off the schedule (it could not compute or send
    its next fire: a malformed hash, an unreadable spec, a zone gone from
    tzdata), since ``parked_at``; an update or resume clears it.  ``breaker`` is the
    circuit breaker's state: ``closed``, ``open`` or ``trial``.  ``change``
    is what the write that returned the record did (``created``, ``updated``
    or ``unchanged``: ``app.jobs.put``); None on a plain read.

    Job chaining: ``depends_on`` are the upstream jobs; ``chained_by`` says what
    starts the job (``upstreams``: their succeeded runs; ``trigger``: its own
    trigger, each fire waiting for them; None without upstreams);
    ``waiting_for`` the upstreams that have had no succeeded run since the
    job's last chained or scheduled run; ``waiting_fire`` the nominal time of
    the fire held back until they have.  ``deadline_s``: a run not ended that
    long after its nominal fire time is late (None: no deadline).
    """

    id: str
    tenant: str
    name: str
    version: int
    paused: bool
    paused_reason: str | None
    parked_reason: str | None
    parked_at: datetime | None
    trigger: str
    cron: str | None
    every: str | None
    at: datetime | None
    tz: str
    task_order: tuple[str, ...]
    overlap: str
    keep_runs: int
    keep_s: int
    pause_after_failures: int
    consecutive_failures: int
    fires_skipped: int
    created_at: datetime | None
    updated_at: datetime | None
    last_fire: datetime | None
    next_fire: datetime | None
    scheduled_due: datetime | None
    breaker: str
    breaker_until: datetime | None
    breaker_trial: str | None
    breaker_ratio: float | None
    breaker_min_attempts: int | None
    breaker_window_s: float | None
    breaker_cooldown_s: float | None
    spec: str = field(metadata=JSON_TEXT)
    shard: int
    change: JobChangeKind | None = None
    depends_on: tuple[str, ...] = ()
    chained_by: str | None = None
    waiting_for: tuple[str, ...] = ()
    waiting_fire: datetime | None = None
    #: a run not ended this many seconds after its nominal fire time is late
    #: (the job hash's ``deadline_ms``); None: no deadline
    deadline_s: float | None = None

    def chain_words(self) -> str | None:
        """What the job waits for (job chaining), in words: :func:`chain_text`."""
        return chain_text(self)

    @classmethod
    def from_fields(
        cls,
        fields: Fields,
        shard: int,
        scheduled_due_ms: int | None = None,
        job_id: str | None = None,
    ) -> JobRecord:
        """Parse a decoded ``job:<id>`` hash; ``scheduled_due_ms`` is the job's
        score on the shard's schedule (None: not scheduled), ``job_id`` its id
        (the key's: the hash has no ``id`` field since issue 28, an older one
        may).  A setting absent from the hash holds its default
        (:data:`~redcron.model.fields.JOB_DEFAULTS`)."""

        def setting(name: str) -> str:
            return _text(fields.get(name)) or JOB_DEFAULTS[name]

        def number(name: str) -> float:
            value = _opt_float(fields, name)  # unreadable (a hand edit): the default
            return float(JOB_DEFAULTS[name]) if value is None else value

        cron, every, at_text, tz = _trigger_sig(_text(fields.get("trigger_sig")))
        ups = tuple(u for u in _text(fields.get("upstreams")).split(",") if u)
        satisfied = set(_text(fields.get("chain_ok")).split(","))
        held = _text(fields.get("chain_wait")).partition("|")[0]
        at = _at(at_text, tz)
        paused = _text(fields.get("paused")) == "1"
        return cls(
            id=job_id or _text(fields.get("id")),
            tenant=_text(fields.get("tenant")),
            name=_text(fields.get("name")),
            version=_int(fields, "version"),
            paused=paused,
            paused_reason=_opt_text(fields, "paused_reason"),
            parked_reason=_opt_text(fields, "parked_reason"),
            parked_at=_time(fields, "parked_at"),
            trigger=_trigger_text(cron, every, at),
            cron=cron,
            every=every,
            at=at,
            tz=tz,
            task_order=_task_order(_text(fields.get("template"))),
            overlap=setting("overlap"),
            keep_runs=int(number("keep_runs")),
            keep_s=int(number("keep_s")),
            pause_after_failures=int(number("pause_after_failures")),
            consecutive_failures=_int(fields, "consecutive_failures"),
            fires_skipped=_int(fields, "fires_skipped"),
            created_at=_time(fields, "created"),
            # a job never updated has no field of its own: it was last written when made
            updated_at=_time(fields, "updated") or _time(fields, "created"),
            last_fire=_time(fields, "last_fire"),
            next_fire=None if paused else _time(fields, "next_fire"),
            scheduled_due=from_ms(scheduled_due_ms),
            breaker=_text(fields.get("breaker")) or "closed",
            breaker_until=_time(fields, "breaker_until"),
            breaker_trial=_opt_text(fields, "breaker_trial"),
            breaker_ratio=number("breaker_ratio"),
            breaker_min_attempts=int(number("breaker_min")),
            breaker_window_s=number("breaker_window_s"),
            breaker_cooldown_s=number("breaker_cooldown_s"),
            spec=_text(fields.get("spec")),
            shard=shard,
            depends_on=ups,
            chained_by=(_opt_text(fields, "chain") or None) if ups else None,
            waiting_for=tuple(u for u in ups if u not in satisfied),
            waiting_fire=from_ms(int(held)) if held.isdigit() else None,
            deadline_s=_deadline_s(fields),
        )


def _deadline_s(fields: Fields) -> float | None:
    ms = _opt_float(fields, "deadline_ms")
    return None if ms is None or ms <= 0 else ms / 1000


def chain_text(job: JobRecord) -> str | None:
    """What a job with upstreams (``depends_on``) waits for, in words (``jobs
    show`` and the job page); None for a job without."""
    if not job.depends_on:
        return None
    ups = ", ".join(job.depends_on)
    waiting = ", ".join(job.waiting_for)
    if job.chained_by == "upstreams":
        rule = f"runs when each of {ups} has had a succeeded run since its last chained run"
        now = f"waiting for {waiting}" if waiting else "all succeeded (paused: it will not start)"
    else:
        rule = f"each fire of its trigger waits until each of {ups} has succeeded since its last"
        rule += " run"
        if job.waiting_fire is not None:
            fire = job.waiting_fire.isoformat().replace("+00:00", "Z")
            now = f"the fire of {fire} is waiting for {waiting}"
        else:
            now = f"not yet succeeded: {waiting}" if waiting else "the next fire runs at once"
    return f"{rule}; {now}"


def _trigger_sig(text: str) -> tuple[str | None, str | None, str | None, str]:
    """job_put's ``trigger_sig``: JSON ``[cron, every, at, tz]``."""
    try:
        cron, every, at, tz = json.loads(text)
    except (ValueError, TypeError):
        return None, None, None, "UTC"
    return cron or None, every or None, at or None, tz or "UTC"


def _at(text: str | None, tz: str) -> datetime | None:
    """A one-shot job's time in UTC; a naive ``at`` is wall time in ``tz``
    (in a DST gap ``next_fire`` holds the instant the beat computed)."""
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    if at.tzinfo is None:
        try:
            at = at.replace(tzinfo=ZoneInfo(tz))
        except (ZoneInfoNotFoundError, ValueError):
            at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC)


def _trigger_text(cron: str | None, every: str | None, at: datetime | None) -> str:
    if cron:
        return f"cron {cron}"
    if every:
        return f"every {every}"
    if at is not None:
        return f"at {at.isoformat().replace('+00:00', 'Z')}"
    return "manual"


def _task_order(template: str) -> tuple[str, ...]:
    """The DAG's tasks in declaration order (the compiled template keeps it)."""
    try:
        return tuple(str(row["task"]) for row in json.loads(template or "[]"))
    except (ValueError, TypeError, KeyError):
        return ()


@dataclass(frozen=True, slots=True)
class JobChange:
    """What an upsert did: ``change`` is created, updated or unchanged (or
    deleted: a job ``jobs apply --prune`` removed; ``version`` is then the
    version it had)."""

    id: str
    tenant: str
    name: str
    version: int
    change: JobChangeKind

    @classmethod
    def parse(cls, tenant: str, name: str, reply: Any) -> JobChange:
        """job_put.lua's reply ``{job_id, version, change}``."""
        jid, version, change = reply
        text = _text(change)
        if text not in ("created", "updated", "unchanged"):
            raise ValueError(f"job_put replied {text!r}")
        return cls(_text(jid), tenant, name, int(version), text)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Event:
    """A recorded event: a circuit breaker opened, trial, reopened, closed; a task
    dead-lettered, a run failed, a fire late (docs/operations.md, Notifications)."""

    id: str
    type: str
    job_id: str
    at: datetime | None
    detail: str | None
    shard: int
    tenant: str = ""
    run_id: str = ""

    @classmethod
    def from_fields(cls, entry_id: str, shard: int, fields: Fields) -> Event:
        return cls(
            id=entry_id,
            type=_text(fields.get("type")),
            job_id=_text(fields.get("job")),
            at=_time(fields, "at"),
            detail=_opt_text(fields, "detail"),
            shard=shard,
            tenant=_text(fields.get("tenant")),
            run_id=_text(fields.get("run")),
        )
