"""Unique windows and debounce on a real 3-master Redis Cluster: the keys lie in
their tenant's shard slot (the script's one slot), on every shard."""

from __future__ import annotations

import redis.cluster
from redis.crc import key_slot

from conftest import SHARDS  # tests/cluster/conftest.py
from redcron import App
from redcron.keys import shard_of


def test_unique_and_debounce_keys_work_on_every_shard(
    capp: App, rc: redis.cluster.RedisCluster
) -> None:
    @capp.task(name="c.once", unique_for=600)
    def once(n: int) -> None: ...

    @capp.task(name="c.settle", debounce=600)
    def settle(n: int) -> None: ...

    by_shard: dict[int, str] = {}
    i = 0
    while len(by_shard) < SHARDS:
        by_shard.setdefault(shard_of(f"t{i}", SHARDS), f"t{i}")
        i += 1
    for shard, tenant in by_shard.items():
        first = once.enqueue(1, _tenant=tenant)
        assert once.enqueue(1, _tenant=tenant).id == first.id
        d = settle.enqueue(1, _tenant=tenant)
        again = settle.enqueue(2, _tenant=tenant)
        assert again.duplicate and again.id == d.id and d.info().decoded_args() == [[2], {}]
        slot = key_slot(capp.broker.keys.shard(shard).encode())
        mine = [
            k
            for mode in ("unique", "debounce")
            for k in rc.scan_iter(
                match=f"{capp.settings.prefix}:{{s{shard}}}:dedupe:{tenant}:{mode}:*"
            )
        ]
        assert len(mine) == 2 and {key_slot(k) for k in mine} == {slot}
