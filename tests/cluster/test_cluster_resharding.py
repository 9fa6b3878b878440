"""A resharding under load: one shard's slot moved to another master while tasks
are enqueued and a worker leases and completes them.  The client follows
``MOVED``/``ASK``; a multi-key call that meets ``TRYAGAIN`` while a slot's keys
are split between two nodes is retried past redis-py's own ~0.4 s."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.cluster
from test_cluster import tenants_on_every_shard  # tests/cluster
from worker_procs import thread_workers, wait_for

from redcron import App
from redcron.embedded_cluster import EmbeddedCluster
from redcron.keys import shard_of

#: the shard moved here, and a tenant of another shard whose calls share pipelines with it
SHARD, OTHER = 3, 8


@pytest.fixture
def restore_slots(redis_cluster: EmbeddedCluster) -> Iterator[Callable[[int], None]]:
    """Each slot a test moves goes back to its master after (the session's cluster)."""
    owners: dict[int, int] = {}

    def remember(slot: int) -> None:
        owners.setdefault(slot, redis_cluster.owner(slot))

    yield remember
    for slot, port in owners.items():
        redis_cluster.move_slot(slot, port)


def another_master(cluster: EmbeddedCluster, port: int) -> int:
    return next(p for p in cluster.ports if p != port)


def test_a_shard_moved_to_another_master_while_work_flows(
    capp: App,
    redis_cluster: EmbeddedCluster,
    restore_slots: Callable[[int], None],
) -> None:
    tenants = tenants_on_every_shard()
    tenant, other = tenants[SHARD], tenants[OTHER]
    assert shard_of(tenant, capp.broker.shards) == SHARD
    tag_key = capp.broker.keys.shard(SHARD)
    slot = int(capp.broker.client.execute_command("CLUSTER KEYSLOT", tag_key))
    restore_slots(slot)
    source = redis_cluster.owner(slot)
    target = another_master(redis_cluster, source)

    handles: list[Any] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def produce() -> None:
        i = 0
        try:
            while not stop.is_set():
                handles.append(capp.enqueue("echo", i, _tenant=tenant))  # one script call
                # one pipeline over two shards (admission, then writes: 2 keys a call)
                rows = [capp._row("echo", "python", [[f"{t}-{i}"], {}], capp.tasks["echo"].options,
                                  {"_tenant": t}) for t in (tenant, other)]  # fmt: skip
                capp.broker.enqueuer.enqueue(rows)
                handles.extend(capp.get(r.iid) for r in rows)
                i += 1
                time.sleep(0.005)
        except BaseException as exc:
            errors.append(exc)

    with thread_workers(capp, "reshard-worker") as start:
        start(concurrency=4)
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        try:
            wait_for(lambda: len(handles) > 30, "work flowing before the move")
            # the move, with the slot held between its keys' move and SETSLOT NODE
            # (ASK from the source, TRYAGAIN for multi-key calls) for a while
            moved = redis_cluster.move_slot(slot, target, batch=10, hold=lambda: time.sleep(1.0))
            count = len(handles)
            wait_for(lambda: len(handles) > count + 30, "work flowing after the move")
        finally:
            stop.set()
            producer.join(10)
        assert errors == []
        for h in handles:
            info = wait_for(lambda h=h: (i := h.info()).state == "succeeded" and i, h.id, 30)
            assert [a.outcome for a in info.attempts] == ["succeeded"]  # exactly once
    assert moved > 0  # the shard had keys, and they moved with their tag
    assert redis_cluster.owner(slot) == target
    # the client followed MOVED: its slot map has the shard on its new master
    assert capp.broker.client.get_node_from_key(tag_key).port == target  # type: ignore[attr-defined]


def _split(cluster: EmbeddedCluster, slot: int, source: int, target: int, key: str) -> None:
    """Leave ``slot`` half moved: IMPORTING/MIGRATING, only ``key`` on the target."""
    with redis.Redis(port=target) as t, redis.Redis(port=source) as s:
        t.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", cluster.node_id(source))
        s.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", cluster.node_id(target))
        s.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", key)


@pytest.mark.parametrize("via", ["client", "pipeline"])
def test_tryagain_while_a_slots_keys_are_split_is_retried_past_redis_py(
    via: str,
    capp: App,
    cprefix: str,
    redis_cluster: EmbeddedCluster,
    rc: redis.cluster.RedisCluster,
    restore_slots: Callable[[int], None],
) -> None:
    a, b = f"{cprefix}:{{split}}:a", f"{cprefix}:{{split}}:b"
    rc.set(a, "1")
    rc.set(b, "2")
    slot = int(rc.keyslot(a))
    restore_slots(slot)
    source = redis_cluster.owner(slot)
    target = another_master(redis_cluster, source)
    _split(redis_cluster, slot, source, target, a)
    # redis-py alone: 16 tries in ~0.4 s, then gives up
    with pytest.raises(redis.exceptions.ClusterError, match="TTL exhausted"):
        rc.execute_command("MGET", a, b)

    def finish() -> None:  # the rest of the move, a while later
        with redis.Redis(port=source) as s:
            s.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", b)
        for port in (
            target,
            source,
            *[p for p in redis_cluster.ports if p not in (source, target)],
        ):
            with redis.Redis(port=port) as c:
                c.execute_command("CLUSTER SETSLOT", slot, "NODE", redis_cluster.node_id(target))

    timer = threading.Timer(1.0, finish)
    timer.start()
    try:
        client = capp.broker.client
        if via == "client":
            got = client.execute_command("MGET", a, b)
        else:
            pipe = client.pipeline(transaction=False)
            pipe.execute_command("MGET", a, b)
            (got,) = pipe.execute()
        assert got == [b"1", b"2"]
    finally:
        timer.join()
