"""``durability="strict"`` on a Redis Cluster with a replica per master: each
acknowledged write is confirmed by its own master's replica (one ``WAIT`` per
master written to, on the connection that wrote), asking for more replicas than
there are fails as on one server, and a master's failover to its replica keeps
every acknowledged write and lets its shards' work resume.

The cluster here (3 masters, 1 replica each) is this module's own, so the other
cluster tests keep their plain 3-master one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import chaos_app  # tests/apps
import pytest
import redis
from redis_binary import redis_server_path  # tests/helpers
from worker_procs import thread_workers, wait_for

from conftest import SHARDS  # tests/cluster/conftest.py
from redcron import App, NotReplicated
from redcron.embedded_cluster import EmbeddedCluster
from redcron.errors import RedisUnavailable
from redcron.keys import shard_of


@pytest.fixture(scope="module")
def replica_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    cluster = EmbeddedCluster(
        tmp_path_factory.mktemp("replicas"), binary=redis_server_path(), replicas=1
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def strict(replica_cluster: EmbeddedCluster) -> Iterator[App]:
    a = App(
        replica_cluster.url,
        prefix=f"c{uuid.uuid4().hex[:8]}",
        shards=SHARDS,
        min_lease_ttl=0.5,
        durability="strict",
        durability_replicas=1,
        durability_timeout=2.0,
    )
    chaos_app.register(a)
    yield a
    a.close()


def tenant_per_shard() -> list[str]:
    by_shard: dict[int, str] = {}
    i = 0
    while len(by_shard) < SHARDS:
        by_shard.setdefault(shard_of(f"t{i}", SHARDS), f"t{i}")
        i += 1
    return [by_shard[s] for s in range(SHARDS)]


def on_replica(cluster: EmbeddedCluster, port: int, key: str) -> bool:
    """Whether the replica on ``port`` holds ``key`` (READONLY: a replica answers reads)."""
    with redis.Redis(port=port) as r:
        r.execute_command("READONLY")
        return bool(r.exists(key))


def test_replicas_follow_their_masters_and_are_in_sync(replica_cluster: EmbeddedCluster) -> None:
    for i, master in enumerate(replica_cluster.ports):
        (replica,) = replica_cluster.replicas_of(i)
        with redis.Redis(port=replica) as r:
            info = r.info("replication")
        assert (info["role"], info["master_port"], info["master_link_status"]) == (
            "slave", master, "up"
        )  # fmt: skip


def test_strict_writes_on_every_master_are_confirmed_by_its_replica(
    strict: App, replica_cluster: EmbeddedCluster
) -> None:
    tenants = tenant_per_shard()
    one = strict.enqueue("echo", "one", _tenant=tenants[0])  # a single call: EVALSHA + WAIT
    # a batch over every shard, so every master: one WAIT per master in the pipeline
    many = strict.tasks["echo"].enqueue_many([(t,) for t in tenants], _tenant=tenants[1])
    spread = [strict.enqueue("echo", t, _tenant=t) for t in tenants]
    keys = strict.broker.keys
    for h in [one, *many, *spread]:
        shard = int(h.id.partition("-")[0])
        key = keys.ti(shard, h.id)
        master = strict.broker.client.get_node_from_key(key)  # type: ignore[attr-defined]
        (replica,) = replica_cluster.replicas_of(replica_cluster.ports.index(master.port))
        assert on_replica(replica_cluster, replica, key)  # WAIT returned: it is there
    with thread_workers(strict, "strict-worker") as start:
        start(concurrency=4)  # completions are acknowledged writes: they wait too
        assert [h.result(timeout=30) for h in spread] == tenants
        assert one.result(timeout=30) == "one"


def test_strict_asking_more_replicas_than_there_are_raises_not_replicated(
    replica_cluster: EmbeddedCluster,
) -> None:
    a = App(
        replica_cluster.url,
        prefix=f"c{uuid.uuid4().hex[:8]}",
        shards=SHARDS,
        durability="strict",
        durability_replicas=2,
        durability_timeout=0.1,
    )
    chaos_app.register(a)
    try:
        with pytest.raises(NotReplicated, match="1 of the 2 replicas asked for confirmed it") as e:
            a.enqueue("echo", 1, _tenant="t0")
        assert e.value.task_ids is not None and a.get(e.value.task_ids[0]).state == "ready"
        with pytest.raises(NotReplicated):
            a.tasks["echo"].enqueue_many([(t,) for t in tenant_per_shard()])
    finally:
        a.close()


def test_a_failover_keeps_acknowledged_strict_writes_and_work_resumes(
    strict: App, replica_cluster: EmbeddedCluster
) -> None:
    """Last in the module: master 0 is a replica of its old replica after it."""
    tenants = tenant_per_shard()
    keys = strict.broker.keys
    client = strict.broker.client
    on_first = [t for s, t in enumerate(tenants)  # the shards master 0 holds
                if client.get_node_from_key(keys.shard(s)).port == replica_cluster.ports[0]]  # type: ignore[attr-defined]  # fmt: skip
    assert on_first  # 12 shards over 3 masters: master 0 holds some
    # the worker has its own client (and slot map), as a worker process would
    wapp = App(replica_cluster.url, prefix=strict.settings.prefix, min_lease_ttl=0.5,
               durability="strict", durability_timeout=2.0)  # fmt: skip
    chaos_app.register(wapp)
    try:
        acked = [strict.enqueue("echo", f"{t}-{i}", _tenant=t) for t in on_first for i in range(3)]
        with thread_workers(wapp, "failover-worker") as start:
            start(concurrency=4)
            # in flight when the master dies: leased, their reports due after it
            running = [strict.enqueue("slow", 1.0, _tenant=t) for t in on_first]
            wait_for(lambda: all(h.state == "running" for h in running), "the slow tasks to start")
            replica_cluster.kill_master(0)  # no time to lose anything that was not confirmed
            replica_cluster.promote_replica(0)
            try:
                # the promoted replica has no replica of its own yet: strict refuses
                # to confirm. The client's first call may still go to the dead master
                # (connection refused: nothing sent), and the calls in its shard
                # gate's delay fail at once (nothing sent either); it then reads the
                # slot map again, so a call after the delay reaches the promoted replica
                def unconfirmed() -> NotReplicated | None:
                    try:
                        strict.enqueue("echo", "unconfirmed", _tenant=on_first[0])
                    except RedisUnavailable:
                        return None
                    except NotReplicated as exc:
                        return exc
                    pytest.fail("a strict write without a replica was confirmed")

                refused = wait_for(unconfirmed, "the promoted replica to refuse to confirm")
                assert "0 of the 1 replicas" in str(refused)
            finally:
                replica_cluster.start_master(0)  # back, as the new master's replica, in sync
            after = [strict.enqueue("echo", f"{t}-after", _tenant=t) for t in on_first]
            assert [h.result(timeout=30) for h in acked] == [
                f"{t}-{i}" for t in on_first for i in range(3)
            ]
            assert [h.result(timeout=30) for h in after] == [f"{t}-after" for t in on_first]
            # the in-flight ones finish too (again if their lease was reaped meanwhile)
            assert all(h.result(timeout=30).startswith("attempt-") for h in running)
    finally:
        wapp.close()
