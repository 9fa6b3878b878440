"""``redcron worker --procs N`` without Redis or processes: the restart policy,
the children's argv (the supervisor's options and the Redis URL left out) and
the grouping of ``workers list``."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from redcron.cli.main import main
from redcron.cli.worker import worker
from redcron.cli.worker_procs import (
    FAILED_STARTS,
    RESTART_MIN_S,
    STABLE_S,
    Child,
    Restarts,
    child_argv,
    exit_text,
)
from redcron.cli.workers import grouped, workers_table
from redcron.model import WorkerInfo


def test_young_deaths_back_off_doubling_then_give_up() -> None:
    policy = Restarts()
    delays = [policy.after_exit(0.3) for _ in range(FAILED_STARTS)]
    assert delays[:-1] == [RESTART_MIN_S * 2**i for i in range(FAILED_STARTS - 1)]
    assert delays[-1] is None


def test_a_stable_run_starts_the_count_over() -> None:
    policy = Restarts()
    for _ in range(FAILED_STARTS - 1):
        assert policy.after_exit(1.0) is not None
    assert policy.after_exit(STABLE_S + 1) == RESTART_MIN_S
    assert policy.after_exit(1.0) == RESTART_MIN_S  # young again: the first of a new count


def test_exit_text_names_the_signal() -> None:
    assert exit_text(3) == "with code 3"
    assert exit_text(-9) == "killed by SIGKILL"
    assert exit_text(-200) == "killed by signal 200"


def test_child_ids_follow_the_supervisor_and_the_restarts() -> None:
    child = Child(2, "host:1:ABCDEF")
    assert child.id == "host:1:ABCDEF.2"
    child.restarts = 3
    assert child.id == "host:1:ABCDEF.2.3"


def _argv(*args: str) -> list[str]:
    return child_argv(worker.make_context("worker", list(args)))


def test_child_argv_passes_what_was_given_and_not_the_supervisors_own() -> None:
    argv = _argv(
        "-A", "tasks:app", "--procs", "3", "-c", "4", "-Q", "a,b", "--allow-commands",
        "--allow-program", "/bin/true", "--allow-program", "rsync", "--grace", "2",
        "--redis", "redis://:s3cret@host:6379/0", "--name", "x", "--loglevel", "warning",
    )  # fmt: skip
    assert argv == [
        "--app", "tasks:app", "--concurrency", "4", "--queues", "a,b", "--allow-commands",
        "--allow-program", "/bin/true", "--allow-program", "rsync", "--grace", "2.0",
        "--loglevel", "warning",
    ]  # fmt: skip
    assert not any("s3cret" in a for a in argv)


def test_child_argv_leaves_defaults_to_the_child() -> None:
    assert _argv("--procs", "2") == []


def test_bad_procs_values_name_the_flag() -> None:
    runner = CliRunner()
    for value in ("0", "-1", "65", "two"):
        result = runner.invoke(main, ["worker", "--procs", value])
        assert result.exit_code == 2, result.output
        assert "'--procs'" in result.output, result.output


def _info(wid: str, supervisor: str = "", running: int = 0) -> WorkerInfo:
    return WorkerInfo(
        id=wid, host="h", pid=1, queues=("default",), tenants=(), slots=4, running=running,
        tasks=("t",), version="1", started_at=None, heartbeat_at=None, expires_at=None,
        supervisor=supervisor,
    )  # fmt: skip


def test_workers_list_groups_the_processes_of_a_supervisor() -> None:
    found = [
        _info("s:9:X.2", "s:9:X", running=1),
        _info("alone"),
        _info("s:9:X.1", "s:9:X", running=2),
        _info("zeta"),
    ]
    groups = grouped(found)
    assert [(sup, [w.id for w in ws]) for sup, ws in groups] == [
        ("", ["alone"]),
        ("s:9:X", ["s:9:X.1", "s:9:X.2"]),
        ("", ["zeta"]),
    ]
    lines = workers_table(found).splitlines()
    assert lines[1].startswith("alone ")
    assert lines[2].startswith("s:9:X (2 procs) ") and " 3/8 " in lines[2]
    assert lines[3].startswith("  s:9:X.1 ") and lines[4].startswith("  s:9:X.2 ")
    assert lines[5].startswith("zeta ")


def test_a_bad_app_path_fails_once_before_any_child_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    started: list[object] = []
    monkeypatch.setattr(Child, "start", lambda *a: started.append(a))
    result = CliRunner().invoke(main, ["worker", "-A", "no_such_module_x:app", "--procs", "2"])
    assert result.exit_code == 2, result.output
    assert result.output.count("error:") == 1 and "no_such_module_x" in result.output
    assert not started
