"""examples/command_tasks.py on a real worker (threads pool, ``--allow-commands``)
and Redis: exit 0, a non-zero exit code, a timeout, a DAG of commands, and the
container job, through a stand-in runtime always and through docker or podman
where one can run a container here."""

from __future__ import annotations

import functools
import importlib.util
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from grants import grant_commands
from worker_procs import thread_workers, wait_for  # tests/helpers is on sys.path

from redcron import App, TaskFailed
from redcron.model import RunRecord, TaskRecord
from redcron.worker import Worker

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "command_tasks.py"
QUEUES = ["default", "commands"]


@functools.cache
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("examples.command_tasks", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@functools.cache
def working_runtime() -> str | None:
    """docker or podman, if it runs ``true`` in the example's image here."""
    for runtime in ("docker", "podman"):
        if shutil.which(runtime) is None:
            continue
        try:
            done = subprocess.run(
                [runtime, "run", "--rm", example().IMAGE, "true"],
                capture_output=True, timeout=120,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return runtime
    return None


def make_app(redis_url: str, key_prefix: str, runtime: str) -> App:
    app = App(
        redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5, container_runtime=runtime
    )
    grant_commands(app)  # as `redcron tenants set default --allow-commands`
    for spec in example().app.declared_jobs.values():
        app.jobs.put(spec)
    return app


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    """A stand-in container runtime: prints the arguments it was given."""
    script = tmp_path / "fake-docker"
    script.write_text('#!/bin/sh\necho "runtime: $*"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.fixture
def app(redis_url: str, key_prefix: str, stand_in: Path) -> Iterator[App]:
    a = make_app(redis_url, key_prefix, str(stand_in))
    yield a
    a.close()


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "commands-example") as start:
        yield start


def run_job(app: App, name: str) -> RunRecord:
    rid = app.jobs.trigger(name)

    def ended() -> RunRecord | None:
        run = app.jobs.run(rid)
        return run if run.state in ("succeeded", "failed", "cancelled") else None

    ended_run: RunRecord = wait_for(ended, f"run {rid} ends", timeout=60)
    return ended_run


def tasks_of(run: RunRecord) -> dict[str, TaskRecord]:
    return {t.task or "": t for t in run.tasks or () if isinstance(t, TaskRecord)}


def test_exit_codes_and_the_timeout(app: App, start_worker: Callable[..., Worker]) -> None:
    start_worker(concurrency=4, allow_commands=True, queues=QUEUES)
    handles = example().enqueue_examples(app)
    hello = handles["hello"]
    assert hello.result(timeout=30) == {"exit_code": 0}
    assert app.broker.inspection.log_lines(hello.id, 1) == ["hello, command tasks"]

    exit3 = handles["exit3"]
    with pytest.raises(TaskFailed):
        exit3.result(timeout=30)
    info = exit3.info()
    assert info.state == "dead"  # retries=1: two attempts, then the DLQ
    assert [(a.outcome, a.exit_code) for a in info.attempts] == [("failed", 3), ("failed", 3)]
    assert info.exit_code == 3 and "exited with code 3" in (info.error or "")
    (entry,) = [e for e in app.broker.dlq.list("default") if e.task_id == exit3.id]
    assert entry.log_tail == ("failing",)

    slow = handles["too_slow"]
    with pytest.raises(TaskFailed):
        slow.result(timeout=30)
    info = slow.info()
    assert info.state == "dead"
    assert [a.outcome for a in info.attempts] == ["timed_out"]
    assert "killed after timeout of 1.0s" in (info.error or "")


def test_the_backup_dag_of_commands(app: App, start_worker: Callable[..., Worker]) -> None:
    start_worker(concurrency=2, allow_commands=True, queues=QUEUES)
    run = run_job(app, "nightly-backup")
    assert run.state == "succeeded"
    tasks = tasks_of(run)
    assert [tasks[n].kind for n in ("dump", "upload", "verify")] == ["command"] * 3
    assert tasks["upload"].timeout_s == 300
    assert app.broker.inspection.log_lines(tasks["dump"].id, 1) == ["dumping 3 tables"]


def test_the_container_job_through_a_stand_in_runtime(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    start_worker(concurrency=1, allow_commands=True, queues=QUEUES)
    run = run_job(app, "container-report")
    assert run.state == "succeeded"
    report = tasks_of(run)["report"]
    assert report.kind == "container" and report.cpu == 0.5
    (line,) = app.broker.inspection.log_lines(report.id, 1)
    # what a docker-compatible runtime is given
    assert line == (
        f"runtime: run --rm --cpus 0.5 --memory 64M {example().IMAGE} "
        "sh -c echo report from a container"
    )


def test_the_container_job_in_a_real_container(redis_url: str, key_prefix: str) -> None:
    runtime = working_runtime()
    if runtime is None:
        pytest.skip(f"no docker or podman here runs `true` in {example().IMAGE}")
    app = make_app(redis_url, key_prefix, runtime)
    try:
        with thread_workers(app, "container-example") as start:
            start(concurrency=1, allow_commands=True, queues=QUEUES)
            run = run_job(app, "container-report")
        assert run.state == "succeeded"
        report = tasks_of(run)["report"]
        assert app.broker.inspection.log_lines(report.id, 1) == ["report from a container"]
    finally:
        app.close()


def test_main_enqueues_the_three_and_says_how_each_ended(
    redis_url: str,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `python examples/command_tasks.py` with make run going: App() finds Redis
    monkeypatch.setenv("REDCRON_REDIS_URL", redis_url)
    monkeypatch.setenv("REDCRON_PREFIX", key_prefix.rstrip(":"))
    spec = importlib.util.spec_from_file_location("command_tasks_main", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    grant_commands(module.app)
    with thread_workers(module.app, "commands-main") as start:
        start(concurrency=4, allow_commands=True, queues=QUEUES)
        assert module.main() == 0
    lines = capsys.readouterr().out.splitlines()
    assert "hello: succeeded, attempts ['succeeded'], exit code 0" in lines
    assert "exit3: dead, attempts ['failed', 'failed'], exit code 3" in lines
    assert "too_slow: dead, attempts ['timed_out'], exit code -9" in lines
