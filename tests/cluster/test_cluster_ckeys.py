"""Concurrency keys on a real 3-master Redis Cluster: on every shard the lease
script holds a key to its cap, the waiter is woken when the slot frees, and the
key's slots and waiting list lie in the tenant's shard slot (the script's one
slot)."""

from __future__ import annotations

import redis.cluster
from redis.crc import key_slot
from test_cluster import tenants_on_every_shard  # tests/cluster

from redcron import App


def test_a_key_is_held_to_its_cap_on_every_shard(capp: App, rc: redis.cluster.RedisCluster) -> None:
    @capp.task(name="c.sync", concurrency_key="customer", max_concurrent=1)
    def sync(customer: str) -> None: ...

    leases, keys = capp.broker.leases, capp.broker.keys
    for shard, tenant in enumerate(tenants_on_every_shard()):
        first = sync.enqueue("42", _tenant=tenant)
        second = sync.enqueue("42", _tenant=tenant)
        other = sync.enqueue("7", _tenant=tenant)
        got = leases.lease(shard, "w1", 10, 60_000, ["default"])
        assert {x.iid for x in got} == {first.id, other.id}, shard  # "42" at its cap of 1
        assert second.info().state == "waiting"
        slots, queue = (
            keys.ckslots(shard, tenant, "c.sync", "42"),
            keys.ckwaiting(shard, tenant, "c.sync", "42"),
        )
        assert {key_slot(k.encode()) for k in (slots, queue)} == {
            key_slot(keys.shard(shard).encode())
        }
        held = next(x for x in got if x.iid == first.id)
        assert leases.complete(shard, "w1", [(held.iid, held.epoch, b"\xc0")]) == [True]
        (woken,) = leases.lease(shard, "w1", 10, 60_000, ["default"])
        assert woken.iid == second.id  # the freed slot went to the waiter
        assert rc.zcard(slots) == 1 and rc.llen(queue) == 0
