"""The listing indexes' backfill: a deployment made before them gets them once.

The indexes (``tenants``, ``jobidx``, ``dlqidx``, ``runidx``, ``truns:<tenant>``;
``docs/keys.md``) are kept by the scripts that write what they list; the
listings of :mod:`redcron.store.listing` and the DLQ's pages
(:mod:`redcron.engine.dlq`) read them.  A shard older than them is backfilled
once (the first read after an upgrade pays one pass over the tenants and their
jobs' run histories, then records ``index_version`` in the shard's
``maintenance`` HASH); each Broker checks that once, not per read.  ``jobidx``
itself needs no backfill: since layout 4 it is the jobs' upsert key, which the
key-layout upgrade (``engine/upgrade.py``) builds from the retired
``jobs:<tenant>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from redcron.engine.core import Core
from redcron.engine.partial import read_shards
from redcron.keys import MAINT_INDEX_VERSION, RUNIDX_MAX, TRUNS_MAX, jobidx_parse
from redcron.serde import text as _s

#: the version of the listing indexes a shard was backfilled to ("2" added
#: ``dlqidx``: a shard at "1" backfills only that)
INDEX_VERSION = "2"


def ensure_indexes(broker: Core) -> None:
    """Backfill the listing indexes of every shard whose ``maintenance`` HASH
    does not hold this ``index_version`` (a
    deployment older than them); once per Broker, then free."""
    if broker.listing_indexed:
        return
    client, keys = broker.client, broker.keys
    versions = read_shards(
        broker,
        range(broker.shards),
        lambda pipe, shard: pipe.hget(keys.maintenance(shard), MAINT_INDEX_VERSION),
    )
    for shard, (raw,) in sorted(versions.items()):
        version = _s(raw or b"")
        if version == INDEX_VERSION:
            continue
        tenants = [_s(t) for t in client.zrange(keys.tenants(shard), 0, -1)]
        _backfill_dlq(broker, shard, tenants)
        if version == "1":
            client.hset(keys.maintenance(shard), MAINT_INDEX_VERSION, INDEX_VERSION)
            continue
        members = client.zrange(keys.jobidx(shard), 0, -1)
        _backfill_runs(broker, shard, [j[2] for m in members if (j := jobidx_parse(_s(m)))])
        client.hset(keys.maintenance(shard), MAINT_INDEX_VERSION, INDEX_VERSION)
    # a shard left out (partial_reads: its master down) is looked at next time
    broker.listing_indexed = len(versions) == broker.shards


def _backfill_dlq(broker: Core, shard: int, tenants: Sequence[str]) -> None:
    """``dlqidx``: every tenant whose DLQ stream has entries."""
    client, keys = broker.client, broker.keys
    pipe = client.pipeline(transaction=False)
    for t in tenants:
        pipe.xlen(keys.dlq(shard, t))
    dead = [t for t, n in zip(tenants, pipe.execute() if tenants else [], strict=True) if n]
    if dead:
        client.zadd(keys.dlqidx(shard), dict.fromkeys(dead, 0))


def _backfill_runs(broker: Core, shard: int, job_ids: Sequence[str]) -> None:
    client, keys = broker.client, broker.keys
    pipe = client.pipeline(transaction=False)
    for jid in job_ids:
        pipe.zrevrange(keys.runs(shard, jid), 0, TRUNS_MAX - 1)
    run_ids = [_s(r) for ids in (pipe.execute() if job_ids else []) for r in ids]
    for start in range(0, len(run_ids), 1000):
        chunk = run_ids[start : start + 1000]
        pipe = client.pipeline(transaction=False)
        for rid in chunk:
            pipe.hmget(keys.run(shard, rid), ["tenant", "created"])
        pipe2 = client.pipeline(transaction=False)
        for rid, (tenant, created) in zip(chunk, pipe.execute(), strict=True):
            if tenant is None or created is None:
                continue
            pipe2.zadd(keys.runidx(shard), {rid: int(created)})
            pipe2.zadd(keys.truns(shard, _s(tenant)), {rid: int(created)})
        pipe2.execute()
    pipe = client.pipeline(transaction=False)
    pipe.zremrangebyrank(keys.runidx(shard), 0, -(RUNIDX_MAX + 1))
    pipe.execute()
