"""Who connects: live workers (the worker registry) and API tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from redcron.model.records.fields import Fields, _csv, _int, _text, _time


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A live worker as it last published itself (``redcron workers list``).

    ``slots`` is its concurrency, ``running`` the attempts in progress at its
    last heartbeat (``heartbeat_at``, server clock); ``expires_at`` is when the
    entry goes if no heartbeat renews it.  ``tasks`` are the task names its
    App registers (a command worker also serves ``redcron.command`` and
    ``redcron.container``): it leases instances of these only, and leaves
    the others ready for a worker that has them (an HTTP worker publishes none
    and leases any task)."""

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
    #: ids of (some of) the task instances it held at its last heartbeat, for the
    #: Workers page (at most ``LEASED_PUBLISHED``)
    leased: tuple[str, ...] = ()
    #: the id of the ``redcron worker --procs N`` supervisor that started it
    #: ("" for a worker on its own): its processes are listed together
    supervisor: str = ""
    #: ``redis`` (``redcron worker``) or ``http`` (an HTTP worker, ``/v1/worker``)
    via: str = "redis"
    #: an HTTP worker's API token id (``admin``: the admin token); "" for the others
    token: str = ""

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
            leased=_csv(fields, "leased"),
            supervisor=_text(fields.get("supervisor")),
            via=_text(fields.get("via")) or "redis",
            token=_text(fields.get("token")),
        )


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """An API token as ``redcron tenants token list`` shows it: never its secret.

    ``kind`` is ``admin`` (an extra admin token: every tenant), ``tenant``
    (``tenant`` set) or ``worker`` (``queues`` it may lease from, ``tenants`` it
    may serve; empty ``tenants`` = all).  ``role`` (admin and tenant tokens):
    ``operator`` (reads and changes within its scope; a token stored before roles
    existed reads as one) or ``viewer`` (reads only); empty for a worker token."""

    id: str
    kind: str
    tenant: str | None
    queues: tuple[str, ...]
    tenants: tuple[str, ...]
    created_at: datetime | None
    role: str = ""
