"""The worker registry: a running worker publishes itself, a clean stop takes
it out, and an entry no heartbeat renews is pruned (explicit ``now``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from click.testing import CliRunner
from worker_procs import (  # noqa: F401 (fixtures)
    app_fixture,
    chaos_app_client,
    start_worker_fixture,
    thread_workers,
    wait_for,
)

from redcron import App
from redcron.cli.main import main
from redcron.engine.workers import Registration, WorkerRegistry
from redcron.worker import Worker

T0 = 1_700_000_000_000


def cli_workers(app: App, redis_url: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(
        main,
        ["workers", "list", "--json", "--redis", redis_url],
        env={"REDCRON_PREFIX": app.settings.prefix},
    )
    assert result.exit_code == 0, result.output
    listed: list[dict[str, object]] = json.loads(result.output)
    return listed


def test_a_running_worker_is_listed_with_what_it_serves_then_leaves_on_stop(
    app: App, start_worker: Callable[..., Worker], redis_url: str
) -> None:
    registry = WorkerRegistry(app.broker)
    w = start_worker(concurrency=3, queues=["default", "other"], name="w-reg")
    (info,) = wait_for(registry.list, "the worker to register")
    assert info.id == "w-reg"
    assert info.pid == os.getpid()
    assert info.queues == ("default", "other") and info.tenants == ()
    assert info.slots == 3
    assert {"slow", "echo"} <= set(info.tasks)
    assert info.version
    assert info.heartbeat_at is not None and info.expires_at is not None
    assert info.expires_at > info.heartbeat_at
    assert info.started_at is not None and info.started_at <= info.heartbeat_at

    # its heartbeats publish what it is running
    h = app.enqueue("wait_key", f"{app.settings.prefix}:go")
    wait_for(lambda: registry.list()[0].running == 1, "the running count to be published")
    (row,) = cli_workers(app, redis_url)
    assert row["id"] == "w-reg" and row["running"] == 1 and row["slots"] == 3
    assert row["queues"] == ["default", "other"]
    app.broker.client.set(f"{app.settings.prefix}:go", 1)
    h.result(timeout=30)

    w.stop()
    wait_for(lambda: not registry.list(), "a clean stop to remove the entry")
    assert not app.broker.client.exists(app.broker.keys.workers())
    assert cli_workers(app, redis_url) == []


def reg(worker_id: str) -> Registration:
    return Registration(worker_id, "h", 1, ("default",), (), 4, 0, ("t",))


def test_an_entry_no_heartbeat_renews_is_pruned_by_its_score(app: App) -> None:
    registry = WorkerRegistry(app.broker)
    index = app.broker.keys.workers()
    ttl = 60_000  # the hash's own TTL runs on the real clock: long enough never to matter here
    assert registry.publish(reg("a"), ttl, now=T0) == T0 + ttl
    registry.publish(reg("b"), ttl, now=T0 + 30_000)
    assert [w.id for w in registry.list(now=T0 + ttl)] == ["a", "b"]
    # a missed its heartbeats: gone from the listing and from the index
    assert [w.id for w in registry.list(now=T0 + ttl + 1)] == ["b"]
    assert app.broker.client.zrange(index, 0, -1) == [b"b"]
    # b renews: its expiry moves on, its start time stays
    registry.publish(reg("b"), ttl, now=T0 + 84_000)
    (b,) = registry.list(now=T0 + 100_000)
    assert b.heartbeat_at is not None and b.started_at is not None
    assert (b.heartbeat_at - b.started_at).total_seconds() == 54
    assert registry.list(now=T0 + 84_000 + ttl + 1) == []
    assert app.broker.client.zcard(index) == 0


def test_an_index_entry_whose_hash_expired_is_pruned(app: App) -> None:
    registry = WorkerRegistry(app.broker)
    now = app.broker.server_ms()
    registry.publish(reg("c"), 60_000, now=now)
    app.broker.client.delete(app.broker.keys.worker("c"))  # as its TTL would
    assert registry.list(now=now) == []
    assert app.broker.client.zcard(app.broker.keys.workers()) == 0
