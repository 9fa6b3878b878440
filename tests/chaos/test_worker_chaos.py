"""Workers as real processes, killed, stopped and signalled; Redis killed under them.

Each test checks the invariants afterwards (docs/architecture.md): a lost lease is
reaped and retried (4), a zombie's late result is rejected (3), every attempt
ends exactly once with the right outcome (5), and runaway work is killed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import chaos_app  # tests/apps and tests/helpers are put on sys.path by tests/conftest.py
import pytest
import redis
import worker_procs
from grants import grant_commands
from worker_procs import (  # noqa: F401 (app_fixture: the chaos app's client, as ``app``)
    WorkerProc,
    app_fixture,
    outcomes,
    wait_for,
    worker_spawner,
)

from redcron import App
from redcron.model import TaskRecord

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone: it runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no procfs: fall back to signal 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.fixture
def spawn(redis_url: str, key_prefix: str, tmp_path: Path) -> Iterator[Callable[..., WorkerProc]]:
    """Start worker subprocesses; every one is stopped (or killed) in teardown."""
    with worker_spawner(redis_url, key_prefix, tmp_path, concurrency=1, grace=1.0) as start:
        yield start


def attempts_seen(r: redis.Redis, app: App, iid: str) -> list[str]:
    """``attempt:pid`` for every attempt of ``slow`` that started running."""
    return [x.decode() for x in r.lrange(chaos_app.rec_key(app, "attempts", iid), 0, -1)]


def assert_one_end_per_attempt(info: TaskRecord) -> None:
    for a in info.attempts:
        assert a.outcome and a.ended_at, a
    assert info.attempt == len(info.attempts)


# -- lost workers ---------------------------------------------------------------


def test_sigkilled_worker_is_reaped_and_retried(
    app: App, spawn: Callable[..., WorkerProc], r: redis.Redis
) -> None:
    a = spawn(lease_ttl=1.0)
    h = app.enqueue("slow", 60)
    wait_for(lambda: h.state == "running" and attempts_seen(r, app, h.id), "attempt 1 to run")
    a.sigkill()

    # A longer TTL keeps B's own lease safe from a slow heartbeat on a busy box.
    b = spawn(lease_ttl=5.0)
    assert h.result(timeout=30) == "attempt-2"
    info = h.info()
    assert info.state == "succeeded"
    assert outcomes(info) == ["lost", "succeeded"]
    assert "lease expired" in str(info.attempts[0].error)
    first, second = info.attempts
    assert first.worker != second.worker
    assert [x.split(":") for x in attempts_seen(r, app, h.id)] == [
        ["1", str(a.pid)],
        ["2", str(b.pid)],
    ]
    assert_one_end_per_attempt(info)
    assert app.broker.inspection.stats().get("lease_expired", 0) >= 1


def test_zombie_result_is_rejected(
    app: App, spawn: Callable[..., WorkerProc], r: redis.Redis
) -> None:
    a = spawn(lease_ttl=1.0)
    h = app.enqueue("slow", 3)  # attempt 1 sleeps 3 s, then returns "attempt-1"
    wait_for(lambda: h.state == "running" and attempts_seen(r, app, h.id), "attempt 1 to run")
    a.signal(signal.SIGSTOP)
    try:
        b = spawn(lease_ttl=5.0)
        assert h.result(timeout=30) == "attempt-2"
    finally:
        a.signal(signal.SIGCONT)
    # A wakes up, finishes attempt 1 late and reports it with its stale token.
    wait_for(
        lambda: "results rejected" in a.log() or h.result(timeout=1) != "attempt-2",
        "the zombie to report attempt 1",
    )
    assert "results rejected" in a.log()
    info = h.info()
    assert info.state == "succeeded"
    assert h.result(timeout=1) == "attempt-2"
    assert outcomes(info) == ["lost", "succeeded"]
    assert info.attempts[1].worker != info.attempts[0].worker
    assert info.worker == info.attempts[1].worker
    assert_one_end_per_attempt(info)
    assert [x.split(":")[0] for x in attempts_seen(r, app, h.id)] == ["1", "2"]
    assert a.proc.poll() is None and b.proc.poll() is None


# -- runaway work is killed ----------------------------------------------------------


def test_runaway_command_is_killed_at_timeout(
    app: App, spawn: Callable[..., WorkerProc], tmp_path: Path
) -> None:
    grant_commands(app)
    spawn(concurrency=2, allow_commands=True, queues=["default", "commands"], lease_ttl=2.0)
    pidfile = tmp_path / "cmd.pid"
    h = app.enqueue_command(
        ["sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"], timeout=1, retries=0
    )
    pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "the command"))
    t0 = time.monotonic()
    wait_for(lambda: h.state == "dead", "the command to time out", timeout=30)
    assert time.monotonic() - t0 < 15
    info = h.info()
    assert outcomes(info) == ["timed_out"]
    assert "timeout" in str(info.error)
    wait_for(lambda: not alive(pid), f"sleep (pid {pid}) to be gone", timeout=10)
    # the slot is free again
    assert app.enqueue("echo", "after").result(timeout=30) == "after"


def test_runaway_python_in_process_pool_is_killed_and_respawned(
    app: App, spawn: Callable[..., WorkerProc], r: redis.Redis
) -> None:
    spawn(concurrency=1, pool="processes", app_path="chaos_app:app", lease_ttl=2.0)
    # warm the child first: on a loaded machine its start (importing the app) took longer
    # than the 1 s timeout below, which then killed it before it could say its pid
    assert isinstance(app.enqueue("whoami").result(timeout=30), int)
    h = app.enqueue("spin", _timeout=1)
    pids = chaos_app.rec_key(app, "pids", h.id)
    child = int(wait_for(lambda: r.lindex(pids, 0), "the spinning child"))
    wait_for(lambda: h.state == "dead", "the spinning task to time out", timeout=30)
    info = h.info()
    assert outcomes(info) == ["timed_out"]
    wait_for(lambda: not alive(child), f"child {child} to be killed", timeout=10)
    # a fresh child serves the next task
    fresh = app.enqueue("whoami").result(timeout=30)
    assert isinstance(fresh, int) and fresh != child
    assert r.llen(pids) == 1  # retries=0: never ran again


def test_process_pool_child_dies_with_its_sigkilled_worker(
    app: App, spawn: Callable[..., WorkerProc], r: redis.Redis
) -> None:
    w = spawn(pool="processes", app_path="chaos_app:app", lease_ttl=2.0)
    h = app.enqueue("slow", 60, _timeout=3)
    seen = wait_for(lambda: attempts_seen(r, app, h.id), "the task to run in a child")
    child = int(seen[0].split(":")[1])
    try:
        w.sigkill()
        # nobody is left to enforce its 3 s timeout or read its result: it must go now,
        # not 60 s later on a broken pipe
        wait_for(lambda: not alive(child), f"child {child} to die with its worker", timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child, signal.SIGKILL)  # the old behaviour: don't leak it past the test
    assert "Traceback" not in w.log()
    assert "BrokenPipe" not in w.log()


def test_lifeline_watchdog_alone_kills_the_child() -> None:
    # the fallback where no death signal exists: the child's group goes when the
    # only write end of its pipe is closed (as when the worker dies)
    ctx = multiprocessing.get_context("spawn")
    reader, writer = ctx.Pipe(duplex=False)
    child = ctx.Process(target=worker_procs.lifeline_sleeper, args=(reader,), daemon=True)
    child.start()
    reader.close()
    try:
        writer.close()
        child.join(20)
        assert child.exitcode == -signal.SIGKILL
    finally:
        child.kill()


# -- cancel of running work ---------------------------------------------------------


def test_cancel_running_work_kills_it(
    app: App, spawn: Callable[..., WorkerProc], r: redis.Redis, tmp_path: Path
) -> None:
    ttl = 1.2
    spawn(
        concurrency=2,
        pool="processes",
        app_path="chaos_app:app",
        allow_commands=True,
        queues=["default", "commands"],
        lease_ttl=ttl,
    )
    py = app.enqueue("slow", 60, True)
    pidfile = tmp_path / "cmd.pid"
    grant_commands(app)
    cmd = app.enqueue_command(["sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"], retries=3)
    wait_for(lambda: py.state == "running" and attempts_seen(r, app, py.id), "the python task")
    cmd_pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), "command"))
    wait_for(lambda: cmd.state == "running", "the command to be running")
    child = int(attempts_seen(r, app, py.id)[0].split(":")[1])

    t0 = time.monotonic()
    # ended cancelled at once; the code goes on until the worker's next heartbeat
    assert py.cancel().may_still_be_running
    assert cmd.cancel().may_still_be_running
    assert (py.state, cmd.state) == ("cancelled", "cancelled")
    wait_for(lambda: not alive(child) and not alive(cmd_pid), "both processes to die", 10)
    # killed at the next heartbeat (every TTL/6); the rest is slack for a busy box
    assert time.monotonic() - t0 < ttl / 6 + 5
    for h in (py, cmd):
        info = h.info()
        assert outcomes(info) == ["cancelled"], info
        assert_one_end_per_attempt(info)
    # never retried: the worker goes on serving other work, and they stay put
    assert app.enqueue("echo", 1).result(timeout=30) == 1
    assert py.info().attempt == 1 and cmd.info().attempt == 1
    assert len(attempts_seen(r, app, py.id)) == 1


# -- graceful shutdown ----------------------------------------------------------------


@pytest.mark.parametrize("pool", ["threads", "processes"])
def test_sigterm_drains_then_hands_back(
    app: App, spawn: Callable[..., WorkerProc], r: redis.Redis, pool: str
) -> None:
    grace = 2.0
    w = spawn(concurrency=3, grace=grace, lease_ttl=2.0, pool=pool, app_path="chaos_app:app")
    short = [app.enqueue("slow", 1.0, True) for _ in range(2)]
    long = app.enqueue("slow", 30)
    for h in [*short, long]:
        wait_for(lambda h=h: h.state == "running" and attempts_seen(r, app, h.id), "all to run")

    t0 = time.monotonic()
    w.signal(signal.SIGTERM)
    assert w.proc.wait(grace + 10) == 0
    # grace, then the hand-back is one script call: no multi-second stall on the way out
    assert time.monotonic() - t0 < grace + 4.5
    for h in short:
        info = h.info()
        assert info.state == "succeeded", info
        assert outcomes(info) == ["succeeded"]
    info = long.info()
    assert info.state == "ready"  # handed back, not waiting on a timer or dead
    assert outcomes(info) == ["lost"]
    assert "handed back" in str(info.attempts[0].error)
    assert info.budget == 1  # the hand-back did not use up a retry

    spawn(concurrency=1, lease_ttl=2.0)
    assert long.result(timeout=30) == "attempt-2"
    assert outcomes(long.info()) == ["lost", "succeeded"]


# -- Redis dies under a worker ------------------------------------------------------------


def test_worker_survives_redis_restart(
    app: App, spawn: Callable[..., WorkerProc], redis_server: Any
) -> None:
    if not redis_server.can_restart:
        pytest.skip("the test Redis is external: cannot kill it")
    w = spawn(concurrency=2, lease_ttl=2.0)
    assert app.enqueue("echo", "before").result(timeout=30) == "before"
    app.close()  # no stale pooled connections on our side
    redis_server.kill()
    time.sleep(1.5)
    assert w.proc.poll() is None
    redis_server.start()
    handles = [app.enqueue("echo", i) for i in range(5)]
    assert [h.result(timeout=30) for h in handles] == list(range(5))
    assert w.proc.poll() is None
    assert "unavailable" in w.log() or "failed" in w.log()  # it did notice
