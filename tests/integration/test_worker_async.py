"""``async def`` tasks on a real worker against real Redis (issue 32 §6): the
worker's event loop, its slots, timeouts and cancels that stop the coroutine,
retries, ``ctx``'s async forms, output capture, and the processes pool.

Most tests run the worker in a thread of the test process, with tasks
registered on the test's own App, so a task can record what happened to its
coroutine in a list the test reads.  Nothing waits for time to pass: a task
that must be ended waits on an event nobody sets, and tasks that must run at
once wait for each other.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import async_app  # tests/apps and tests/helpers are put on sys.path by tests/conftest.py
import pytest
from procs import ROOT, LoggedProc, closed_on_exit
from worker_procs import (  # noqa: F401 (app_fixture, start_worker_fixture: fixtures)
    APPS,
    app_fixture,
    outcomes,
    start_worker_fixture,
    thread_workers,
    wait_for,
)

from redcron import App, Context, Retry, TaskFailed
from redcron.keys import shard_of_id
from redcron.worker import Worker

ASYNC_WORKER = """
import json, logging, sys
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
import async_app
from redcron.worker import Worker
Worker(async_app.app, **json.loads(sys.argv[1])).run()
"""


def _holds(w: Worker, iid: str) -> bool:
    with w.ledger.lock:
        return any(a.lease.iid == iid for a in w.ledger.active.values())


class Stuck:
    """An ``async def`` task that waits for an event nobody sets, recording how
    its coroutine ended: ``cancelled`` and ``finally`` once cancelled, ``ran on``
    only if the wait returned."""

    def __init__(self, app: App, name: str = "aio.stuck", **options: Any) -> None:
        self.seen: list[str] = []
        self.started = threading.Event()

        @app.task(name=name, retries=0, **options)
        async def stuck() -> None:
            self.started.set()
            try:
                await asyncio.Event().wait()
                self.seen.append("ran on")
            except asyncio.CancelledError:
                self.seen.append("cancelled")
                raise
            finally:
                self.seen.append("finally")

        self.task = stuck


def test_async_task_result_comes_back_from_the_event_loop(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    @app.task(name="aio.double")
    async def double(x: int) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"value": 2 * x, "thread": threading.current_thread().name}

    @app.task(name="plain.where")
    def where() -> str:
        return threading.current_thread().name

    start_worker(concurrency=2)
    assert double.enqueue(21).result(timeout=30) == {"value": 42, "thread": "redcron-asyncio"}
    assert app.enqueue("aio.double", 4).result(timeout=30)["value"] == 8
    # the same worker runs plain functions on its pool's threads
    assert where.enqueue().result(timeout=30) == "redcron-exec"


def test_async_task_is_cancelled_at_its_timeout(
    app: App, start_worker: Callable[..., Worker], caplog: pytest.LogCaptureFixture
) -> None:
    stuck = Stuck(app, timeout=1)
    caplog.set_level(logging.INFO, logger="redcron.worker.worker")
    start_worker(concurrency=2)
    h = stuck.task.enqueue()
    with pytest.raises(TaskFailed) as exc:
        h.result(timeout=30)
    assert exc.value.state == "dead"
    info = h.info()
    assert outcomes(info) == ["timed_out"]
    assert "timeout of 1.0s" in str(info.error)
    # reported once the coroutine had stopped: its cancel was delivered, for real
    assert stuck.seen == ["cancelled", "finally"]
    wait_for(
        lambda: any(
            h.id in r.getMessage() and "timed_out" in r.getMessage() for r in caplog.records
        ),
        "the attempt's INFO line",
    )


def test_cancel_request_stops_a_running_coroutine(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    stuck = Stuck(app)
    w = start_worker(concurrency=2, lease_ttl=0.6)  # a heartbeat every 0.1 s
    h = stuck.task.enqueue()
    assert stuck.started.wait(30)
    wait_for(lambda: h.state == "running", "the task to be marked running")
    done = h.cancel()
    assert (done.state, done.cancelled) == ("cancelled", True)
    wait_for(lambda: not _holds(w, h.id), "the worker to stop the coroutine and report it")
    assert stuck.seen == ["cancelled", "finally"]
    info = h.info()
    assert info.state == "cancelled"
    assert outcomes(info) == ["cancelled"]


def test_heartbeats_keep_a_long_coroutine_s_lease(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    release = threading.Event()

    @app.task(name="aio.long", retries=0)
    async def long() -> str:
        await asyncio.to_thread(release.wait, 60)
        return "done"

    start_worker(concurrency=1, lease_ttl=0.6)
    h = long.enqueue()
    wait_for(lambda: h.state == "running", "the task to run")
    key = app.broker.keys.ti(shard_of_id(h.id), h.id)

    def deadline() -> int:
        return int(app.broker.client.hget(key, "deadline") or 0)

    first = deadline()
    # renewed past what the first lease allowed, several TTLs over: the keeper's
    # heartbeat covers a coroutine's lease as a thread's
    wait_for(lambda: deadline() > first + 2_000, "the lease to be renewed for 2 s")
    release.set()
    assert h.result(timeout=30) == "done"
    assert outcomes(h.info()) == ["succeeded"]


def test_async_task_raising_is_retried(app: App, start_worker: Callable[..., Worker]) -> None:
    @app.task(name="aio.flaky", retries=3, retry_base=0.05, retry_cap=0.1)
    async def flaky(ctx: Context) -> int:
        await asyncio.sleep(0)
        if ctx.attempt == 1:
            raise RuntimeError("attempt 1 fails")
        if ctx.attempt == 2:
            raise Retry("not yet", delay=0)
        return ctx.attempt

    start_worker(concurrency=2)
    h = flaky.enqueue()
    assert h.result(timeout=30) == 3
    info = h.info()
    assert outcomes(info) == ["failed", "failed", "succeeded"]
    assert "RuntimeError: attempt 1 fails" in str(info.attempts[0].error)
    assert "Retry: not yet" in str(info.attempts[1].error)


def test_async_tasks_run_concurrently_on_one_loop(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    n = 6
    met: dict[str, Any] = {"count": 0, "threads": set()}

    @app.task(name="aio.meet", retries=0, timeout=60)
    async def meet() -> int:
        # every one of the n waits here until the n-th arrives: they meet only if
        # all n run at once (one at a time, the first would wait for ever)
        if "event" not in met:
            met["event"] = asyncio.Event()
        met["count"] += 1
        met["threads"].add(threading.get_ident())
        if met["count"] == n:
            met["event"].set()
        await met["event"].wait()
        return int(met["count"])

    start_worker(concurrency=n, prefetch=0)
    handles = meet.enqueue_many([() for _ in range(n)])
    assert [h.result(timeout=60) for h in handles] == [n] * n
    assert len(met["threads"]) == 1  # one event loop, one thread


def test_loop_slots_count_in_the_worker_concurrency(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    gate: dict[str, Any] = {"running": 0, "peak": 0}
    release = threading.Event()

    @app.task(name="aio.hold", retries=0)
    async def hold() -> None:
        gate["running"] += 1
        gate["peak"] = max(gate["peak"], gate["running"])
        try:
            await asyncio.to_thread(release.wait, 60)
        finally:
            gate["running"] -= 1

    w = start_worker(concurrency=2, prefetch=0)
    handles = hold.enqueue_many([() for _ in range(4)])
    wait_for(lambda: gate["running"] == 2, "two coroutines to run")
    # the two slots are taken: the worker holds no more leases, the rest wait ready
    with w.ledger.lock:
        assert w.ledger.busy == 2
    assert sorted(h.state for h in handles).count("ready") == 2
    release.set()
    for h in handles:
        h.result(timeout=30)
    assert gate["peak"] == 2


def test_ctx_async_forms_and_output_capture(app: App, start_worker: Callable[..., Worker]) -> None:
    @app.task(name="aio.probe", retries=1)
    async def probe(ctx: Context) -> list[Any]:
        ctx.logger.warning("probe attempt %d", ctx.attempt)
        first = await ctx.aonce("effect")
        again = await ctx.aonce("effect")
        return [first, again, await ctx.aparams(), ctx.cancelled]

    start_worker(concurrency=2)
    h = probe.enqueue()
    assert h.result(timeout=30) == [True, False, {}, False]
    lines = app.broker.inspection.log_lines(h.id, 1)
    assert "WARNING redcron.task: probe attempt 1" in lines


def test_a_hard_stop_hands_a_running_coroutine_back(app: App, redis_url: str) -> None:
    stuck = Stuck(app)
    with thread_workers(app) as start:
        w = start(concurrency=1)
        h = stuck.task.enqueue()
        assert stuck.started.wait(30)
        w.stop(graceful=False)
        wait_for(lambda: h.state == "ready", "the lease to be handed back")
    # the worker has stopped (joined): its loop cancelled the coroutine, not left it
    assert stuck.seen == ["cancelled", "finally"]
    assert outcomes(h.info()) == ["lost"]  # handed back: the attempt is lost, not failed


def test_async_only_app_starts_no_pool_threads(redis_url: str, key_prefix: str) -> None:
    only = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)

    @only.task(name="aio.only")
    async def one() -> int:
        return 1

    try:
        with thread_workers(only) as start:
            w = start(concurrency=4)
            assert one.enqueue().result(timeout=30) == 1
            assert w.pool._threads == []
            assert w.pool.aio is not None and w.pool.aio.size == 4
    finally:
        only.close()


def test_processes_pool_worker_runs_async_tasks_on_its_own_loop(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    # a worker process of the processes pool: plain tasks in its children, async
    # def tasks on the loop of the worker process itself
    client = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)
    async_app.register(client)
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    env.update(
        PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{APPS}",
        REDCRON_REDIS_URL=redis_url,
        REDCRON_PREFIX=key_prefix.rstrip(":"),
        REDCRON_MIN_LEASE_TTL="0.5",
    )
    options = {"concurrency": 1, "pool": "processes", "app_path": "async_app:app", "grace": 1.0}
    procs = [LoggedProc(ASYNC_WORKER, [json.dumps(options)], env, tmp_path / "worker.log")]
    try:
        with closed_on_exit(procs):
            h = client.enqueue("aio_whereami")
            where = h.result(timeout=60)
            plain = client.enqueue("plain_whereami").result(timeout=60)
            assert where["thread"] == "redcron-asyncio"
            assert where["pid"] == procs[0].proc.pid  # the worker's own process
            assert plain["pid"] != procs[0].proc.pid  # a child of its pool
            assert "async print" in client.broker.inspection.log_lines(h.id, 1)
    finally:
        client.close()
