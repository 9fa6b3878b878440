"""examples/http_worker.py (stdlib only) against a live ``redcron dashboard`` and
Redis, with a worker token: Python tasks by handler name, command tasks with
exit codes and a timeout, heartbeats while a task runs, a cancel, and one
line and status 1 when nothing answers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_proc import dashboard  # tests/helpers is on sys.path
from grants import grant_commands
from worker_procs import wait_for

from redcron import App
from redcron.engine.workers import WorkerRegistry
from redcron.store.tokens import TokenStore

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "http_worker.py"
ADMIN = "test-admin-token"


@pytest.fixture
def server(redis_url: str, key_prefix: str) -> Iterator[str]:
    # a 3 s lease: the worker heartbeats every second, a test sees it renew
    with dashboard(redis_url, key_prefix, REDCRON_LEASE_TTL="3", REDCRON_ADMIN_TOKEN=ADMIN) as base:
        yield base


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))

    # the names the HTTP worker implements (examples/http_worker.py HANDLERS);
    # registered here only so that the App can enqueue them by name
    @a.task(name="report.render", retries=0)
    def render(day: str, rows: int = 0) -> None:
        raise NotImplementedError("runs on the HTTP worker")

    # no retries: a retry's timer is promoted by the maintenance a beat or a
    # Python worker runs, and this test runs neither (docs/http-worker.md)
    @a.task(name="report.refuse", retries=0)
    def refuse(day: str) -> None:
        raise NotImplementedError("runs on the HTTP worker")

    @a.task(name="report.unknown", retries=3)
    def unknown() -> None:
        raise NotImplementedError("no worker implements it")

    grant_commands(a)
    yield a
    a.close()


def worker_env(server: str, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    return {**env, "REDCRON_API": server, "REDCRON_TOKEN": token}


def http_worker(*args: str) -> list[str]:
    return [sys.executable, str(SCRIPT), "--worker-id", "py-test", *args]


def test_the_python_http_worker_runs_and_reports_tasks(app: App, server: str) -> None:
    _info, token = TokenStore(app.broker).create_worker(["default", "commands"], ["default"])
    render = app.enqueue("report.render", "2027-01-04", rows=120)
    refuse = app.enqueue("report.refuse", "2027-01-05")
    unknown = app.enqueue("report.unknown")
    hello = app.enqueue_command(
        ["sh", "-c", 'echo "hello $WHO, token ${REDCRON_TOKEN:-none}"'], env={"WHO": "world"}
    )
    exit3 = app.enqueue_command(["sh", "-c", "exit 3"], retries=0)
    slow = app.enqueue_command(["sleep", "30"], timeout=1, retries=0)
    done = subprocess.run(
        http_worker("--exit-when-idle"),
        env=worker_env(server, token), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert render.result(timeout=5) == {"day": "2027-01-04", "rows": 120, "pages": 2}
    assert render.info().worker == "py-test"
    # a handler's exception: a failed attempt (retryable; retries=0: dead)
    assert refuse.state == "dead"
    assert [a.outcome for a in refuse.info().attempts] == ["failed"]
    assert "ValueError: no data for 2027-01-05" in (refuse.info().error or "")
    # no handler: permanent, whatever the retries
    assert unknown.state == "dead" and len(unknown.info().attempts) == 1
    assert "no handler for 'report.unknown'" in (unknown.info().error or "")
    # a command in a clean environment: the worker's token is not passed on
    assert hello.result(timeout=5)["exit_code"] == 0
    assert "hello world, token none" in done.stdout
    assert exit3.state == "dead" and exit3.info().exit_code == 3
    assert slow.state == "dead" and "killed after timeout of 1" in (slow.info().error or "")
    # an INFO line per attempt it reported, as a Python worker logs
    assert f"task report.render {render.id} (tenant default, queue default) attempt 1/1 " in (
        done.stderr
    )
    assert f"task command {exit3.id} (tenant default, queue commands) attempt 1/1 failed: " in (
        done.stderr
    )
    assert done.stderr.count(" -> dead") == 4
    # it showed in the registry as an HTTP worker of that token
    entry = WorkerRegistry(app.broker).get("py-test")
    assert entry is not None and entry.via == "http"


def test_it_heartbeats_a_long_task_and_stops_a_cancelled_one(app: App, server: str) -> None:
    _info, token = TokenStore(app.broker).create_worker(["commands"])
    slow = app.enqueue_command(["sleep", "60"])
    with subprocess.Popen(
        http_worker("--queues", "commands", "--exit-when-idle"), env=worker_env(server, token),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        try:
            wait_for(lambda: slow.state == "running", "the HTTP worker leased the task")
            first = slow.info().deadline_at
            assert first is not None
            # the 3 s lease is renewed by heartbeats (every second)
            wait_for(lambda: (slow.info().deadline_at or first) > first, "a heartbeat", timeout=10)
            assert app.broker.cancel(slow.id).may_still_be_running
            _out, err = proc.communicate(timeout=30)  # the next heartbeat stops it
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    assert slow.state == "cancelled"


def test_nothing_answering_is_one_line_and_status_1() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run(
        http_worker(),
        env=worker_env(f"http://127.0.0.1:{port}", "any-token"),
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"http_worker: nothing answers at http://127.0.0.1:{port}/v1/worker/")
