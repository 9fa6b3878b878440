"""One ``redcron up`` per data directory (issue 29 item 1): a second ``up`` on
it is refused before it checks a port or starts anything, and leaves the
first's files and server alone; the lock a killed ``up`` left behind blocks
nobody.  And (item 7) closing ``up``'s terminal stops it as Ctrl-C does.
Real ``up`` processes in a fresh directory, as test_up.py runs them."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from polling import wait_for
from procs import stop
from test_up import SRC, TINY_APP, UpProc, alive, get

from redcron.cli.up_lock import LOCK_FILE, Holder, read_holder
from redcron.config import read_local_url
from redcron.embedded import free_port

PIDS = re.compile(r"^(redis|beat|worker|notifier|dashboard)\s+(\d+)\s", re.M)


@pytest.fixture
def up_dir(tmp_path: Path) -> Path:
    (tmp_path / "tinyapp.py").write_text(TINY_APP)
    return tmp_path


@pytest.fixture
def start_up(up_dir: Path) -> Iterator[Callable[..., UpProc]]:
    """``redcron up`` in ``up_dir``, stopped (if still running) after the test."""
    started: list[UpProc] = []

    def start(*args: str) -> UpProc:
        started.append(UpProc(up_dir, *args))
        return started[-1]

    yield start
    for up in started:
        up.close()


def run_up(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``redcron up`` expected to end on its own (refused), its output captured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    env["PYTHONPATH"] = f"{SRC}{os.pathsep}{cwd}"
    return subprocess.run(
        [sys.executable, "-m", "redcron.cli.main", "up", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_second_up_on_the_data_dir_is_refused_and_leaves_the_first_alone(
    up_dir: Path, start_up: Callable[..., UpProc]
) -> None:
    port, dash = free_port(), free_port()
    first = start_up(
        "-A", "tinyapp:app", "--port", str(port), "--dashboard-port", str(dash),
        "--no-enqueue-examples", "--grace", "2",
    )  # fmt: skip
    first.read_until("Ctrl-C to stop.")
    data = up_dir / ".redcron"
    url_file, token_file = data / "redis.url", data / "admin.token"
    recorded, token = url_file.read_text(), token_file.read_text().strip()
    assert read_holder(data / LOCK_FILE).up_pid == first.proc.pid

    # the same ports: refused for the directory, not a port (the lock comes first);
    # free ports: the directory alone refuses it (the second make run
    # started on the first one's AOF)
    port2, dash2 = free_port(), free_port()
    for p, d in ((port, dash), (port2, dash2)):
        second = run_up(up_dir, "-A", "tinyapp:app", "--port", str(p),
                        "--dashboard-port", str(d), "--no-enqueue-examples")  # fmt: skip
        assert second.returncode == 2, second
        assert second.stdout == "", second  # no grant, no job, no table: nothing started
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        err = lines[0]
        assert err.startswith(f"error: data directory {data.resolve()} is in use by "), err
        assert f"another `redcron up` (pid {first.proc.pid})" in err
        assert "one deployment per data directory" in err
        flags = f"--data-dir .redcron-2 --port {p + 1} --dashboard-port {d + 1}"
        assert f'{flags} (make run: make run ARGS="{flags}")' in err
        assert "is in use (another" not in err  # no port check ran
    # no second redis-server ever ran on the directory (each logs its port there)
    assert f"port={port2}" not in (data / "redis.log").read_text()

    # the first one's files, server and dashboard are untouched
    assert url_file.read_text() == recorded
    assert token_file.read_text().strip() == token
    assert read_local_url(up_dir) == f"redis://127.0.0.1:{port}/0"
    with redis.Redis(port=port) as client:
        assert client.ping()
    assert get(dash, "/v1/jobs", token=token)[0] == 200
    assert read_holder(data / LOCK_FILE).up_pid == first.proc.pid

    first.proc.send_signal(signal.SIGINT)
    assert first.proc.wait(60) == 0, first.describe()
    assert not url_file.exists() and not token_file.exists()

    # once it stopped, the directory is free again
    again = start_up("-A", "tinyapp:app", "--port", str(port2), "--no-dashboard",
                     "--no-enqueue-examples", "--grace", "2")  # fmt: skip
    again.read_until("Ctrl-C to stop.")
    assert read_local_url(up_dir) == f"redis://127.0.0.1:{port2}/0"
    again.proc.send_signal(signal.SIGINT)
    assert again.proc.wait(60) == 0, again.describe()


def test_a_second_deployment_runs_beside_with_its_own_data_dir(
    up_dir: Path, start_up: Callable[..., UpProc]
) -> None:
    """What the refusal says to do works: another --data-dir (and ports) keeps
    its files there, and the commands in this directory keep finding the first."""
    port, port2 = free_port(), free_port()
    first = start_up("-A", "tinyapp:app", "--port", str(port), "--no-dashboard",
                     "--no-enqueue-examples", "--grace", "2")  # fmt: skip
    first.read_until("Ctrl-C to stop.")
    second = UpProc(
        up_dir, "-A", "tinyapp:app", "--data-dir", ".redcron-2", "--port", str(port2),
        "--dashboard-port", str(free_port()), "--no-enqueue-examples", "--grace", "2",
        stderr_name="up-2.stderr",
    )  # fmt: skip
    try:
        text = "\n".join(second.read_until("Ctrl-C to stop."))
        assert "$(cat .redcron-2/admin.token)" in text
        other = up_dir / ".redcron-2"
        assert (other / "redis.url").read_text().split()[0] == f"redis://127.0.0.1:{port2}/0"
        assert (other / "admin.token").is_file()
        assert (other / "appendonlydir").is_dir()
        assert read_local_url(up_dir) == f"redis://127.0.0.1:{port}/0"
        assert not (up_dir / ".redcron" / "admin.token").exists()  # the first has none
        second.proc.send_signal(signal.SIGINT)
        assert second.proc.wait(60) == 0, second.describe()
        assert not (other / "redis.url").exists() and not (other / "admin.token").exists()
    finally:
        second.close()
    assert read_local_url(up_dir) == f"redis://127.0.0.1:{port}/0"  # still the first's


def test_the_lock_of_a_killed_up_blocks_nobody(
    up_dir: Path, start_up: Callable[..., UpProc]
) -> None:
    args = ("-A", "tinyapp:app", "--port", str(free_port()), "--no-dashboard",
            "--no-enqueue-examples", "--grace", "2")  # fmt: skip
    first = start_up(*args)
    text = "\n".join(first.read_until("Ctrl-C to stop."))
    pids = {name: int(pid) for name, pid in PIDS.findall(text)}
    assert set(pids) == {"redis", "beat", "worker", "notifier"}, text
    lock_file = up_dir / ".redcron" / LOCK_FILE
    assert read_holder(lock_file) == Holder(first.proc.pid, pids["redis"])

    first.proc.kill()  # no chance to let go of anything
    first.proc.wait(10)
    # its redis-server held the lock too, until it stopped (it must not share the AOF)
    for name, pid in pids.items():
        wait_for(lambda pid=pid: not alive(pid), f"{name} (pid {pid}) to be gone", timeout=30)
    assert read_holder(lock_file).up_pid == first.proc.pid  # the file stays, stale

    second = start_up(*args)
    second.read_until("Ctrl-C to stop.")
    assert read_holder(lock_file).up_pid == second.proc.pid
    second.proc.send_signal(signal.SIGINT)
    assert second.proc.wait(60) == 0, second.describe()


def test_closing_the_terminal_stops_up_as_ctrl_c_does_redis_last(up_dir: Path) -> None:
    """up on a terminal of its own (a pty, its controlling tty), its log in a file:
    closing the terminal sends it SIGHUP, and every write to it fails from then on.
    It stops in order (the beat releases its shards while Redis still runs),
    removes its files and exits 0."""
    master, slave = os.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    env["PYTHONPATH"] = f"{SRC}{os.pathsep}{up_dir}"
    log_path = up_dir / "up.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "redcron.cli.main", "up", "-A", "tinyapp:app",
             "--port", str(free_port()), "--dashboard-port", str(free_port()),
             "--no-enqueue-examples", "--grace", "2"],
            cwd=up_dir, env=env, stdin=slave, stdout=slave, stderr=log,
            start_new_session=True,  # then make the pty its controlling terminal
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )  # fmt: skip
    os.close(slave)
    try:
        text = read_pty_until(master, "Ctrl-C to stop.")
        pids = {name: int(pid) for name, pid in PIDS.findall(text)}
        assert set(pids) == {"redis", "beat", "worker", "notifier", "dashboard"}, text
        data = up_dir / ".redcron"
        assert (data / "redis.url").exists() and (data / "admin.token").exists()
        # up says it is up once the dashboard listens: the others may still be
        # starting (a child told to stop then may never log its stop)
        for started in ("beat .* owns shard", "worker .* slots", "notifier .* started"):
            wait_for(lambda s=started: re.search(s, log_path.read_text()), started)
        os.close(master)  # the terminal goes away
        master = -1
        assert proc.wait(60) == 0, log_path.read_text()
    finally:
        if master >= 0:
            os.close(master)
        stop(proc, 30)
    out = log_path.read_text()
    assert "could not release" not in out, out
    # each child logged its stop before up stopped the server
    redis_stopped = out.index("stopped redis-server on")
    for line in ("beat .* stopped", "worker .* stopped after", "notifier .* stopped"):
        found = re.search(line, out)
        assert found and found.start() < redis_stopped, (line, out)
    for name, pid in pids.items():
        wait_for(lambda pid=pid: not alive(pid), f"{name} (pid {pid}) to be gone", timeout=10)
    assert not (data / "redis.url").exists()
    assert not (data / "admin.token").exists()


def read_pty_until(master: int, last: str, timeout: float = 60.0) -> str:
    """What the terminal shows up to a line starting with ``last`` (\\r\\n made \\n)."""
    deadline = time.monotonic() + timeout
    seen = b""
    while not re.search(rb"^" + re.escape(last.encode()), seen.replace(b"\r", b""), re.M):
        left = deadline - time.monotonic()
        assert left > 0, f"no {last!r} line in {timeout}s: {seen!r}"
        if select.select([master], [], [], left)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every process let go of the terminal
                chunk = b""
            assert chunk, f"up left the terminal before {last!r}: {seen!r}"
            seen += chunk
    return seen.replace(b"\r", b"").decode(errors="replace")
