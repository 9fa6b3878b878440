"""Every protocol call on a few tenants' shards, then a look at every key written:
each carries its shard's hash tag, so it lies in the shard's one slot.  Run on
one server (``tests/lua/test_scripts.py``) and on a real cluster
(``tests/cluster``), where Redis itself also refuses a script that touches a
key of another slot than its KEYS, and redis-py a call whose KEYS span slots.
"""

from __future__ import annotations

import re
from typing import Any

from redis.crc import key_slot

from redcron.clock import ulid
from redcron.engine import Broker, FailItem
from redcron.engine.argv import EnqueueRow
from redcron.keys import shard_of

T0 = 1_700_000_000_000
TENANTS = ("acme", "globex", "initech", "umbrella", "hooli")
#: the kinds of key the calls below must have written
KINDS = {"ti", "q", "ring", "tenants", "queues", "counters", "dlq", "log", "wake", "dedupe",
         "lock", "timers"}  # fmt: skip


def _row(iid: str, tenant: str, delay: int = 0) -> EnqueueRow:
    return EnqueueRow(
        iid=iid, name="t", kind="python", args=b"\x90", queue="default", tenant=tenant,
        priority="normal", timeout_ms=0, max_attempts=2, retry_base_ms=100,
        retry_cap_ms=1000, delay_ms=delay, result_ttl_s=3600,
    )  # fmt: skip


def exercise_every_shard_key(broker: Broker, scan_client: Any, prefix: str) -> set[int]:
    """Run the calls on :data:`TENANTS`; assert every key under ``prefix`` is in its
    shard's slot and the :data:`KINDS` were written.  Returns the shards used."""
    used_shards = set()
    for tenant in TENANTS:
        shard = shard_of(tenant, broker.shards)
        used_shards.add(shard)
        ids = [f"{shard}-{ulid()}" for _ in range(6)]
        rows = [_row(i, tenant) for i in ids[:5]] + [_row(ids[5], tenant, delay=50)]
        broker.enqueuer.enqueue(rows)
        leases = broker.leases.lease(shard, "w1", 4, 100, ["default"])
        assert len(leases) == 4
        a, b, c, _expired = leases
        broker.leases.start(shard, "w1", [(a.iid, a.epoch)])
        broker.leases.heartbeat(shard, "w1", 100, [(a.iid, a.epoch)])
        broker.leases.append_logs(shard, [(b.iid, b.attempt, ["line 1", "line 2"])])
        broker.leases.complete(shard, "w1", [(a.iid, a.epoch, b"\xc0")])
        broker.leases.fail(shard, "w1", [FailItem(b.iid, b.epoch, "failed", "boom", False)])
        broker.leases.release(shard, "w1", [(c.iid, c.epoch)])
        broker.maintenance.reap(shard, now=T0 * 2)  # d's lease expired
        broker.maintenance.promote(shard, now=T0 * 2)
        broker.cancel(ids[4])
        broker.inspection.watch(ids[5])
        broker.leases.once(shard, tenant, f"{ids[0]}:email", 60)
        broker.maintenance.try_lock(shard, "w1", 1.0)
        broker.dlq.replay([b.iid])
    assert len(used_shards) > 1
    found = sorted(k.decode() for k in scan_client.scan_iter(match=f"{prefix}:*", count=1000))
    assert f"{prefix}:{{g}}:meta" in found  # the deployment-wide slot (layout 5)
    kinds = set()
    for key in found:
        if key.startswith(f"{prefix}:{{g}}:"):
            continue
        m = re.match(re.escape(prefix) + r":\{s(\d+)\}:([a-z]+)", key)
        assert m, key
        kinds.add(m.group(2))
        assert key_slot(key.encode()) == key_slot(broker.keys.shard(int(m.group(1))).encode())
    assert kinds >= KINDS
    return used_shards
