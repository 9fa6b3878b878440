"""``inspect`` per queue: ready / in flight / delayed / DLQ of each (tenant,
queue), and whether any live worker serves it (from the worker registry).

Counts come from the ready streams (length less pending entries: ready;
pending entries: in flight), the timer set (delayed) and the DLQ streams.
Delayed and DLQ are read entry by entry (their entries name the queue), up to
``SCAN_LIMIT`` per shard and per tenant: past that, the counts are a floor
(the per-tenant totals of ``Broker.inspect`` stay exact).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redcron.keys import GROUP, PRIORITIES, shard_of
from redcron.model import QueueLoad, WorkerInfo
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.broker import Broker

#: timers per shard and DLQ entries per tenant read to split counts by queue
SCAN_LIMIT = 10_000
#: leases read per tenant to list what each worker is running
RUNNING_LIMIT = 1_000


def serves(worker: WorkerInfo, tenant: str, queue: str) -> bool:
    """Does ``worker`` lease ``tenant``'s work from ``queue``?"""
    return queue in worker.queues and (not worker.tenants or tenant in worker.tenants)


Counts = dict[tuple[str, str], list[int]]


def _add(counts: Counts, tenant: str, queue: str, column: int, n: int) -> None:
    counts.setdefault((tenant, queue), [0, 0, 0, 0])[column] += n


def queue_loads(broker: Broker, workers: Sequence[WorkerInfo]) -> list[QueueLoad]:
    """One row per (shard, tenant, queue) that has anything in it, by tenant and queue."""
    client, keys = broker.client, broker.keys
    rows: list[QueueLoad] = []
    for shard in range(broker.shards):
        tenants = sorted(_s(t) for t in client.smembers(keys.tenants(shard)))
        queues = sorted(_s(q) for q in client.smembers(keys.queues(shard)))
        counts: Counts = {}

        streams = [
            (t, q, keys.q(shard, q, t, p)) for t in tenants for q in queues for p in PRIORITIES
        ]
        pipe = client.pipeline(transaction=False)
        for _t, _q, key in streams:
            pipe.xlen(key)
            pipe.xpending(key, GROUP)
        replies = iter(pipe.execute(raise_on_error=False))
        for t, q, _key in streams:
            length, pending = next(replies), next(replies)
            # a stream never created has no group: XPENDING errors, nothing is there
            held = 0 if isinstance(pending, Exception) else int(pending["pending"])
            if length or held:
                _add(counts, t, q, 0, int(length) - held)
                _add(counts, t, q, 1, held)
        for (tenant, queue), n in broker.delayed_counts(shard, SCAN_LIMIT).items():
            _add(counts, tenant, queue, 2, n)
        pipe = client.pipeline(transaction=False)
        for t in tenants:
            pipe.xrange(keys.dlq(shard, t), count=SCAN_LIMIT)
        dead: list[Any] = pipe.execute() if tenants else []
        for t, entries in zip(tenants, dead, strict=True):
            for _eid, fields in entries:
                _add(counts, t, _s(fields.get(b"queue", b"")), 3, 1)
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
    broker: Broker, tenant: str | None = None, limit: int = RUNNING_LIMIT
) -> dict[str, list[Running]]:
    """Worker id -> the instances it holds a valid lease on (from each tenant's
    lease set; at most ``limit`` per tenant).  Two round trips per shard."""
    client, keys = broker.client, broker.keys
    shards = [shard_of(tenant, broker.shards)] if tenant else list(range(broker.shards))
    out: dict[str, list[Running]] = {}
    for shard in shards:
        if tenant:
            tenants = [tenant]
        else:
            tenants = sorted(_s(t) for t in client.smembers(keys.tenants(shard)))
        pipe = client.pipeline(transaction=False)
        for t in tenants:
            pipe.zrange(keys.tleases(shard, t), 0, limit - 1)
        leased = [
            (t, _s(iid)) for t, ids in zip(tenants, pipe.execute(), strict=True) for iid in ids
        ]
        if not leased:
            continue
        pipe = client.pipeline(transaction=False)
        for _t, iid in leased:
            pipe.hmget(keys.ti(shard, iid), ["worker", "name", "state"])
        for (t, iid), (worker, name, state) in zip(leased, pipe.execute(), strict=True):
            if worker:
                out.setdefault(_s(worker), []).append(
                    Running(iid, _s(name or b""), t, _s(state or b""))
                )
    return out
