"""A master of the cluster down: a process still starts, a worker goes on serving
the other masters' shards, a beat goes on firing them; once the master is back,
its shards' work resumes.  Each test kills the master that holds the key it is
about (the meta key, the workers registry, the live-beats registry), on a
cluster of its own (the session one is shared by the other tests).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import chaos_app  # tests/apps
import pytest
from beats import runs_of, tick_until  # tests/helpers
from redis_binary import redis_server_path
from worker_procs import thread_workers

from redcron import App
from redcron.beat.beat import Beat
from redcron.chaos.outage import master_of_slot, shard_masters, spread_tenants
from redcron.embedded_cluster import EmbeddedCluster
from redcron.engine import TRANSIENT, key_slot
from redcron.errors import RedisUnavailable
from redcron.keys import Keys, shard_of
from redcron.model.jobs import Task
from redcron.worker import Worker

SHARDS = 12
MASTERS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(
        Path(tmp_path_factory.mktemp("master-down")),
        masters=MASTERS,
        binary=redis_server_path(),
        appendonly=True,
        fsync="always",
    )
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def down(cluster: EmbeddedCluster) -> Iterator[Callable[[int], None]]:
    """Kill a master; it is started again after the test if it is still down."""
    killed: list[int] = []

    def kill(master: int) -> None:
        cluster.kill_master(master)
        killed.append(master)

    yield kill
    # together: a master's start waits until the whole cluster is up again
    starts = [threading.Thread(target=cluster.start_master, args=(m,)) for m in killed]
    for t in starts:
        t.start()
    for t in starts:
        t.join(60)


@pytest.fixture
def mapp(cluster: EmbeddedCluster) -> Iterator[App]:
    a = App(cluster.url, prefix=f"m{uuid.uuid4().hex[:8]}", shards=SHARDS, min_lease_ttl=0.5)
    chaos_app.register(a)
    assert a.broker.shards == SHARDS  # the deployment exists before any master dies
    yield a
    a.close()


def master_of(key: str) -> int:
    return master_of_slot(key_slot(key), MASTERS)


def tenants(app: App) -> list[str]:
    """Tenant ``i`` lives on a shard of master ``i``."""
    return list(spread_tenants(("ta", "tb", "tc"), SHARDS, MASTERS, app.settings.prefix))


def test_a_process_starts_while_a_master_is_down(
    mapp: App, cluster: EmbeddedCluster, down: Callable[[int], None]
) -> None:
    # the meta key's master answers; another one is down: CONFIG GET on every
    # master (the eviction-policy check) used to raise, so nothing could start
    dead = (master_of(Keys(mapp.settings.prefix).meta()) + 1) % MASTERS
    down(dead)
    late = App(cluster.url, prefix=mapp.settings.prefix)
    try:
        assert late.broker.shards == SHARDS
    finally:
        late.close()


def test_a_worker_serves_the_other_masters_shards_and_resumes_the_dead_ones(
    mapp: App, cluster: EmbeddedCluster, down: Callable[[int], None]
) -> None:
    names = tenants(mapp)
    # the master of the workers registry: its heartbeat/registration fails too
    dead = master_of(Keys(mapp.settings.prefix).workers())
    stranded = [mapp.enqueue("echo", i, _tenant=names[dead]) for i in range(5)]
    down(dead)
    live = [
        mapp.enqueue("echo", i, _tenant=t)
        for i in range(10)
        for m, t in enumerate(names)
        if m != dead
    ]
    with thread_workers(mapp, "master-down-worker") as start:
        worker: Worker = start(concurrency=4, lease_ttl=2.0)
        # the live masters' tasks end while the dead master's shards are failing
        assert sorted(h.result(timeout=30) for h in live) == sorted(
            i for i in range(10) for _ in range(MASTERS - 1)
        )
        assert worker.processed >= len(live)
        cluster.start_master(dead)
        assert [h.result(timeout=30) for h in stranded] == list(range(5))


def test_a_beat_fires_the_other_masters_shards_and_resumes_the_dead_ones(
    mapp: App, cluster: EmbeddedCluster, down: Callable[[int], None]
) -> None:
    names = tenants(mapp)
    where = shard_masters(SHARDS, MASTERS, mapp.settings.prefix)
    jobs = [
        mapp.jobs.put(
            f"j{m}", tenant=t, tasks={"t": Task("noop")}, every="1s", allow_unregistered=True
        )
        for m, t in enumerate(names)
    ]
    assert [where[j.shard] for j in jobs] == [0, 1, 2]
    beat = Beat(mapp, name="b", shard_ttl=1.0)
    try:
        tick_until(beat, lambda: all(runs_of(mapp, j.id) for j in jobs), "every job once")
        # the master of the live-beats registry: register and the shard leases'
        # pipeline over every master failed, and with them every shard's fires
        dead = master_of(Keys(mapp.settings.prefix).beats())
        before = {j.id: len(runs_of(mapp, j.id)) for j in jobs if where[j.shard] != dead}
        down(dead)
        tick_until(
            beat,
            lambda: all(len(runs_of(mapp, jid)) >= n + 2 for jid, n in before.items()),
            "two more fires of every job on a live master",
        )
        gone = next(j for j in jobs if where[j.shard] == dead)
        cluster.start_master(dead)
        ran = len(runs_of(mapp, gone.id))
        tick_until(beat, lambda: len(runs_of(mapp, gone.id)) > ran, "the dead master's job")
    finally:
        beat.close()


def test_an_idle_beat_reads_the_next_due_fire_on_a_cluster(mapp: App) -> None:
    # a cluster pipeline refuses TIME: every idle `redcron beat` on a cluster
    # died of RedisClusterException at its first idle tick
    job = mapp.jobs.put(
        "soon", tenant="ta", tasks={"t": Task("noop")}, every="1h", allow_unregistered=True
    )
    store = Beat(mapp, name="idle").engine
    now, heads = store.next_due(list(range(SHARDS)))
    assert abs(now - mapp.broker.server_ms()) < 60_000
    assert heads[job.shard] is not None and heads[job.shard] > now
    assert sum(h is not None for h in heads) == 1


def test_a_new_process_runs_scripts_on_the_live_masters_while_one_is_down(
    mapp: App, cluster: EmbeddedCluster, down: Callable[[int], None]
) -> None:
    # SCRIPT LOAD / SCRIPT EXISTS go to every master at once in redis-py: a
    # process whose scripts were not yet loaded could run none while one is down
    names = tenants(mapp)
    # not the meta key's master: a process that starts needs that one
    dead = (master_of(Keys(mapp.settings.prefix).meta()) + 1) % MASTERS
    live = [t for m, t in enumerate(names) if m != dead]
    for node in mapp.broker.client.get_primaries():  # type: ignore[attr-defined]
        mapp.broker.client.execute_command("SCRIPT FLUSH", target_nodes=node)
    down(dead)
    fresh = App(cluster.url, prefix=mapp.settings.prefix)
    chaos_app.register(fresh)
    try:
        handles = [fresh.enqueue("echo", 1, _tenant=t) for t in live]  # ordered pipeline
        assert all(h.id for h in handles)
        leased = fresh.broker.leases.lease(  # a script call on its own
            shard_of(live[0], SHARDS), "w-fresh", 10, 2000, ["default"]
        )
        assert leased
    finally:
        fresh.close()


def test_pipelines_go_on_when_the_clients_default_node_is_the_dead_master(
    mapp: App, cluster: EmbeddedCluster, down: Callable[[int], None]
) -> None:
    # redis-py asked the default node for the keys of each pipelined script call
    # (COMMAND GETKEYS): with it down, every pipeline failed, whatever its slots
    dead = 1
    client: Any = mapp.broker.client
    client.set_default_node(client.get_node("127.0.0.1", cluster.ports[dead]))
    down(dead)
    where = shard_masters(SHARDS, MASTERS, mapp.settings.prefix)
    live = [s for s, m in where.items() if m != dead]
    store = Beat(mapp, name="x").engine
    claims = store.beat_own(live, "x", 1000, "acquire")  # one pipeline over the live masters
    assert [c.shard for c in claims if c.owned] == live


def test_every_master_down_is_redis_unavailable_which_the_loops_retry(
    mapp: App, down: Callable[[int], None]
) -> None:
    # redis-py re-reads the slot map after a ConnectionError; with no node
    # answering it raised RedisClusterException (no RedisError: not retried),
    # and a worker's or a beat's loop died of it
    for m in range(MASTERS):
        down(m)
    client = mapp.broker.client
    calls: list[Callable[[], object]] = [
        lambda: client.get(Keys(mapp.settings.prefix).ti(1, "x")),
        mapp.broker.server_ms,
        lambda: client.pipeline(transaction=False).get("a").get("b").execute(),
    ]
    for call in calls:
        with pytest.raises(RedisUnavailable) as caught:
            call()
        assert isinstance(caught.value, TRANSIENT)
