"""Inspection, what is where, read without a script (``watch.lua`` aside): ready
and delayed counts, ``inspect``, a task's record and log.

:class:`Inspection` holds the per-tenant counts (``inspect``: ready / in flight
/ delayed / DLQ, and ready per priority class), the ready and delayed counts
the metrics and tenant pages build on, a task's record, params and log, and
``watch``/``wait_done`` for a caller waiting on a result.

:func:`queue_loads` is ``inspect`` per queue: ready / in flight / delayed / DLQ
of each (tenant, queue), whether any live worker serves it (from the worker
registry), and how many of its ready instances are of tasks no live worker
serving it registered (``unrunnable``: a worker leases only the tasks it
registered and leaves the others ready, issue 29 §3).

Counts come from the ready streams (length less pending entries: ready;
pending entries: in flight), the timer set (delayed) and the DLQ streams.
Delayed and DLQ are read entry by entry (their entries name the queue), up to
``SCAN_LIMIT`` per shard and per tenant: past that, the counts are a floor
(the per-tenant totals of ``Inspection.inspect`` stay exact).  So is
``unrunnable``, read from the first ``UNRUNNABLE_SCAN`` ready entries of each
stream and at most ``SCAN_LIMIT`` per shard (an entry, then its instance's
name and state), and only where a worker serving the queue lacks some task.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redcron.engine.connection import raise_unreachable
from redcron.engine.core import PAYLOADS, Core, fields_of, shard_of_id
from redcron.engine.partial import per_shard
from redcron.errors import NotFound
from redcron.keys import GROUP, PRIORITIES, STAT_FIELDS, shard_of
from redcron.model import QueueLoad, TaskRecord, TenantLoad, WorkerInfo
from redcron.model.concurrency import ConcurrencySlots
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core

#: timers per shard and DLQ entries per tenant read to split counts by queue
SCAN_LIMIT = 10_000
#: ready entries of one stream the unrunnable count reads (SCAN_LIMIT per shard)
UNRUNNABLE_SCAN = 1_000


class Inspection:
    """Counts per tenant and per stream, and one task's record and log."""

    def __init__(self, core: Core) -> None:
        self.core = core

    # -- one task -------------------------------------------------------------

    def task_info(self, iid: str) -> TaskRecord:
        """The task instance's record (its hash, parsed)."""
        shard = shard_of_id(iid)
        raw = self.core.client.hgetall(self.core.keys.ti(shard, iid))
        if not raw:
            raise NotFound(f"no task {iid} (never existed, or expired after its retention)")
        return TaskRecord.from_fields(fields_of(raw, keep=PAYLOADS), shard, iid)

    def concurrency(self, task: TaskRecord) -> ConcurrencySlots | None:
        """The slots of ``task``'s concurrency key value (None: it has none), read
        in one round trip: the holders, the waiters' count and its place among them."""
        if not task.concurrency_key:
            return None
        keys, shard = self.core.keys, task.shard
        args = (task.tenant, task.name, task.concurrency_key)
        pipe = self.core.client.pipeline(transaction=False)
        pipe.zrange(keys.ckslots(shard, *args), 0, -1)
        pipe.llen(keys.ckwaiting(shard, *args))
        pipe.lpos(keys.ckwaiting(shard, *args), task.id)
        holders, waiting, pos = pipe.execute()
        return ConcurrencySlots(
            key=task.concurrency_key,
            max_concurrent=task.max_concurrent or 1,
            holders=tuple(_s(h) for h in holders),
            waiting=int(waiting),
            position=None if pos is None else int(pos) + 1,
        )

    def queue_names(self, shard: int) -> list[str]:
        """The queues ``shard`` has seen work on (enqueued or declared), sorted."""
        client, keys = self.core.client, self.core.keys
        return sorted(_s(q) for q in client.smembers(keys.queues(shard)))

    def run_params(self, shard: int, run_id: str) -> dict[str, Any]:
        """The params a run was triggered with (``{}``: none, or no such run)."""
        raw = self.core.client.hget(self.core.keys.run(shard, run_id), "params")
        params: dict[str, Any] = json.loads(raw) if raw else {}
        return params

    def log_lines(self, iid: str, attempt: int, count: int = 20) -> list[str]:
        key = self.core.keys.log(shard_of_id(iid), iid, attempt)
        entries: Any = self.core.client.xrevrange(key, count=count)
        return [_s(fields.get(b"line", b"")) for _eid, fields in reversed(entries)]

    def watch(self, iid: str) -> str:
        return _s(self.core._run("watch", shard_of_id(iid), [iid]))

    def wait_done(self, iid: str, timeout_s: float) -> bool:
        key = self.core.keys.done(shard_of_id(iid), iid)
        return self.core.client.blpop([key], timeout=max(0.01, timeout_s)) is not None

    # -- counts ---------------------------------------------------------------

    def inspect(self) -> list[TenantLoad]:
        """Ready / in-flight / delayed / DLQ counts per tenant, one row per shard it is on."""
        return [load for load, _classes in self.inspect_classes()]

    def inspect_classes(self, tenant: str | None = None) -> list[tuple[TenantLoad, dict[str, int]]]:
        """:meth:`inspect` (of ``tenant`` only, if given), each row with its ready
        work per priority class: the same reads, nothing read twice."""
        client, keys = self.core.client, self.core.keys

        def shard_rows(shard: int) -> list[tuple[TenantLoad, dict[str, int]]]:
            tenants = sorted(_s(t) for t in client.zrange(keys.tenants(shard), 0, -1))
            if tenant is not None:
                tenants = [t for t in tenants if t == tenant]
            return self._shard_classes(shard, tenants)

        # in partial_reads (the dashboard), a shard whose master is down is left out
        read = per_shard(self.core, range(self.core.shards), shard_rows, "figures")
        return [row for _shard, rows in sorted(read.items()) for row in rows]

    def inspect_tenants(
        self, tenants: Sequence[str], delayed: Mapping[str, int] | None = None
    ) -> list[tuple[TenantLoad, dict[str, int]]]:
        """:meth:`inspect_classes` of ``tenants`` only (a page of a table), each on
        its own shard: nothing of other tenants is read.  ``delayed``: each
        tenant's delayed count, counted elsewhere (a page's: the dashboard's
        background totals); None reads the shard's first ``SCAN_LIMIT`` timers,
        which name no tenant (work that grows with the timers, not the page)."""
        by_shard: dict[int, list[str]] = {}
        for t in tenants:
            by_shard.setdefault(shard_of(t, self.core.shards), []).append(t)
        rows: list[tuple[TenantLoad, dict[str, int]]] = []
        for shard, names in sorted(by_shard.items()):
            rows += self._shard_classes(shard, names, delayed)
        return rows

    def _shard_classes(
        self, shard: int, tenants: Sequence[str], counted: Mapping[str, int] | None = None
    ) -> list[tuple[TenantLoad, dict[str, int]]]:
        client, keys = self.core.client, self.core.keys
        rows: list[tuple[TenantLoad, dict[str, int]]] = []
        if not tenants:
            return rows
        queues = sorted(_s(q) for q in client.smembers(keys.queues(shard)))
        delayed: dict[str, int] = {}
        if counted is not None:
            delayed.update((t, counted.get(t, 0)) for t in tenants)
        else:
            for (t, _queue), n in self.delayed_counts(shard).items():
                delayed[t] = delayed.get(t, 0) + n
        streams = [keys.q(shard, q, t, p) for t in tenants for q in queues for p in PRIORITIES]
        ready = iter(self.ready_counts(streams))
        pipe = client.pipeline(transaction=False)
        for t in tenants:
            pipe.zcard(keys.leases(shard, t))
            pipe.xlen(keys.dlq(shard, t))
        res = iter(pipe.execute())
        for t in tenants:
            classes = dict.fromkeys(PRIORITIES, 0)
            for _q in queues:
                for p in PRIORITIES:
                    classes[p] += next(ready)
            load = TenantLoad(
                tenant=t,
                shard=shard,
                ready=sum(classes.values()),
                in_flight=int(next(res)),
                delayed=delayed.get(t, 0),
                dlq=int(next(res)),
            )
            rows.append((load, classes))
        return rows

    def delayed_counts(self, shard: int, limit: int = 10_000) -> dict[tuple[str, str], int]:
        """Delayed instances (retry waits, countdowns) per (tenant, queue) among the
        first ``limit`` timers of a shard: past that, a floor.  Two round trips."""
        client, keys = self.core.client, self.core.keys
        timer_ids = [_s(x) for x in client.zrange(keys.timers(shard), 0, limit - 1)]
        if not timer_ids:
            return {}
        pipe = client.pipeline(transaction=False)
        for iid in timer_ids:
            pipe.hmget(keys.ti(shard, iid), ["tenant", "queue"])
        out: dict[tuple[str, str], int] = {}
        for tenant, queue in pipe.execute():
            if tenant is not None:  # park:/brk:/ckwake: timers are not instances
                key = (_s(tenant), _s(queue or b""))
                out[key] = out.get(key, 0) + 1
        return out

    def ready_counts(self, streams: Sequence[str]) -> list[int]:
        """Ready entries of each ready stream: its length less the entries pending
        (leased) in its consumer group, in one round trip."""
        if not streams:
            return []
        pipe = self.core.client.pipeline(transaction=False)
        for key in streams:
            pipe.xlen(key)
            pipe.xpending(key, GROUP)
        got = pipe.execute(raise_on_error=False)
        raise_unreachable(got)  # a master down or CLUSTERDOWN: no figure, not a 0
        replies = iter(got)
        out = []
        for _key in streams:
            length, pending = next(replies), next(replies)
            # a stream never created has no group: XPENDING errors, nothing is there
            held = 0 if isinstance(pending, Exception) else int(pending["pending"])
            out.append(int(length) - held)
        return out

    def stats(self) -> dict[str, int]:
        """The deployment's counters (each shard's ``STAT_FIELDS`` of its
        ``counters``), summed; a counter appears once it has counted something."""
        total: dict[str, int] = {}
        for shard in range(self.core.shards):
            got = self.core.client.hmget(self.core.keys.counters(shard), STAT_FIELDS)
            for k, v in zip(STAT_FIELDS, got, strict=True):
                if v is not None:
                    total[k] = total.get(k, 0) + int(v)
        return total


def serves(worker: WorkerInfo, tenant: str, queue: str) -> bool:
    """Does ``worker`` lease ``tenant``'s work from ``queue``?"""
    return queue in worker.queues and (not worker.tenants or tenant in worker.tenants)


Counts = dict[tuple[str, str], list[int]]


def _add(counts: Counts, tenant: str, queue: str, column: int, n: int) -> None:
    counts.setdefault((tenant, queue), [0, 0, 0, 0])[column] += n


def runnable(workers: Sequence[WorkerInfo], tenant: str, queue: str) -> frozenset[str] | None:
    """The task names the live workers serving (``tenant``, ``queue``) run: the
    union of what they registered.  None: any task (an HTTP worker leases every
    task; its client publishes none); empty: no live worker serves it."""
    names: set[str] = set()
    for w in workers:
        if serves(w, tenant, queue):
            if w.via == "http":
                return None
            names.update(w.tasks)
    return frozenset(names)


#: one ready stream: (tenant, queue, key, ready entries, the XRANGE start of them)
ReadyStream = tuple[str, str, str, int, str]


def _ready_streams(client: Any, keys: Any, shard: int) -> tuple[list[ReadyStream], list[int]]:
    """Every (tenant, queue, class) stream of ``shard`` with its ready count, and
    the held (pending) count of each, in one round trip.  The ready entries are
    those after the highest pending one: a delivered entry stays pending until
    the script that ends its lease acknowledges and deletes it, in one call."""
    tenants = sorted(_s(t) for t in client.zrange(keys.tenants(shard), 0, -1))
    queues = sorted(_s(q) for q in client.smembers(keys.queues(shard)))
    streams = [(t, q, keys.q(shard, q, t, p)) for t in tenants for q in queues for p in PRIORITIES]
    pipe = client.pipeline(transaction=False)
    for _t, _q, key in streams:
        pipe.xlen(key)
        pipe.xpending(key, GROUP)
    got = pipe.execute(raise_on_error=False)
    raise_unreachable(got)  # a master down or CLUSTERDOWN: no figure, not a 0
    replies = iter(got)
    out: list[ReadyStream] = []
    held_counts: list[int] = []
    for t, q, key in streams:
        length, pending = next(replies), next(replies)
        # a stream never created has no group: XPENDING errors, nothing is there
        held = 0 if isinstance(pending, Exception) else int(pending["pending"])
        start = "(" + _s(pending["max"]) if held else "-"
        out.append((t, q, key, int(length) - held, start))
        held_counts.append(held)
    return out, held_counts


def _unrunnable(
    client: Any,
    keys: Any,
    shard: int,
    streams: Sequence[ReadyStream],
    workers: Sequence[WorkerInfo],
) -> dict[tuple[str, str], int]:
    """Ready instances per (tenant, queue) of tasks no live worker serving it
    registered (lease.lua leaves them ready): all of a queue's when none serves
    it; else counted in the first :data:`UNRUNNABLE_SCAN` ready entries of each
    stream (:data:`SCAN_LIMIT` per shard).  Two round trips, none when every
    serving worker leases any task (HTTP workers)."""
    out: dict[tuple[str, str], int] = {}
    scan: list[tuple[str, str, str, int, str, frozenset[str]]] = []
    budget = SCAN_LIMIT
    for t, q, key, ready, start in streams:
        if ready <= 0:
            continue
        names = runnable(workers, t, q)
        if names is None:
            continue
        if not names:
            out[(t, q)] = out.get((t, q), 0) + ready
        elif budget > 0:
            n = min(ready, UNRUNNABLE_SCAN, budget)
            budget -= n
            scan.append((t, q, key, n, start, names))
    if not scan:
        return out
    pipe = client.pipeline(transaction=False)
    for _t, _q, key, n, start, _names in scan:
        pipe.xrange(key, start, "+", count=n)
    entries: list[Any] = pipe.execute()
    pipe = client.pipeline(transaction=False)
    looked: list[tuple[str, str, frozenset[str]]] = []
    for (t, q, _key, _n, _start, names), found in zip(scan, entries, strict=True):
        for _eid, fields in found:
            pipe.hmget(keys.ti(shard, _s(fields.get(b"i", b""))), ["name", "state"])
            looked.append((t, q, names))
    for (t, q, names), (name, state) in zip(looked, pipe.execute(), strict=True):
        if state is not None and _s(state) == "ready" and _s(name or b"") not in names:
            out[(t, q)] = out.get((t, q), 0) + 1
    return out


def unrunnable_counts(broker: Core, workers: Sequence[WorkerInfo]) -> dict[tuple[str, str], int]:
    """Ready instances per (tenant, queue), over every shard, of tasks no live
    worker serving the queue registered (bounded as :func:`_unrunnable` says);
    a (tenant, queue) with none is left out."""
    out: dict[tuple[str, str], int] = {}

    def shard_counts(shard: int) -> dict[tuple[str, str], int]:
        streams, _held = _ready_streams(broker.client, broker.keys, shard)
        return _unrunnable(broker.client, broker.keys, shard, streams, workers)

    for counts in per_shard(broker, range(broker.shards), shard_counts, "figures").values():
        for key, n in counts.items():
            out[key] = out.get(key, 0) + n
    return out


def queue_loads(broker: Core, workers: Sequence[WorkerInfo]) -> list[QueueLoad]:
    """One row per (shard, tenant, queue) that has anything in it, by tenant and queue."""
    client, keys = broker.client, broker.keys
    rows: list[QueueLoad] = []
    for shard in range(broker.shards):
        tenants = sorted(_s(t) for t in client.zrange(keys.tenants(shard), 0, -1))
        counts: Counts = {}
        streams, held_counts = _ready_streams(client, keys, shard)
        for (t, q, _key, ready, _start), held in zip(streams, held_counts, strict=True):
            if ready or held:
                _add(counts, t, q, 0, ready)
                _add(counts, t, q, 1, held)
        for (tenant, queue), n in Inspection(broker).delayed_counts(shard, SCAN_LIMIT).items():
            _add(counts, tenant, queue, 2, n)
        pipe = client.pipeline(transaction=False)
        for t in tenants:
            pipe.xrange(keys.dlq(shard, t), count=SCAN_LIMIT)
        dead: list[Any] = pipe.execute() if tenants else []
        for t, entries in zip(tenants, dead, strict=True):
            for _eid, fields in entries:
                _add(counts, t, _s(fields.get(b"queue", b"")), 3, 1)
        stuck = _unrunnable(client, keys, shard, streams, workers)
        for (t, q), (ready, in_flight, delayed, dlq) in sorted(counts.items()):
            rows.append(
                QueueLoad(
                    tenant=t,
                    queue=q,
                    shard=shard,
                    ready=ready,
                    in_flight=in_flight,
                    delayed=delayed,
                    dlq=dlq,
                    served=any(serves(w, t, q) for w in workers),
                    unrunnable=stuck.get((t, q), 0),
                )
            )
    return sorted(rows, key=lambda r: (r.tenant, r.queue, r.shard))


@dataclass(frozen=True, slots=True)
class Running:
    """A leased task instance, as the Workers page lists it under its worker."""

    id: str
    name: str
    tenant: str
    state: str


def running_by_worker(
    broker: Core, workers: Sequence[WorkerInfo], tenant: str | None = None
) -> dict[str, list[Running]]:
    """Worker id -> the instances it holds, for ``workers`` (a page of them): the
    ids each published at its last heartbeat (``WorkerInfo.leased``), kept while
    the instance's hash still holds that worker's lease; of ``tenant`` only when
    given.  One round trip, whatever the number of tenants and leases."""
    client, keys = broker.client, broker.keys
    pairs = [(w.id, iid) for w in workers for iid in w.leased]
    if not pairs:
        return {}
    pipe = client.pipeline(transaction=False)
    for _wid, iid in pairs:
        pipe.hmget(keys.ti(shard_of_id(iid), iid), ["worker", "name", "state", "tenant", "loc"])
    out: dict[str, list[Running]] = {}
    for (wid, iid), (worker, name, state, owner, loc) in zip(pairs, pipe.execute(), strict=True):
        if worker is None or _s(worker) != wid or _s(loc or b"") != "lease":
            continue  # ended, or leased again to another worker since
        if tenant is not None and _s(owner or b"") != tenant:
            continue
        out.setdefault(wid, []).append(Running(iid, _s(name or b""), _s(owner or b""), _s(state)))
    return out
