"""redcron unchanged on a real 3-master Redis Cluster, 12 shards over the masters:
the protocol end to end with a real worker, the reaper, the beat on every shard,
a DAG run, DLQ replay, doctor, and the proof that each script call's keys lie
in one slot."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import chaos_app  # tests/apps
import pytest
import redis.cluster
from beats import runs_of, tick_until  # tests/helpers
from click.testing import CliRunner
from redis.crc import key_slot
from slot_check import exercise_every_shard_key
from worker_procs import thread_workers, wait_for

from conftest import SHARDS  # tests/cluster/conftest.py
from redcron import App, NotReplicated, TaskFailed
from redcron.beat.beat import Beat
from redcron.cli.main import main
from redcron.config import Settings
from redcron.engine import Broker
from redcron.engine.connection import ClusterClient, is_cluster
from redcron.errors import ConfigError
from redcron.keys import shard_of
from redcron.model.jobs import Task
from redcron.worker import Worker


def tenants_on_every_shard(shards: int = SHARDS) -> list[str]:
    """One tenant name per shard."""
    by_shard: dict[int, str] = {}
    i = 0
    while len(by_shard) < shards:
        by_shard.setdefault(shard_of(f"t{i}", shards), f"t{i}")
        i += 1
    return [by_shard[s] for s in range(shards)]


@pytest.fixture
def start_worker(capp: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(capp, "cluster-worker") as start:
        yield start


def test_the_url_gives_a_cluster_client_and_shards_spread_over_the_masters(
    capp: App, rc: redis.cluster.RedisCluster
) -> None:
    client = capp.broker.client
    assert isinstance(client, ClusterClient) and is_cluster(client)
    assert capp.broker.shards == SHARDS
    masters = {rc.get_node_from_key(capp.broker.keys.shard(s)).name for s in range(SHARDS)}
    assert len(masters) == 3


def test_enqueue_lease_complete_on_every_shard(
    capp: App, start_worker: Callable[..., Worker]
) -> None:
    start_worker(concurrency=8)
    tenants = tenants_on_every_shard()
    handles = [capp.enqueue("echo", i, _tenant=t) for i, t in enumerate(tenants * 2)]
    assert {int(h.id.partition("-")[0]) for h in handles} == set(range(SHARDS))
    assert [h.result(timeout=30) for h in handles] == list(range(len(handles)))


def test_a_batch_over_every_shard_is_admitted_then_written(
    capp: App, start_worker: Callable[..., Worker]
) -> None:
    @capp.task(name="c.upper")
    def upper(x: str) -> str:
        return x.upper()

    tenants = tenants_on_every_shard()
    # one call whose rows span every shard (every master): admission on each, then writes
    rows = [
        capp._row("c.upper", "python", [[t], {}], upper.options, {"_tenant": t}) for t in tenants
    ]
    assert capp.broker.enqueuer.enqueue(rows) == SHARDS
    many = upper.enqueue_many([(f"{t}x",) for t in tenants], _tenant=tenants[3])
    start_worker(concurrency=8)
    assert [capp.get(r.iid).result(timeout=30) for r in rows] == [t.upper() for t in tenants]
    assert [h.result(timeout=30) for h in many] == [f"{t}x".upper() for t in tenants]


#: the idle wait the worker is given while a task is enqueued (its own is 1 s)
LONG_WAIT_S = 8.0


def test_an_idle_worker_wakes_for_work_on_any_shard(
    capp: App, start_worker: Callable[..., Worker], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each task is enqueued while the worker is blocked in an idle wait made
    LONG_WAIT_S long: that wait must end woken.  A wait that times out instead
    missed the wake-up, whatever the machine's load: the enqueue follows the
    wait's start by milliseconds, not 8 s.  (The worker's own 1 s wait could
    time out while an enqueue was on its way, which an earlier version of this
    test, judging waits by when they ended, counted as a miss: a flake under
    load.)"""
    leases = capp.broker.leases
    wait_for_work = leases.wait_for_work
    long = threading.Event()
    waiting = threading.Event()  # the worker is in a long wait
    long_waits: list[bool] = []  # woken, of each long wait

    def recorded(shards: Any, queues: Any, timeout_s: float, **kwargs: Any) -> bool:
        if not long.is_set():
            return wait_for_work(shards, queues, timeout_s, **kwargs)
        waiting.set()
        woken = wait_for_work(shards, queues, LONG_WAIT_S, **kwargs)
        waiting.clear()
        long_waits.append(woken)
        return woken

    monkeypatch.setattr(leases, "wait_for_work", recorded)
    start_worker(concurrency=2)
    try:
        long.set()
        for tenant in tenants_on_every_shard()[::5]:
            wait_for(waiting.is_set, "the worker to block in an idle wait", timeout=30)
            assert capp.enqueue("echo", tenant, _tenant=tenant).result(timeout=30) == tenant
            assert all(long_waits), f"{tenant}: a wait timed out with its wake-up in the list"
    finally:
        long.clear()
        capp.broker.client.lpush(capp.broker.keys.wake(0, "default"), 1)  # end the last one
    assert long_waits


def test_wait_for_work_sees_a_wake_up_on_any_shard_at_once(capp: App) -> None:
    leases, keys = capp.broker.leases, capp.broker.keys
    shards = list(range(SHARDS))
    t0 = time.monotonic()
    assert leases.wait_for_work(shards, ["default"], 0.5) is False  # nothing: the timeout
    assert 0.45 < time.monotonic() - t0 < 6.0  # its 0.5 s, loosely: a loaded machine
    for shard in (0, 5, 11):  # on each master in turn, wherever the BLPOP is
        timer = threading.Timer(0.3, capp.broker.client.lpush, (keys.wake(shard, "default"), 1))
        timer.start()
        t0 = time.monotonic()
        assert leases.wait_for_work(shards, ["default"], 10.0) is True
        assert time.monotonic() - t0 < 6.0  # a slice after the 0.3 s timer, not the 10 s timeout
        timer.join()
    # a caller that will not lease puts the token back for another worker
    capp.broker.client.lpush(keys.wake(7, "default"), 1)
    assert leases.wait_for_work(shards, ["default"], 1.0, pass_on=lambda: True) is True
    assert capp.broker.client.llen(keys.wake(7, "default")) == 1


def test_a_lost_lease_is_reaped_and_retried(capp: App) -> None:
    b = capp.broker
    tenant = tenants_on_every_shard()[7]
    h = capp.enqueue("echo", "again", _tenant=tenant, _retries=1)
    shard = int(h.id.partition("-")[0])
    (lease,) = b.leases.lease(shard, "w-gone", 1, 500, ["default"])  # then never heard from
    assert lease.iid == h.id
    with thread_workers(capp) as start:
        start(concurrency=2)
        assert h.result(timeout=30) == "again"
    attempts = [a.outcome for a in h.info().attempts]
    assert attempts[0] == "lost" and attempts[-1] == "succeeded"


def test_the_beat_fires_jobs_on_every_shard(capp: App) -> None:
    tenants = tenants_on_every_shard()
    # no worker here: noop is registered nowhere, the beat's fires are under test
    jobs = [capp.jobs.put(f"j{i}", tenant=t, tasks={"t": Task("noop")}, every="1s",
                          allow_unregistered=True)
            for i, t in enumerate(tenants)]  # fmt: skip
    assert {j.shard for j in jobs} == set(range(SHARDS))
    a = Beat(capp, name="a", shard_ttl=1.0)
    b = Beat(capp, name="b", shard_ttl=1.0)
    try:
        tick_until(
            [a, b], lambda: all(len(runs_of(capp, j.id)) >= 2 for j in jobs), "every job twice"
        )
        assert set(a.owned) | set(b.owned) == set(range(SHARDS))
    finally:
        a.close()
        b.close()


def test_a_dag_run_on_the_cluster(capp: App, start_worker: Callable[..., Worker]) -> None:
    tenant = tenants_on_every_shard()[5]
    capp.jobs.put(
        "etl",
        tasks={
            "extract": Task("echo", args=["e"]),
            "a": Task("echo", args=["a"], depends_on=["extract"]),
            "b": Task("echo", args=["b"], depends_on=["extract"]),
            "load": Task("echo", args=["l"], depends_on=["a", "b"]),
        },
        tenant=tenant,
    )
    start_worker(concurrency=4)
    rid = capp.jobs.trigger("etl", tenant=tenant)
    info = wait_for(
        lambda: (i := capp.jobs.run(rid)).state in ("succeeded", "failed") and i, "the run", 30
    )
    assert info.state == "succeeded"
    assert (info.total, info.succeeded) == (4, 4)


def test_dlq_replay_on_the_cluster(
    capp: App, start_worker: Callable[..., Worker], rc: redis.cluster.RedisCluster
) -> None:
    start_worker(concurrency=2)
    marker = chaos_app.rec_key(capp, "marker", "replay")
    h = capp.enqueue("needs_marker", marker, _tenant=tenants_on_every_shard()[10])
    with pytest.raises(TaskFailed):
        h.result(timeout=30)
    assert [e.task_id for e in capp.broker.dlq.list()] == [h.id]
    rc.set(marker, "1")
    assert capp.broker.dlq.replay([h.id]) == 1
    assert h.result(timeout=30) == "replayed"
    assert capp.broker.dlq.list() == []


def test_each_script_calls_keys_lie_in_one_slot(
    cluster_url: str, cprefix: str, rc: redis.cluster.RedisCluster
) -> None:
    broker = Broker(Settings(redis_url=cluster_url, prefix=cprefix, shards=SHARDS))
    try:
        used = exercise_every_shard_key(broker, rc, cprefix)
        nodes = {rc.get_node_from_key(broker.keys.shard(s)).name for s in used}
        assert len(nodes) > 1  # the calls really went to several masters
        assert len({key_slot(broker.keys.shard(s).encode()) for s in used}) == len(used)
    finally:
        broker.close()


def test_noscript_is_reloaded_on_every_master(
    capp: App, rc: redis.cluster.RedisCluster, start_worker: Callable[..., Worker]
) -> None:
    start_worker(concurrency=4)
    time.sleep(0.5)  # the worker's scripts are loaded: the flush takes them away
    rc.script_flush()  # every master
    tenants = tenants_on_every_shard()
    # one call (Script's own reload), then a pipeline over every shard (ours)
    assert capp.enqueue("echo", 0, _tenant=tenants[0]).result(timeout=20) == 0
    rc.script_flush()
    handles = [capp.enqueue("echo", i, _tenant=t) for i, t in enumerate(tenants)]
    assert [h.result(timeout=20) for h in handles] == list(range(SHARDS))


def test_doctor_on_the_cluster(
    capp: App, cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenants = tenants_on_every_shard()
    handles = [capp.enqueue("echo", t, _tenant=t) for t in tenants]
    monkeypatch.setenv("REDCRON_PREFIX", capp.settings.prefix)

    def doctor(*extra: str) -> tuple[int, dict[str, Any]]:
        res = CliRunner().invoke(main, ["doctor", "--json", "-q", *extra, "--redis", cluster_url])
        assert res.exit_code in (0, 1), (res.output, res.exc_info)
        return res.exit_code, json.loads(res.output)

    code, report = doctor()
    assert code == 0 and report["findings"] == []
    assert report["shards"] == SHARDS
    # every shard (on every master) was read: one ready instance per tenant recounted
    assert {(t["tenant"], t["ready"]) for t in report["tenants"]} == {(t, 1) for t in tenants}

    # a ready instance taken off its stream, as redis-cli could, on the last shard
    b, h = capp.broker, handles[-1]
    shard = SHARDS - 1
    loc = b.client.hget(b.keys.ti(shard, h.id), "loc").decode()
    b.client.xdel(b.keys.q(shard, "default", tenants[-1], "normal"), loc[2:])
    code, report = doctor()
    assert code == 1
    assert {(f["kind"], f["key"]) for f in report["findings"]} == {
        ("ready_not_in_stream", b.keys.ti(shard, h.id)),
        ("ring_member_idle", b.keys.ring(shard, "default", "normal")),  # its only work
    }
    code, report = doctor("--repair")
    assert code == 0, report
    with thread_workers(capp) as start:
        start(concurrency=4)
        assert [x.result(timeout=30) for x in handles] == tenants


def test_strict_durability_without_replicas_raises_not_replicated_as_on_one_server(
    cluster_url: str, cprefix: str
) -> None:
    """As tests/integration/test_durability.py on one server: the write is done on
    its master, the confirmation is missing.  tests/cluster/test_cluster_replicas.py
    has the cluster with replicas."""
    a = App(cluster_url, prefix=cprefix, shards=SHARDS, durability="strict",
            durability_timeout=0.1)  # fmt: skip
    chaos_app.register(a)
    try:
        with pytest.raises(NotReplicated, match="0 of the 1 replicas asked for confirmed it") as e:
            a.enqueue("echo", 1, _tenant="t0")
        assert e.value.task_ids is not None and a.get(e.value.task_ids[0]).state == "ready"
        with pytest.raises(NotReplicated):  # a pipeline over every master: a WAIT on each
            a.tasks["echo"].enqueue_many([(t,) for t in tenants_on_every_shard()])
    finally:
        a.close()


def test_strict_durability_with_no_replicas_needs_appendfsync_always_on_every_master(
    cluster_url: str, cprefix: str
) -> None:
    settings = Settings(
        redis_url=cluster_url, prefix=cprefix, durability="strict", durability_replicas=0
    )
    broker = Broker(settings)
    try:
        with pytest.raises(ConfigError, match="appendfsync always"):
            broker.ensure_meta()
    finally:
        broker.close()
