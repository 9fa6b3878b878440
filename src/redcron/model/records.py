"""What the library returns: small frozen records, parsed from Redis hashes.

Redis holds plain text (times as ms integers, numbers as digits, '' for
unset); a record holds typed values: timezone-aware UTC ``datetime`` (None
when unset), ints and floats, enums, tuples.  Each ``from_fields`` is a pure
function of a decoded hash (no Redis here), so the parsing is unit-tested on
plain dicts.  ``redcron.model.serialize.to_json`` turns any record into the
JSON the CLI and the REST API print.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from redcron import serde
from redcron.model.states import EXPIRED, RunState, TaskState
from redcron.model.tenants import TenantSettings

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


# -- tasks ------------------------------------------------------------------------


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
        """``fields`` holds one attempt's ``a:<n>:*`` fields without the prefix."""
        return cls(
            number=number,
            worker=_opt_text(fields, "worker"),
            leased_at=_time(fields, "leased"),
            started_at=_time(fields, "started"),
            ended_at=_time(fields, "ended"),
            outcome=_opt_text(fields, "outcome"),
            error=_opt_text(fields, "error"),
            exit_code=_opt_int(fields, "exit"),
        )


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task instance (the ``ti:<id>`` hash), as ``task_info`` returns it.

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

    @classmethod
    def from_fields(cls, fields: Fields, shard: int) -> TaskRecord:
        """Parse a decoded ``ti:<id>`` hash (values may be bytes or text)."""
        per_attempt: dict[int, dict[str, str | bytes]] = {}
        for key, value in fields.items():
            if key.startswith("a:"):
                _, n, name = (*key.split(":", 2), "")[:3]
                if n.isascii() and n.isdigit():  # a field "a:x" written by hand is no attempt
                    per_attempt.setdefault(int(n), {})[name] = value
        timeout_ms = _opt_int(fields, "timeout_ms")
        return cls(
            id=_text(fields.get("id")),
            name=_text(fields.get("name")),
            kind=_text(fields.get("kind")) or "python",
            state=_state(TaskState, fields),
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
            worker=_opt_text(fields, "worker"),
            run_id=_opt_text(fields, "run"),
            task=_opt_text(fields, "task"),
            depends_on=_csv(fields, "deps"),
            error=_opt_text(fields, "error"),
            exit_code=_opt_int(fields, "exit_code"),
            cpu=_opt_float(fields, "cpu"),
            mem=_opt_int(fields, "mem"),
            timeout_s=timeout_ms / 1000 if timeout_ms else None,
            cancel_requested=_text(fields.get("cancel_requested")) == "1",
            args=_bytes(fields, "args") or b"",
            result=_bytes(fields, "result") or None,
            attempts=tuple(
                AttemptRecord.from_fields(n, per_attempt[n]) for n in sorted(per_attempt)
            ),
            shard=shard,
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

    def decoded_result(self) -> Any:
        """The return value (None until the task succeeded)."""
        return serde.loads(self.result)


@dataclass(frozen=True, slots=True)
class ExpiredTask:
    """A run's task whose record is gone with its retention (only its name is left)."""

    task: str
    state: str = EXPIRED


# -- runs ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run of a job (the ``run:<id>`` hash).

    ``tasks`` is None from :meth:`JobStore.runs` (a history listing reads only
    the run hashes) and the run's tasks in DAG order from :meth:`JobStore.run`;
    ``task_names`` always lists them.  ``reason`` says why a fire made no run
    (state ``skipped`` or ``rejected``).  ``params`` is the JSON text the
    manual trigger passed (:meth:`decoded_params`).
    """

    id: str
    job_id: str
    job_name: str
    tenant: str
    #: the raw text when the hash holds no known state (edited by hand)
    state: RunState | str
    trigger: str
    reason: str | None
    scheduled_for: datetime | None
    created_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    total: int
    done: int
    succeeded: int
    failed: int
    cancelled: int
    cancel_requested: bool
    params: str | None = field(metadata=JSON_TEXT)
    task_names: tuple[str, ...]
    tasks: tuple[TaskRecord | ExpiredTask, ...] | None = None

    @classmethod
    def from_fields(
        cls, fields: Fields, tasks: tuple[TaskRecord | ExpiredTask, ...] | None = None
    ) -> RunRecord:
        return cls(
            id=_text(fields.get("id")),
            job_id=_text(fields.get("job")),
            job_name=_text(fields.get("job_name")),
            tenant=_text(fields.get("tenant")),
            state=_state(RunState, fields),
            trigger=_text(fields.get("trigger")),
            reason=_opt_text(fields, "reason"),
            scheduled_for=_time(fields, "scheduled_for"),
            created_at=_time(fields, "created"),
            started_at=_time(fields, "started"),
            ended_at=_time(fields, "ended"),
            total=_int(fields, "total"),
            done=_int(fields, "n_done"),
            succeeded=_int(fields, "n_succeeded"),
            failed=_int(fields, "n_failed"),
            cancelled=_int(fields, "n_cancelled"),
            cancel_requested=_text(fields.get("cancel_requested")) == "1",
            params=_opt_text(fields, "params"),
            task_names=_csv(fields, "tasks"),
            tasks=tasks,
        )

    def decoded_params(self) -> Any:
        """The run's parameters (a dict; None when none were given).  Text that
        is not JSON (written by hand) is returned as it is."""
        if not self.params:
            return None
        try:
            return json.loads(self.params)
        except ValueError:
            return self.params

    @property
    def duration_s(self) -> float | None:
        """From the start (creation if it never started) to the end; None until it ends."""
        begin = self.started_at or self.created_at
        if begin is None or self.ended_at is None:
            return None
        return (self.ended_at - begin).total_seconds()


# -- jobs ----------------------------------------------------------------------------

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

    @classmethod
    def from_fields(
        cls, fields: Fields, shard: int, scheduled_due_ms: int | None = None
    ) -> JobRecord:
        """Parse a decoded ``job:<id>`` hash; ``scheduled_due_ms`` is the job's
        score on the shard's schedule (None: not scheduled)."""
        cron, every, at_text, tz = _trigger_sig(_text(fields.get("trigger_sig")))
        at = _at(at_text, tz)
        paused = _text(fields.get("paused")) == "1"
        return cls(
            id=_text(fields.get("id")),
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
            overlap=_text(fields.get("overlap")),
            keep_runs=_int(fields, "keep_runs"),
            keep_s=_int(fields, "keep_s"),
            pause_after_failures=_int(fields, "pause_after_failures"),
            consecutive_failures=_int(fields, "consecutive_failures"),
            fires_skipped=_int(fields, "fires_skipped"),
            created_at=_time(fields, "created"),
            updated_at=_time(fields, "updated"),
            last_fire=_time(fields, "last_fire"),
            next_fire=None if paused else _time(fields, "next_fire"),
            scheduled_due=from_ms(scheduled_due_ms),
            breaker=_text(fields.get("breaker")) or "closed",
            breaker_until=_time(fields, "breaker_until"),
            breaker_trial=_opt_text(fields, "breaker_trial"),
            breaker_ratio=_opt_float(fields, "breaker_ratio"),
            breaker_min_attempts=_opt_int(fields, "breaker_min"),
            breaker_window_s=_opt_float(fields, "breaker_window_s"),
            breaker_cooldown_s=_opt_float(fields, "breaker_cooldown_s"),
            spec=_text(fields.get("spec")),
            shard=shard,
        )


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


# -- inspection ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DlqEntry:
    """One dead-lettered task (an entry of a tenant's DLQ stream).

    Self-contained: the error and the last log lines of the final attempt
    travel with it, so it stays readable after the task record expires.
    """

    task_id: str
    tenant: str
    name: str
    queue: str
    attempts: int
    outcome: str
    error: str | None
    log_tail: tuple[str, ...]
    dead_at: datetime | None
    entry_id: str
    shard: int

    @classmethod
    def from_fields(cls, entry_id: str, tenant: str, shard: int, fields: Fields) -> DlqEntry:
        tail = _text(fields.get("tail"))
        return cls(
            task_id=_text(fields.get("i")),
            tenant=tenant,
            name=_text(fields.get("name")),
            queue=_text(fields.get("queue")),
            attempts=_int(fields, "attempts"),
            outcome=_text(fields.get("outcome")),
            error=_opt_text(fields, "error"),
            log_tail=tuple(tail.split("\n")) if tail else (),
            dead_at=_time(fields, "at"),
            entry_id=entry_id,
            shard=shard,
        )


@dataclass(frozen=True, slots=True)
class TenantLoad:
    """One tenant's work on one shard (a row of ``Broker.inspect``)."""

    tenant: str
    shard: int
    ready: int
    in_flight: int
    delayed: int
    dlq: int


@dataclass(frozen=True, slots=True)
class TenantStatus:
    """A tenant's settings with its live figures (``redcron tenants list/show``).

    ``queued``: ready instances over all queues and classes (delayed timers
    not counted); ``in_flight``: valid leases; ``dispatched_last_minute`` and
    ``share_last_minute`` (0..1 of all tenants' dispatches) cover the current
    and previous server minute."""

    tenant: str
    shard: int
    settings: TenantSettings
    in_flight: int
    queued: int
    dispatched_last_minute: int = 0
    share_last_minute: float = 0.0


@dataclass(frozen=True, slots=True)
class Event:
    """A recorded event (circuit breaker opened, trial, reopened, closed)."""

    id: str
    type: str
    job_id: str
    at: datetime | None
    detail: str | None
    shard: int

    @classmethod
    def from_fields(cls, entry_id: str, shard: int, fields: Fields) -> Event:
        return cls(
            id=entry_id,
            type=_text(fields.get("type")),
            job_id=_text(fields.get("job")),
            at=_time(fields, "at"),
            detail=_opt_text(fields, "detail"),
            shard=shard,
        )


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A live worker as it last published itself (``redcron workers list``).

    ``slots`` is its concurrency, ``running`` the attempts in progress at its
    last heartbeat (``heartbeat_at``, server clock); ``expires_at`` is when the
    entry goes if no heartbeat renews it.  ``tasks`` are the task names its
    App registers (a command worker also serves ``redcron.command``)."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    tenants: tuple[str, ...]
    slots: int
    running: int
    tasks: tuple[str, ...]
    version: str
    started_at: datetime | None
    heartbeat_at: datetime | None
    expires_at: datetime | None

    @classmethod
    def from_fields(cls, fields: Fields) -> WorkerInfo:
        """Parse a decoded ``worker:<id>`` hash."""
        return cls(
            id=_text(fields.get("id")),
            host=_text(fields.get("host")),
            pid=_int(fields, "pid"),
            queues=_csv(fields, "queues"),
            tenants=_csv(fields, "tenants"),
            slots=_int(fields, "slots"),
            running=_int(fields, "running"),
            tasks=_csv(fields, "tasks"),
            version=_text(fields.get("version")),
            started_at=_time(fields, "started"),
            heartbeat_at=_time(fields, "heartbeat"),
            expires_at=_time(fields, "expires"),
        )


@dataclass(frozen=True, slots=True)
class QueueLoad:
    """One (tenant, queue)'s work on one shard (``Broker.inspect_queues``).

    ``served``: some live worker leases from this queue for this tenant
    (False: work here waits for a worker that is not running)."""

    tenant: str
    queue: str
    shard: int
    ready: int
    in_flight: int
    delayed: int
    dlq: int
    served: bool = True


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """An API token as ``redcron tenants token list`` shows it: never its secret.

    ``kind`` is ``tenant`` (``tenant`` set) or ``worker`` (``queues`` it may
    lease from, ``tenants`` it may serve; empty ``tenants`` = all)."""

    id: str
    kind: str
    tenant: str | None
    queues: tuple[str, ...]
    tenants: tuple[str, ...]
    created_at: datetime | None


@dataclass(frozen=True, slots=True)
class MinuteActivity:
    """Attempts that ended in one minute (``redcron.broker.stats.activity``).

    ``minute`` is the minute's start (UTC, server clock); ``failed`` counts
    attempts that failed, timed out or were lost, not cancelled ones nor
    hand-backs at worker shutdown."""

    minute: datetime
    succeeded: int
    failed: int


@dataclass(frozen=True, slots=True)
class LagSummary:
    """Trigger lag of the scheduled fires of a window of minutes
    (``redcron.broker.stats.trigger_lag``); manual runs are not fires here.

    Lag is read from a histogram, so each figure is the upper bound of the
    bucket it falls in (``p50_s = 0.05``: half the fires were at most 50 ms
    late).  A figure beyond the last finite bound (``LAG_BUCKETS_S[-1]``, 300 s)
    reads as that bound, and ``beyond_last_bucket`` counts those fires.  The
    figures are None when there was no fire."""

    minutes: int
    fires: int
    p50_s: float | None
    p99_s: float | None
    max_bucket_s: float | None
    beyond_last_bucket: int


# -- reconciliation (redcron doctor) ----------------------------------------------


@dataclass(frozen=True, slots=True)
class Finding:
    """One inconsistency ``redcron doctor`` found between the indexes and the
    instance hashes, runs and jobs they name.

    ``kind`` is a stable snake_case code (``docs/operations.md`` lists them);
    ``key`` the Redis key to look at; ``detail`` a sentence a person can act
    on.  ``repairable``: ``--repair`` knows a safe, idempotent fix;
    ``repaired``: the fix ran (``action`` says what it did, or why it did not).
    """

    kind: str
    shard: int
    key: str
    detail: str
    repairable: bool
    repaired: bool = False
    action: str = ""


@dataclass(frozen=True, slots=True)
class TenantRecount:
    """What one tenant's indexes claim against a recount from the instances.

    ``in_flight`` is the size of its lease set (what its cap counts),
    ``in_flight_recount`` the instances leased or running for it with a lease
    that holds; ``queued`` the undelivered entries of its ready streams,
    ``queued_recount`` those an instance in state ``ready`` owns; ``ready``
    the instances in state ``ready``; ``dlq`` its DLQ entries."""

    tenant: str
    shard: int
    in_flight: int
    in_flight_recount: int
    queued: int
    queued_recount: int
    ready: int
    dlq: int


@dataclass(frozen=True, slots=True)
class DoctorSummary:
    """What one examination looked at and found."""

    instances: int = 0
    streams: int = 0
    stream_entries: int = 0
    leases: int = 0
    timers: int = 0
    dlq_entries: int = 0
    #: DLQ entries whose instance expired with its run's retention (not a finding)
    dlq_expired: int = 0
    jobs: int = 0
    schedule_entries: int = 0
    runs_active: int = 0
    findings: int = 0
    repaired: int = 0
    #: findings not repaired: exit status 1 of ``redcron doctor`` when > 0
    remaining: int = 0


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """The result of ``redcron doctor`` (``broker.doctor.examine``)."""

    checked_at: datetime | None
    repair: bool
    shards: int
    findings: tuple[Finding, ...]
    tenants: tuple[TenantRecount, ...]
    summary: DoctorSummary

    @property
    def clean(self) -> bool:
        """Nothing left to look at: no finding, or every one repaired."""
        return self.summary.remaining == 0
