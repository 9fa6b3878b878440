"""Tenant records: a tenant's load and status per shard and queue, and its
dead-lettered tasks (``Inspection.inspect``, ``redcron tenants``, the DLQ)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from redcron.model.records.fields import Fields, _int, _opt_text, _text, _time
from redcron.model.tenants import TenantSettings


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
    """One tenant's work on one shard (a row of ``Inspection.inspect``)."""

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
class QueueLoad:
    """One (tenant, queue)'s work on one shard (``redcron.engine.inspect.queue_loads``).

    ``served``: some live worker leases from this queue for this tenant
    (False: work here waits for a worker that is not running).
    ``unrunnable``: ready instances of tasks no live worker serving the queue
    registered (they wait for one that does; all of them when none serves it),
    read from the first 1,000 ready entries of each stream: past that, a floor."""

    tenant: str
    queue: str
    shard: int
    ready: int
    in_flight: int
    delayed: int
    dlq: int
    served: bool = True
    unrunnable: int = 0
