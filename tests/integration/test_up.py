"""``redcron up`` as a user runs it: a real process in a fresh directory, with
its own embedded Redis, a beat, a worker and the dashboard, stopped with Ctrl-C."""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from polling import wait_for
from procs import stop

from redcron.embedded import free_port

SRC = Path(__file__).resolve().parents[2] / "src"

TINY_APP = """
import os
from redcron import App

# up passes --redis to its children; never fall back to a developer's :6379
app = App(os.environ.get("REDCRON_REDIS_URL") or "redis://127.0.0.1:1/0")

@app.task
def add(x, y):
    return x + y
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def get(
    port: int, path: str, token: str | None = None, cookie: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One GET, redirects not followed."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if cookie:
        headers["Cookie"] = cookie
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


class UpProc:
    """``redcron up`` in ``cwd``; its stdout read line by line on a thread, its
    stderr in ``cwd/<stderr_name>``."""

    def __init__(self, cwd: Path, *args: str, stderr_name: str = "up.stderr") -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
        env["PYTHONPATH"] = f"{SRC}{os.pathsep}{cwd}"
        self.stderr_path = cwd / stderr_name
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "redcron.cli.main", "up", *args],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def read_until(self, last: str, timeout: float = 60.0) -> list[str]:
        """Lines up to and including the first one starting with ``last``."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {last!r} line in {timeout}s: {self.describe()}") from None
            if line is None:
                raise AssertionError(f"up exited before {last!r}: {self.describe()}")
            self.output.append(line)
            if line.startswith(last):
                return self.output

    def describe(self) -> str:
        return f"stdout {self.output!r}, stderr:\n{self.stderr_path.read_text(errors='replace')}"

    def close(self) -> None:
        stop(self.proc, 30)
        self._reader.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._stderr.close()


@pytest.fixture
def up_dir(tmp_path: Path) -> Path:
    (tmp_path / "tinyapp.py").write_text(TINY_APP)
    return tmp_path


@pytest.fixture
def start_up(up_dir: Path) -> Iterator[Callable[..., UpProc]]:
    started: list[UpProc] = []

    def start(*args: str) -> UpProc:
        up = UpProc(up_dir, *args)
        started.append(up)
        return up

    yield start
    for up in started:
        up.close()


def test_up_runs_the_dashboard_with_a_login_link_and_a_token_file(
    up_dir: Path, start_up: Callable[..., UpProc]
) -> None:
    port, dash = free_port(), free_port()
    up = start_up(
        "-A", "tinyapp:app", "--port", str(port), "--dashboard-port", str(dash),
        "--no-enqueue-examples", "--grace", "2",
    )  # fmt: skip
    out = up.read_until("Ctrl-C to stop.")
    text = "\n".join(out)

    pids = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^(redis|beat|worker|dashboard)\s+(\d+)\s", text, re.M)
    }
    assert set(pids) == {"redis", "beat", "worker", "dashboard"}, text
    assert f"http://127.0.0.1:{dash}/" in text
    link = re.search(rf"http://127\.0\.0\.1:{dash}(/login/once/[A-Za-z0-9_-]+)\s*$", text, re.M)
    assert link, text
    assert "valid 15 minutes, once" in text
    assert (
        f'curl -H "Authorization: Bearer $(cat .redcron/admin.token)" http://127.0.0.1:{dash}/v1/jobs'
        in text
    )

    # the token reaches the dashboard through its environment, never its argv (ps)
    token_file = up_dir / ".redcron" / "admin.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert len(token) >= 32
    cmdline = Path(f"/proc/{pids['dashboard']}/cmdline")
    if cmdline.exists():
        assert token not in cmdline.read_text()
    # nor do the children's argv carry the Redis URL (a password in it would show in ps)
    for name in ("beat", "worker", "dashboard"):
        argv = Path(f"/proc/{pids[name]}/cmdline")
        if argv.exists():
            assert "redis://" not in argv.read_text(), name

    status, _, body = get(dash, "/v1/openapi.json")
    assert status == 200
    assert "paths" in json.loads(body)

    status, _, _ = get(dash, "/v1/jobs", token=token)
    assert status == 200
    status, _, _ = get(dash, "/v1/jobs", token="not-the-token")
    assert status == 401

    status, headers, _ = get(dash, link.group(1))
    assert status == 303
    assert urlsplit(headers["Location"]).path == "/"
    session = headers["Set-Cookie"].split(";")[0]
    assert session.startswith("redcron_session="), headers
    status, _, body = get(dash, "/", cookie=session)
    assert status == 200
    assert b"<h1>Overview</h1>" in body
    status, _, _ = get(dash, link.group(1))  # once only
    assert status == 401

    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(60) == 0, up.describe()
    up.read_until("stopped.")
    for name, pid in pids.items():
        wait_for(lambda pid=pid: not alive(pid), f"{name} (pid {pid}) to be gone", timeout=10)
    assert not token_file.exists()
    assert not (up_dir / ".redcron" / "redis.url").exists()


def test_up_refuses_a_dashboard_port_in_use_before_starting_anything(
    up_dir: Path, start_up: Callable[..., UpProc]
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        up = start_up("-A", "tinyapp:app", "--port", str(free_port()),
                      "--dashboard-port", str(taken))  # fmt: skip
        assert up.proc.wait(60) != 0
    lines = up.stderr_path.read_text().strip().splitlines()
    assert len(lines) == 1, lines
    err = lines[0]
    assert err.startswith("error: ")
    assert f"port {taken} is in use" in err
    # the way to pass it, to redcron up and through make run
    assert (
        f'--dashboard-port {taken + 1} (make run: make run ARGS="--dashboard-port {taken + 1}")'
        in err
    )
    assert not (up_dir / ".redcron" / "redis.url").exists()
    assert not (up_dir / ".redcron" / "admin.token").exists()


def test_up_without_dashboard(up_dir: Path, start_up: Callable[..., UpProc]) -> None:
    up = start_up("-A", "tinyapp:app", "--port", str(free_port()), "--no-dashboard",
                  "--no-enqueue-examples", "--grace", "2")  # fmt: skip
    text = "\n".join(up.read_until("Ctrl-C to stop."))
    assert not re.search(r"^dashboard", text, re.M), text
    assert "login/once" not in text
    assert not (up_dir / ".redcron" / "admin.token").exists()
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(60) == 0, up.describe()


def test_up_with_the_examples_grants_their_tenant_command_tasks(
    up_dir: Path, start_up: Callable[..., UpProc]
) -> None:
    # examples/jobs.yaml's nightly-report has a command task of tenant default:
    # without the grant, applying it would be refused (issue 16 item 4)
    shutil.copytree(SRC.parent / "examples", up_dir / "examples")
    up = start_up("--port", str(free_port()), "--no-dashboard", "--grace", "2")
    text = "\n".join(up.read_until("Ctrl-C to stop."))
    assert "tenant default: command tasks granted" in text, up.describe()
    assert "job default/nightly-report: created" in text
    assert "enqueued 6 example tasks" in text  # app.enqueue_command among them
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(60) == 0, up.describe()


def test_killing_up_leaves_no_orphans(up_dir: Path, start_up: Callable[..., UpProc]) -> None:
    """up SIGKILLed (no chance to stop its children): Linux SIGTERMs them
    (PR_SET_PDEATHSIG), so no worker, beat, dashboard or Redis lives on."""
    if not sys.platform.startswith("linux"):
        pytest.skip("parent-death signals are Linux only")
    up = start_up("-A", "tinyapp:app", "--port", str(free_port()),
                  "--dashboard-port", str(free_port()), "--no-enqueue-examples",
                  "--grace", "2")  # fmt: skip
    text = "\n".join(up.read_until("Ctrl-C to stop."))
    pids = [
        int(m.group(1))
        for m in re.finditer(r"^(?:redis|beat|worker|dashboard)\s+(\d+)\s", text, re.M)
    ]
    assert len(pids) == 4, text
    up.proc.kill()
    up.proc.wait(10)
    for pid in pids:
        wait_for(lambda pid=pid: not alive(pid), f"pid {pid} to be gone", timeout=30)
