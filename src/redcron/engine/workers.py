"""The worker registry: who is serving what, right now.

Each worker publishes a hash (``Keys.worker(id)``) on start and with its
heartbeats, and scores itself in an index ZSET (``Keys.workers()``) by when
its entry expires (server clock).  The hash carries a TTL of the same length,
so a worker that dies without a word (SIGKILL, lost host) disappears on its
own: readers prune index entries whose score is past, and skip (and prune)
ids whose hash is gone.  A clean stop removes both at once.

The registry is deployment-wide (not per shard): a worker serves every shard.
Pages (the Workers page, ``GET /v1/workers``) read it a page at a time by id
from a second index, ``workeridx`` (every registered id scored 0, read with
``ZRANGEBYLEX``): an id whose hash is gone is dropped from both on the way.
Each worker also publishes up to :data:`LEASED_PUBLISHED` instance ids it holds,
so a page shows what its workers run without reading any tenant's leases.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING

from redcron.engine.core import fields_of
from redcron.model import WorkerInfo
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core
    from redcron.model.jobs import JobSpec

#: an entry lives this many lease TTLs past its last heartbeat (heartbeats
#: come every TTL/6: a few missed ones do not make a live worker vanish)
TTL_LEASES = 3
#: bound on the entries one read looks at
MAX_LISTED = 10_000
#: worker ids one page read looks at most, past gone ones and a tenant filter
#: (the page may then come back short, with a cursor)
PAGE_SCAN = 500
#: instance ids a worker publishes of those it holds (the Workers page's "running now")
LEASED_PUBLISHED = 10
#: seconds between re-publications of a worker's entry when only what it holds
#: changed (besides the one with each heartbeat): a publication is a TIME and a
#: MULTI of four writes on the registry's one slot, and a busy worker's leases
#: change every second (at the design's ~2,300 workers, 5 s keeps that to
#: ~460 publications a second)
LEASED_REPUBLISH_S = 5.0


def package_version() -> str:
    """The installed redcron's version ("unknown" when run from a bare tree)."""
    try:
        return metadata.version("redcron")
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True, slots=True)
class Registration:
    """What a worker publishes about itself (see :class:`WorkerInfo`)."""

    id: str
    host: str
    pid: int
    queues: Sequence[str]
    tenants: Sequence[str]
    slots: int
    running: int
    tasks: Sequence[str]
    version: str = ""
    leased: Sequence[str] = ()
    #: the id of the ``redcron worker --procs N`` supervisor that started this
    #: worker ("" for a worker on its own): ``workers list`` groups by it
    supervisor: str = ""
    #: how it talks to redcron: ``redis`` (``redcron worker``) or ``http``
    #: (``/v1/worker``, registered by the dashboard on its behalf)
    via: str = "redis"
    #: an HTTP worker's API token id (``admin`` for the admin token); "" otherwise
    token: str = ""


class WorkerRegistry:
    """Publish, remove and list worker registrations."""

    def __init__(self, broker: Core) -> None:
        self.broker = broker
        self.keys = broker.keys

    def publish(self, reg: Registration, ttl_ms: int, now: int | None = None) -> int:
        """Write (or renew) ``reg``: it expires ``ttl_ms`` after ``now`` (server
        clock by default) unless published again; its first publication is its
        start time.  Returns the expiry (ms)."""
        now = self.broker.server_ms() if now is None else now
        expires = now + ttl_ms
        key = self.keys.worker(reg.id)
        pipe = self.broker.client.pipeline(transaction=True)
        pipe.hset(
            key,
            mapping={
                "id": reg.id,
                "host": reg.host,
                "pid": reg.pid,
                "queues": ",".join(reg.queues),
                "tenants": ",".join(reg.tenants),
                "slots": reg.slots,
                "running": reg.running,
                "tasks": ",".join(sorted(reg.tasks)),
                "version": reg.version or package_version(),
                "heartbeat": now,
                "expires": expires,
                "leased": ",".join(reg.leased[:LEASED_PUBLISHED]),
                **({"supervisor": reg.supervisor} if reg.supervisor else {}),
                "via": reg.via,
                "token": reg.token,
            },
        )
        pipe.hsetnx(key, "started", now)  # kept by every renewal
        pipe.pexpire(key, ttl_ms)
        pipe.zadd(self.keys.workers(), {reg.id: expires})
        pipe.zadd(self.keys.workeridx(), {reg.id: 0})
        pipe.execute()
        return expires

    def get(self, worker_id: str) -> WorkerInfo | None:
        """The entry of ``worker_id`` as last published (None: none, or expired)."""
        raw = self.broker.client.hgetall(self.keys.worker(worker_id))
        return WorkerInfo.from_fields(fields_of(raw)) if raw else None

    def remove(self, worker_id: str) -> None:
        """Take a worker out at once (a clean stop)."""
        pipe = self.broker.client.pipeline(transaction=True)
        pipe.delete(self.keys.worker(worker_id))
        pipe.zrem(self.keys.workers(), worker_id)
        pipe.zrem(self.keys.workeridx(), worker_id)
        pipe.execute()

    def count(self, now: int | None = None) -> int:
        """How many workers are live (expired index entries pruned first)."""
        now = self.broker.server_ms() if now is None else now
        pipe = self.broker.client.pipeline(transaction=False)
        pipe.zremrangebyscore(self.keys.workers(), "-inf", f"({now}")
        pipe.zcard(self.keys.workers())
        return int(pipe.execute()[1])

    def page(
        self,
        after: str | None,
        limit: int,
        keep: Callable[[WorkerInfo], bool] | None = None,
    ) -> tuple[list[WorkerInfo], str | None]:
        """Live workers by id: ``limit`` after the id ``after``, only those ``keep``
        accepts when given (a viewer's tenant), among at most :data:`PAGE_SCAN`
        ids read; and the cursor of the next page (the last id read; None: the
        last page).  The work grows with the page, never with the workers."""
        client, idx = self.broker.client, self.keys.workeridx()
        self._backfill()
        shown: list[WorkerInfo] = []
        low = f"({after}" if after else "-"
        scanned = 0
        last: str | None = None
        while scanned < PAGE_SCAN:
            want = min(limit + 1 - len(shown), PAGE_SCAN - scanned)
            ids = [_s(x) for x in client.zrangebylex(idx, low, "+", 0, want)]
            if not ids:
                return shown[:limit], None
            scanned += len(ids)
            pipe = client.pipeline(transaction=False)
            for wid in ids:
                pipe.hgetall(self.keys.worker(wid))
            gone: list[str] = []
            for wid, raw in zip(ids, pipe.execute(), strict=True):
                if not raw:  # expired (a worker killed without a word): prune
                    gone.append(wid)
                    continue
                info = WorkerInfo.from_fields(fields_of(raw))
                if keep is None or keep(info):
                    shown.append(info)
                    if len(shown) > limit:
                        return shown[:limit], shown[limit - 1].id
            if gone:
                self._prune(gone)
            last = ids[-1]
            low = f"({last}"
            if len(ids) < want:
                return shown, None
        return shown, last

    def _prune(self, ids: Sequence[str]) -> None:
        pipe = self.broker.client.pipeline(transaction=False)
        pipe.zrem(self.keys.workeridx(), *ids)
        pipe.zrem(self.keys.workers(), *ids)
        pipe.execute()

    def _backfill(self) -> None:
        """A deployment older than ``workeridx``: copy the ids in once (workers
        that publish add themselves too)."""
        client = self.broker.client
        if client.exists(self.keys.workeridx()):
            return
        ids = [_s(x) for x in client.zrange(self.keys.workers(), 0, MAX_LISTED - 1)]
        if ids:
            client.zadd(self.keys.workeridx(), dict.fromkeys(ids, 0))

    def list(self, now: int | None = None) -> list[WorkerInfo]:
        """Live workers, by id; entries expired at ``now`` (server clock by
        default) are pruned from the index on the way."""
        now = self.broker.server_ms() if now is None else now
        index = self.keys.workers()
        client = self.broker.client
        client.zremrangebyscore(index, "-inf", f"({now}")
        ids = [_s(x) for x in client.zrange(index, 0, MAX_LISTED - 1)]
        if not ids:
            return []
        pipe = client.pipeline(transaction=False)
        for wid in ids:
            pipe.hgetall(self.keys.worker(wid))
        out: list[WorkerInfo] = []
        gone: list[str] = []
        for wid, raw in zip(ids, pipe.execute(), strict=True):
            if raw:
                out.append(WorkerInfo.from_fields(fields_of(raw)))
            else:  # the hash expired a moment before its index entry: prune
                gone.append(wid)
        if gone:
            client.zrem(index, *gone)
        return sorted(out, key=lambda w: w.id)


def unserved_refs(broker: Core, specs: Sequence[JobSpec]) -> list[tuple[str, str, str]]:
    """(task ref, ``<tenant>/<job>``, task name) of each Python task of ``specs``
    that no live worker serves (its runs would wait, ready, until one does)."""
    refs = [
        (task.ref, f"{spec.tenant}/{spec.name}", name)
        for spec in specs
        for name, task in spec.tasks.items()
        if task.kind == "python" and task.ref is not None
    ]
    if not refs:
        return []
    served = {name for worker in WorkerRegistry(broker).list() for name in worker.tasks}
    return [r for r in refs if r[0] not in served]


def unserved_tasks(broker: Core, specs: Sequence[JobSpec]) -> list[str]:
    """One line per Python task of ``specs`` that no live worker serves; nothing
    when no job names one (``POST /v1/jobs``' ``warnings``; ``redcron jobs
    apply`` groups them by task with :func:`unserved_by_task`)."""
    return [_unserved_line(ref, [(job, name)]) for ref, job, name in unserved_refs(broker, specs)]


def unserved_by_task(missing: Sequence[tuple[str, str, str]], named: int = 3) -> list[str]:
    """:func:`unserved_refs` as one line per task ref (in order of first
    appearance), naming its first ``named`` jobs and counting the rest: a file
    of 10,000 jobs warns once per task, not once per job."""
    by_ref: dict[str, list[tuple[str, str]]] = {}
    for ref, job, name in missing:
        by_ref.setdefault(ref, []).append((job, name))
    return [_unserved_line(ref, uses, named) for ref, uses in by_ref.items()]


def _unserved_line(ref: str, uses: Sequence[tuple[str, str]], named: int = 3) -> str:
    tail = "until a worker registering it starts"
    if len(uses) == 1:
        job, name = uses[0]
        return (
            f"no live worker serves task {ref!r} (job {job}, task {name!r}); "
            f"its runs will wait {tail}"
        )
    jobs = ", ".join(job for job, _name in uses[:named])
    more = f" and {len(uses) - named:,} more" if len(uses) > named else ""
    return (
        f"no live worker serves task {ref!r} ({len(uses):,} jobs: {jobs}{more}); "
        f"their runs will wait {tail}"
    )
