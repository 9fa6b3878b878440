"""``redcron worker --procs N`` against a real Redis, its processes signalled
and killed for real: the children run tasks and show in the registry under
their supervisor; a child killed with SIGKILL is restarted and its tasks
still complete; SIGTERM drains them all (prefetched leases handed back);
a SIGKILLed supervisor takes its children with it; children that keep dying
at start stop the supervisor; the Redis URL never reaches a child's argv."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from procs import ROOT
from worker_procs import APPS, chaos_app_client, wait_for

from redcron import App
from redcron.cli.main import main
from redcron.cli.worker_procs import FAILED_STARTS
from redcron.engine import WorkerRegistry
from redcron.model import WorkerInfo

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc; parent-death signals are Linux only"
)


class Supervisor:
    """``redcron worker -A chaos_app:app --procs N ...`` in a subprocess, its
    output (and its children's) in a log file."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path, cwd: Path) -> None:
        self.log_path = log_path
        self._out = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "redcron.cli.main", "worker", *args],
            env=env,
            cwd=cwd,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def children_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return sorted(out)


@pytest.fixture
def env(redis_url: str, key_prefix: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    return {
        **base,
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{APPS}",
        "REDCRON_REDIS_URL": redis_url,
        "REDCRON_PREFIX": key_prefix.rstrip(":"),
        "REDCRON_MIN_LEASE_TTL": "0.5",
    }


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    with chaos_app_client(redis_url, key_prefix) as a:
        yield a


@pytest.fixture
def start(env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., Supervisor]]:
    """Start supervisors (``-A chaos_app:app --lease-ttl 1`` and the given args);
    stopped in teardown, then their logs printed (shown when a test failed)."""
    running: list[Supervisor] = []

    def go(*args: str, extra_env: dict[str, str] | None = None, cwd: Path = ROOT) -> Supervisor:
        argv = ["-A", "chaos_app:app", "--lease-ttl", "1", *args]
        sup = Supervisor(
            argv, {**env, **(extra_env or {})}, tmp_path / f"sup{len(running)}.log", cwd
        )
        running.append(sup)
        return sup

    yield go
    for sup in running:
        sup.close()
    for sup in running:
        print(f"----- {sup.log_path.name} (exit {sup.proc.returncode}) -----\n{sup.log()}")


def members(app: App, count: int, what: str = "the worker processes") -> list[WorkerInfo]:
    """Wait until ``count`` registered workers share one supervisor; them, by id."""

    def found() -> list[WorkerInfo] | None:
        live = [w for w in WorkerRegistry(app.broker).list() if w.supervisor]
        return live if len(live) == count else None

    return wait_for(found, what, timeout=60)


def test_procs_run_tasks_and_are_listed_under_their_supervisor(
    app: App, start: Callable[..., Supervisor], env: dict[str, str]
) -> None:
    sup = start("--procs", "2", "-c", "2", "--grace", "2")
    workers = members(app, 2)
    supervisor = workers[0].supervisor
    assert [w.id for w in workers] == [f"{supervisor}.1", f"{supervisor}.2"]
    assert {w.supervisor for w in workers} == {supervisor}
    assert sorted(w.pid for w in workers) == children_of(sup.proc.pid)
    handles = [app.enqueue("echo", i) for i in range(40)]
    assert [h.result(timeout=60) for h in handles] == list(range(40))
    ran_by = {a.worker for h in handles for a in h.info().attempts}
    assert ran_by <= {w.id for w in workers}

    runner = CliRunner()
    cli_env = {k: env[k] for k in ("REDCRON_REDIS_URL", "REDCRON_PREFIX")}
    text = runner.invoke(main, ["workers", "list"], env=cli_env)
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[1].startswith(f"{supervisor} (2 procs) "), text.output
    assert lines[2].startswith(f"  {supervisor}.1 ") and lines[3].startswith(f"  {supervisor}.2 ")
    listed = json.loads(runner.invoke(main, ["workers", "list", "--json"], env=cli_env).output)
    assert [w["supervisor"] for w in listed] == [supervisor, supervisor]


def test_a_killed_child_is_restarted_and_its_tasks_complete(
    app: App, start: Callable[..., Supervisor]
) -> None:
    sup = start("--procs", "2", "-c", "2", "--grace", "2")
    workers = members(app, 2)
    first = workers[0]
    handles = [app.enqueue("slow", 1.0) for _ in range(12)]

    def holding() -> bool:
        return any(a.worker == first.id and a.outcome is None for h in handles
                   for a in h.info().attempts)  # fmt: skip

    wait_for(holding, f"{first.id} to hold a lease", timeout=60)
    os.kill(first.pid, signal.SIGKILL)
    again = f"{first.id}.1"
    wait_for(
        lambda: any(w.id == again for w in WorkerRegistry(app.broker).list()),
        f"{again} (the restarted child) to register",
        timeout=60,
    )
    # every task completes: the dead child's leases expire and are leased again
    assert {h.result(timeout=90) for h in handles} <= {"attempt-1", "attempt-2", "attempt-3"}
    lost = [
        a
        for h in handles
        for a in h.info().attempts
        if a.worker == first.id and a.outcome == "lost"
    ]
    assert lost, "the killed child's attempts end lost (reaped)"
    log = sup.log()
    assert "exited killed by SIGKILL" in log and "restarting in" in log, log
    ids = {w.id for w in WorkerRegistry(app.broker).list()}
    assert first.id not in ids  # its entry went with it
    assert sup.proc.poll() is None


def test_sigterm_drains_every_child_and_hands_back_prefetched_leases(
    app: App, start: Callable[..., Supervisor]
) -> None:
    sup = start("--procs", "2", "-c", "1", "--prefetch", "1", "--grace", "20")
    workers = members(app, 2)
    handles = [app.enqueue("slow", 3.0) for _ in range(6)]
    # each child: one task running, one lease held for the next
    wait_for(
        lambda: (
            sum(h.state in ("leased", "running") for h in handles) == 4
            and sum(h.state == "running" for h in handles) == 2
        ),
        "two tasks running and two prefetched",
        timeout=60,
    )
    sup.proc.send_signal(signal.SIGTERM)
    assert sup.proc.wait(60) == 0, sup.log()
    assert not any(alive(w.pid) for w in workers)
    states = sorted(h.state for h in handles)
    # the two running finished within the grace; the four others wait for a worker
    assert states.count("succeeded") == 2, states
    assert not {"leased", "running"} & set(states), states
    handed = [a for h in handles for a in h.info().attempts if a.outcome == "lost"]
    assert len(handed) == 2, handed  # one prefetched lease per child
    assert sup.log().count("handing back 1 leases that had not started") == 2, sup.log()
    assert not [w for w in WorkerRegistry(app.broker).list() if w.supervisor]


def test_a_second_sigterm_is_passed_on_and_running_leases_go_back_now(
    app: App, start: Callable[..., Supervisor]
) -> None:
    # a grace far longer than the wait below: only the second signal ends this
    sup = start("--procs", "2", "-c", "1", "--prefetch", "0", "--grace", "300")
    members(app, 2)
    handles = [app.enqueue("slow", 120.0) for _ in range(2)]
    wait_for(lambda: all(h.state == "running" for h in handles), "both tasks running", timeout=60)
    sup.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: sup.log().count("draining (grace 300s)") == 2, "both children draining")
    sup.proc.send_signal(signal.SIGTERM)
    assert sup.proc.wait(120) == 0, sup.log()
    assert sup.log().count("second signal: handing leases back now") == 2, sup.log()
    assert [h.state for h in handles] != ["running", "running"]
    assert all(a.outcome == "lost" for h in handles for a in h.info().attempts), [
        h.info().attempts for h in handles
    ]


def test_a_sigkilled_supervisor_takes_its_children_with_it(
    app: App, start: Callable[..., Supervisor]
) -> None:
    sup = start("--procs", "3", "-c", "2", "--grace", "2")
    pids = [w.pid for w in members(app, 3)]
    sup.proc.kill()
    sup.proc.wait(10)
    for pid in pids:
        wait_for(lambda pid=pid: not alive(pid), f"worker process {pid} to be gone", timeout=60)


def test_children_that_keep_dying_at_start_stop_the_supervisor(tmp_path: Path) -> None:
    # the supervisor loads the app fine; its children (argv has --supervisor) cannot
    (tmp_path / "dies_in_child.py").write_text(
        "import sys\nfrom redcron import App\n"
        "if '--supervisor' in sys.argv:\n    raise SystemExit(3)\napp = App()\n"
    )
    sup = Supervisor(
        ["-A", "dies_in_child:app", "--procs", "2"],
        {**os.environ, "PYTHONPATH": str(ROOT / "src")},
        tmp_path / "dies.log",
        tmp_path,
    )
    try:
        assert sup.proc.wait(120) == 1, sup.log()
        log = sup.log()
        assert f"{FAILED_STARTS} times in a row" in log, log
        assert log.count("error:") == 1, log
    finally:
        sup.close()


def test_the_redis_url_reaches_children_through_the_environment_only(
    start: Callable[..., Supervisor],
) -> None:
    # nothing listens on port 1: the workers retry, which is all this needs
    url = "redis://:s3cret-pw@127.0.0.1:1/0"
    sup = start("--procs", "2", "--redis", url)
    kids = wait_for(lambda: (k := children_of(sup.proc.pid)) and len(k) == 2 and k, "2 children")
    for pid in kids:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        assert b"--supervisor" in argv
        assert not any(b"s3cret" in a for a in argv), argv
        with open(f"/proc/{pid}/environ", "rb") as f:
            assert f"REDCRON_REDIS_URL={url}".encode() in f.read().split(b"\0")


def test_bench_throughput_drains_with_worker_processes(redis_url: str) -> None:
    result = CliRunner().invoke(
        main, ["bench", "throughput", "--tasks", "300", "--procs", "2", "--redis", redis_url,
               "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["workers"] == 2 and out["measured_tasks"] == 300
    for figure in ("redis_cpu_cores", "worker_cpu_cores", "machine_busy_cores"):
        assert out[figure] >= 0
    assert out["worker_cpu_us_per_task"] >= 0  # 10 ms ticks: a short drain may read 0
