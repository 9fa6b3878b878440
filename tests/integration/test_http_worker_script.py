"""The shell worker of docs/http-worker.md (examples/http_worker.sh, included in the
doc verbatim) runs tasks against a live ``redcron dashboard``."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from dashboard_proc import dashboard  # tests/helpers
from grants import grant_commands
from worker_procs import wait_for  # tests/helpers is on sys.path

from redcron import App

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "http_worker.sh"
DOC = ROOT / "docs" / "http-worker.md"


def test_the_doc_shows_the_script_verbatim() -> None:
    assert SCRIPT.read_text() in DOC.read_text()


@pytest.fixture
def server(redis_url: str, key_prefix: str) -> Iterator[str]:
    """A ``redcron dashboard`` on a free port; yields its base URL."""
    # the script heartbeats every second: a short lease shows it renews them
    with dashboard(redis_url, key_prefix, REDCRON_LEASE_TTL="3", REDCRON_ADMIN_TOKEN=ADMIN) as base:
        yield base


needs_tools = pytest.mark.skipif(
    not (shutil.which("curl") and shutil.which("jq") and shutil.which("bash")),
    reason="the shell worker needs bash, curl and jq",
)


ADMIN = "test-admin-token"


def shell_worker(server: str, rounds: int) -> dict[str, str]:
    return {
        **os.environ,
        "REDCRON_API": server,
        "REDCRON_TOKEN": ADMIN,
        "WORKER_ID": "sh-test",
        "ROUNDS": str(rounds),
    }


@needs_tools
def test_the_shell_worker_runs_tasks(redis_url: str, key_prefix: str, server: str) -> None:
    app = App(redis_url, prefix=key_prefix.rstrip(":"))
    grant_commands(app)
    try:
        # the script's own token is not the task's (a clean environment)
        ok = app.enqueue_command(
            ["sh", "-c", 'echo "hello $WHO, token ${REDCRON_TOKEN:-none}"'], env={"WHO": "world"}
        )
        bad = app.enqueue_command(["sh", "-c", "exit 3"], retries=0)
        done = subprocess.run(
            ["bash", str(SCRIPT)],
            env=shell_worker(server, 2),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "hello world, token none" in done.stdout
        assert ok.result(timeout=10) == {"exit_code": 0}
        assert ok.info().worker == "sh-test"
        assert bad.state == "dead"
        assert bad.info().exit_code == 3
    finally:
        app.close()


@needs_tools
def test_the_shell_worker_heartbeats_and_stops_a_cancelled_task(
    redis_url: str, key_prefix: str, server: str
) -> None:
    app = App(redis_url, prefix=key_prefix.rstrip(":"))
    grant_commands(app)
    try:
        slow = app.enqueue_command(["sleep", "60"])
        with subprocess.Popen(
            ["bash", str(SCRIPT)], env=shell_worker(server, 1),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ) as proc:  # fmt: skip
            try:
                wait_for(lambda: slow.state == "running", "the shell worker leased the task")
                first = slow.info().deadline_at
                assert first is not None
                # the 3 s lease is renewed by heartbeats (every second)
                wait_for(
                    lambda: (slow.info().deadline_at or first) > first, "a heartbeat", timeout=10
                )
                assert slow.state == "running"
                assert app.broker.cancel(slow.id).may_still_be_running
                _out, err = proc.communicate(timeout=30)  # the next heartbeat stops it
            finally:
                proc.kill()
        assert proc.returncode == 0, err
        assert slow.state == "cancelled"
    finally:
        app.close()
