"""``redcron jobs`` and ``redcron runs`` against a real Redis: apply from files
and from an app, list/show, pause/resume, trigger, the runs of a job, cancel,
retry of a dead-lettered task, watch, delete, and one-line errors."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_fixtures import Invoke, app_fixture, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)
from click.testing import CliRunner, Result

from redcron import App, serde
from redcron.cli.main import main
from redcron.cli.runs import watch_run
from redcron.engine import FailItem

#: how --json prints every time: ISO-8601 UTC with milliseconds
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
RUN_KEYS = {
    "id", "job_id", "job_name", "scheduled_for", "state", "trigger", "created_at",
    "started_at", "ended_at", "total", "done", "succeeded", "failed", "cancelled",
}  # fmt: skip

JOBS = """
jobs:
  - name: nightly
    cron: "0 2 * * *"
    tz: Europe/Berlin
    tasks:
      extract: {task: t.add, args: [1, 2], retries: 0}
      transform: {task: t.add, args: [3, 4], depends_on: [extract], retries: 0}
      load:
        command: [sh, -c, "echo load"]
        depends_on: [transform]
  - name: heartbeat
    every: 30s
    tasks:
      ping: {task: t.add, args: [1, 1]}
  - name: adhoc
    tasks:
      only: {task: t.add, args: [2, 2], retries: 0}
"""


@pytest.fixture
def jobs_file(tmp_path: Path, invoke: Invoke) -> Path:
    # nightly has a command task: the tenant needs the grant
    ok(invoke("tenants", "set", "default", "--allow-commands"))
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS)
    return path


@pytest.fixture
def applied(invoke: Invoke, jobs_file: Path) -> Path:
    result = invoke("jobs", "apply", "-f", str(jobs_file), "--allow-unregistered")
    assert result.exit_code == 0, result.output
    return jobs_file


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def ok_json(result: Result) -> Any:
    return json.loads(ok(result))


def one_error_line(result: Result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    return lines[0]


def trigger(invoke: Invoke, job: str, *extra: str) -> str:
    run_id = ok(invoke("jobs", "trigger", job, *extra)).strip()
    assert "\n" not in run_id
    return run_id


def lease_one(app: App, worker: str = "w-test") -> Any:
    (lease,) = app.broker.leases.lease(0, worker, 1, 30_000, ["default", "commands"])
    app.broker.leases.start(0, worker, [(lease.iid, lease.epoch)])
    return lease


def succeed_next(app: App) -> str:
    lease = lease_one(app)
    assert app.broker.leases.complete(0, "w-test", [(lease.iid, lease.epoch, serde.dumps(3))]) == [
        True
    ]
    return str(lease.iid)


def kill_next(app: App) -> str:
    """Lease the next ready task and fail it non-retryably: it goes to the DLQ."""
    lease = lease_one(app)
    item = FailItem(lease.iid, lease.epoch, "failed", "ValueError: boom", False)
    assert [r.state for r in app.broker.leases.fail(0, "w-test", [item])] == ["dead"]
    return str(lease.iid)


# -- apply ---------------------------------------------------------------------


def test_apply_created_then_unchanged_then_updated(invoke: Invoke, jobs_file: Path) -> None:
    out = ok(invoke("jobs", "apply", "-f", str(jobs_file), "--allow-unregistered"))
    assert "created    default/nightly" in out
    assert "created    default/heartbeat" in out
    assert "3 jobs: 3 created, 0 updated, 0 unchanged" in out

    out = ok(invoke("jobs", "apply", "-f", str(jobs_file), "--allow-unregistered"))
    assert "unchanged  default/nightly" in out
    assert "0 created, 0 updated, 3 unchanged" in out

    jobs_file.write_text(JOBS.replace('"0 2 * * *"', '"30 3 * * *"'))
    rows = ok_json(invoke("jobs", "apply", "-f", str(jobs_file), "--json", "--allow-unregistered"))
    changes = {r["name"]: r["change"] for r in rows}
    assert changes == {"nightly": "updated", "heartbeat": "unchanged", "adhoc": "unchanged"}
    nightly = next(r for r in rows if r["name"] == "nightly")
    assert nightly["version"] == 2


def test_apply_validates_every_job_before_writing(
    invoke: Invoke, tmp_path: Path, jobs_file: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: broken\ntasks:\n  extract: t.add\n  load: {task: t.add, depends_on: [extrct]}\n"
    )
    result = invoke("jobs", "apply", "-f", str(jobs_file), "-f", str(bad))
    line = one_error_line(result, code=2)
    assert f"{bad}: job 'broken': tasks.load.depends_on: unknown task 'extrct'" in line
    # the good file came first, and still nothing of it was written
    assert ok_json(invoke("jobs", "list", "--tenant", "default", "--json")) == []


def test_apply_duplicate_task_key_is_an_error(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("name: d\ntasks:\n  a: t.add\n  a: t.other\n")
    line = one_error_line(invoke("jobs", "apply", "-f", str(path)), code=2)
    assert "line 4: duplicate key 'a'" in line


def test_apply_needs_files_or_an_app(invoke: Invoke) -> None:
    result = invoke("jobs", "apply")
    assert result.exit_code == 2
    assert "-f FILE" in result.output


CRON_APP = """
    from redcron import App
    app = App("redis://127.0.0.1:1/0")

    @app.cron("*/5 * * * *", tz="Europe/Berlin")
    def tidy() -> None:
        pass

    @app.cron(every="1m", tenant="acme", name="poll")
    def poll_feeds() -> None:
        pass
"""


def test_apply_declared_cron_jobs_of_an_app(
    module_dir: Callable[[str], str], invoke: Invoke
) -> None:
    name = module_dir(CRON_APP)  # its own URL is unreachable: --redis wins
    out = ok(invoke("jobs", "apply", "-A", f"{name}:app"))
    assert "created    default/tidy" in out
    assert "created    acme/poll" in out
    assert "unchanged  acme/poll" in ok(invoke("jobs", "apply", "-A", f"{name}:app"))
    (poll,) = ok_json(invoke("jobs", "list", "--tenant", "acme", "--json"))
    assert (poll["name"], poll["trigger"]) == ("poll", "every 1m")


# -- list / show / pause / resume ---------------------------------------------------


def test_list_json(invoke: Invoke, applied: Path) -> None:
    found = ok_json(invoke("jobs", "list", "--tenant", "default", "--json"))
    by_name = {j["name"]: j for j in found}
    assert set(by_name) == {"nightly", "heartbeat", "adhoc"}
    nightly = by_name["nightly"]
    assert nightly["tenant"] == "default"
    assert nightly["trigger"] == "cron 0 2 * * *"
    assert nightly["tz"] == "Europe/Berlin"
    assert ISO_UTC.match(nightly["next_fire"])
    # 02:00 in Berlin is 00:00 or 01:00 UTC
    assert nightly["next_fire"][11:] in ("00:00:00.000Z", "01:00:00.000Z")
    assert nightly["paused"] is False
    assert nightly["last_run"] is None
    assert by_name["heartbeat"]["trigger"] == "every 30s"
    assert by_name["adhoc"]["trigger"] == "manual"
    assert by_name["adhoc"]["next_fire"] is None


def test_list_text(invoke: Invoke, applied: Path) -> None:
    out = ok(invoke("jobs", "list", "--tenant", "default"))
    header = out.splitlines()[0].split()
    assert header[:4] == ["name", "tenant", "trigger", "tz"]
    assert "Europe/Berlin" in out
    assert "every 30s" in out


def test_list_without_tenant_finds_jobs_that_never_ran(invoke: Invoke, applied: Path) -> None:
    names = {j["name"] for j in ok_json(invoke("jobs", "list", "--json"))}
    assert names == {"nightly", "heartbeat", "adhoc"}


def test_show(invoke: Invoke, applied: Path) -> None:
    info = ok_json(invoke("jobs", "show", "nightly", "--json"))
    assert info["name"] == "nightly"
    assert info["spec"]["cron"] == "0 2 * * *"
    assert [d["task"] for d in info["dag"]] == ["extract", "transform", "load"]
    assert info["dag"][2] == {
        "task": "load",
        "kind": "command",
        "what": "command sh -c echo load",
        "depends_on": ["transform"],
    }
    assert ISO_UTC.match(info["next_fire"])
    assert info["recent_runs"] == []

    out = ok(invoke("jobs", "show", "nightly"))
    assert "job nightly  (tenant default)" in out
    tree = [line for line in out.splitlines() if "python t.add" in line or "command" in line]
    assert tree[0].strip().startswith("extract")
    assert "└─ transform" in tree[1]
    assert tree[2].startswith("     └─ load") or "   └─ load" in tree[2]
    assert tree[2].index("load") > tree[1].index("transform")


def test_pause_and_resume(invoke: Invoke, applied: Path) -> None:
    assert "paused default/nightly" in ok(invoke("jobs", "pause", "nightly"))
    info = ok_json(invoke("jobs", "show", "nightly", "--json"))
    assert info["paused"] is True
    assert info["next_fire"] is None

    out = ok(invoke("jobs", "resume", "nightly"))
    assert "resumed default/nightly; next fire " in out
    info = ok_json(invoke("jobs", "show", "nightly", "--json"))
    assert info["paused"] is False
    assert ISO_UTC.match(info["next_fire"])


# -- trigger and runs ---------------------------------------------------------------


def test_trigger_then_runs_list_json(invoke: Invoke, applied: Path) -> None:
    run_id = trigger(invoke, "nightly", "--param", "day=2026-11-29", "--param", "n=3")
    runs = ok_json(invoke("runs", "list", "--job", "nightly", "--json"))
    assert isinstance(runs, list)
    (run,) = runs
    assert set(run) >= RUN_KEYS
    assert run["id"] == run_id
    assert run["job_name"] == "nightly"
    assert run["trigger"] == "manual"
    assert run["state"] == "queued"
    assert ISO_UTC.match(run["scheduled_for"])
    assert ISO_UTC.match(run["created_at"])
    assert run["started_at"] is None and run["ended_at"] is None
    assert (run["total"], run["done"]) == (3, 0)
    assert run["params"] == {"day": "2026-11-29", "n": 3}

    # a paused job can still be triggered by hand; newest run first
    ok(invoke("jobs", "pause", "nightly"))
    second = trigger(invoke, "nightly")
    ids = [r["id"] for r in ok_json(invoke("runs", "list", "--job", "nightly", "--json"))]
    assert ids == [second, run_id]
    assert [r["id"] for r in ok_json(invoke("runs", "list", "--job", "nightly", "--limit", "1",
                                            "--json"))] == [second]  # fmt: skip
    info = ok_json(invoke("jobs", "show", "nightly", "--json"))
    assert info["last_run"]["state"] == "queued"
    assert [r["id"] for r in info["recent_runs"]] == [second, run_id]

    text = ok(invoke("runs", "list", "--job", "nightly"))
    assert run_id in text and "manual" in text


def test_runs_show(app: App, invoke: Invoke, applied: Path) -> None:
    run_id = trigger(invoke, "nightly")
    succeed_next(app)  # extract
    lease_one(app)  # transform now running
    info = ok_json(invoke("runs", "show", run_id, "--json"))
    assert info["id"] == run_id
    assert info["state"] == "running"
    assert ISO_UTC.match(info["started_at"])
    tasks = {t["task"]: t for t in info["tasks"]}
    assert [t["task"] for t in info["tasks"]] == ["extract", "transform", "load"]
    assert tasks["extract"]["state"] == "succeeded"
    assert tasks["extract"]["attempt"] == 1
    (attempt,) = tasks["extract"]["attempts"]
    assert attempt["ended_at"] >= attempt["started_at"]  # fixed-width ISO sorts as text
    assert tasks["transform"]["state"] == "running"
    assert tasks["transform"]["depends_on"] == ["extract"]
    assert tasks["load"]["state"] == "pending"
    assert tasks["load"]["attempt"] == 0

    out = ok(invoke("runs", "show", run_id))
    assert f"run {run_id}  job nightly (tenant default)" in out
    assert "1/3 done" in out
    rows = out.splitlines()
    assert any(line.startswith("extract") and "succeeded" in line for line in rows)
    assert any("└─ transform" in line and "running" in line for line in rows)
    assert any("└─ load" in line and "pending" in line for line in rows)


def test_runs_cancel(invoke: Invoke, applied: Path) -> None:
    run_id = trigger(invoke, "nightly")  # extract is ready, the rest pending
    out = ok(invoke("runs", "cancel", run_id))
    assert f"run {run_id}: cancelled" in out
    info = ok_json(invoke("runs", "show", run_id, "--json"))
    assert info["state"] == "cancelled"
    assert ISO_UTC.match(info["ended_at"])
    assert {t["state"] for t in info["tasks"]} == {"cancelled"}
    assert "already cancelled" in ok(invoke("runs", "cancel", run_id))


def test_runs_retry_a_dead_lettered_task(app: App, invoke: Invoke, applied: Path) -> None:
    run_id = trigger(invoke, "nightly")
    succeed_next(app)  # extract
    kill_next(app)  # transform: dead, load: upstream_failed, run failed
    info = ok_json(invoke("runs", "show", run_id, "--json"))
    assert info["state"] == "failed"
    states = {t["task"]: t["state"] for t in info["tasks"]}
    assert states == {"extract": "succeeded", "transform": "dead", "load": "upstream_failed"}
    transform = next(t for t in info["tasks"] if t["task"] == "transform")
    assert "ValueError: boom" in transform["error"]
    assert "ValueError: boom" in ok(invoke("runs", "show", run_id))

    out = ok(invoke("runs", "retry", run_id))
    assert "retried 1 task; run is running" in out
    info = ok_json(invoke("runs", "show", run_id, "--json"))
    assert info["state"] == "running"
    states = {t["task"]: t["state"] for t in info["tasks"]}
    assert states == {"extract": "succeeded", "transform": "ready", "load": "pending"}
    assert "nothing to retry" in ok(invoke("runs", "retry", run_id))

    # the retried task runs again, and the rest of the DAG with it
    succeed_next(app)
    succeed_next(app)
    (run,) = ok_json(invoke("runs", "list", "--job", "nightly", "--json"))
    assert run["state"] == "succeeded"


def test_runs_retry_a_named_task(app: App, invoke: Invoke, applied: Path) -> None:
    run_id = trigger(invoke, "nightly")
    succeed_next(app)
    kill_next(app)
    out = ok(invoke("runs", "retry", run_id, "--task", "transform"))
    assert "retried 1 task" in out
    line = one_error_line(invoke("runs", "retry", run_id, "--task", "extract"))
    assert "extract is succeeded" in line


def test_runs_watch(app: App, invoke: Invoke, applied: Path) -> None:
    run_id = trigger(invoke, "adhoc")
    lines: list[str] = []
    leases: list[Any] = []

    def sleep(_seconds: float) -> None:
        # each poll sees one step of progress: leased and started, then done
        if not leases:
            leases.append(lease_one(app))
        else:
            lease = leases[0]
            app.broker.leases.complete(0, "w-test", [(lease.iid, lease.epoch, serde.dumps(4))])

    code = watch_run(app.jobs, run_id, 0.01, 0, lines.append, sleep)
    assert code == 0
    assert lines[0] == f"run {run_id}  job adhoc (tenant default)"
    progress = [line.split("  ", 1)[1] for line in lines[1:]]
    assert progress == [
        "queued  0/1 done  only=ready",
        "running  0/1 done  only=running",
        "succeeded  1/1 done  only=succeeded",
    ]
    # an ended run: one line, exit 0 for succeeded ...
    result = invoke("runs", "watch", run_id, "--interval", "0.05")
    assert result.exit_code == 0, result.output
    assert "succeeded  1/1 done" in result.stdout

    # ... and 1 otherwise
    failed = trigger(invoke, "adhoc")
    kill_next(app)
    result = invoke("runs", "watch", failed)
    assert result.exit_code == 1
    assert "failed  1/1 done  only=dead" in result.stdout


def test_runs_watch_timeout(invoke: Invoke, applied: Path) -> None:
    run_id = trigger(invoke, "adhoc")
    result = invoke("runs", "watch", run_id, "--interval", "0.05", "--timeout", "0.2")
    assert "queued  0/1 done  only=ready" in result.stdout
    assert "still queued after 0.2s" in one_error_line(result)


# -- delete and errors ----------------------------------------------------------------


def test_delete(invoke: Invoke, applied: Path) -> None:
    run_id = trigger(invoke, "adhoc")
    assert "deleted default/adhoc" in ok(invoke("jobs", "delete", "adhoc"))
    names = {j["name"] for j in ok_json(invoke("jobs", "list", "--tenant", "default", "--json"))}
    assert names == {"nightly", "heartbeat"}
    assert "no job 'adhoc'" in one_error_line(invoke("jobs", "show", "adhoc"))
    # its runs stay in history until they expire
    assert ok_json(invoke("runs", "show", run_id, "--json"))["job_name"] == "adhoc"


@pytest.mark.parametrize(
    "args",
    [
        ("jobs", "show", "nope"),
        ("jobs", "pause", "nope"),
        ("jobs", "resume", "nope"),
        ("jobs", "trigger", "nope"),
        ("jobs", "delete", "nope"),
        ("jobs", "show", "nightly", "--tenant", "other"),
        ("runs", "list", "--job", "nope"),
    ],
)
def test_unknown_job_is_one_line(invoke: Invoke, applied: Path, args: tuple[str, ...]) -> None:
    assert "no job" in one_error_line(invoke(*args))


@pytest.mark.parametrize("command", ["show", "watch", "cancel", "retry"])
@pytest.mark.parametrize(
    "run_id", ["0-01J00000000000000000000000@m01J00000000000000000000000", "x"]
)
def test_unknown_run_is_one_line(invoke: Invoke, applied: Path, command: str, run_id: str) -> None:
    assert "no run" in one_error_line(invoke("runs", command, run_id))


def test_bad_param_is_a_usage_error(invoke: Invoke, applied: Path) -> None:
    result = invoke("jobs", "trigger", "adhoc", "--param", "novalue")
    assert result.exit_code == 2
    assert "KEY=VALUE" in result.output


def test_help_lists_the_commands() -> None:
    out = CliRunner().invoke(main, ["--help"]).stdout
    assert "jobs" in out and "runs" in out
    out = CliRunner().invoke(main, ["jobs", "--help"]).stdout
    for command in ("apply", "list", "show", "pause", "resume", "trigger", "delete"):
        assert command in out
    out = CliRunner().invoke(main, ["runs", "--help"]).stdout
    for command in ("list", "show", "watch", "cancel", "retry"):
        assert command in out


def test_apply_checks_a_backoff_against_the_settings_before_writing_anything(
    invoke: Invoke, tmp_path: Path, jobs_file: Path
) -> None:
    """A task that sets only retry_cap may fall below the deployment's retry_base
    (1 s): the error names the file, the job and the field, and nothing of the
    good file before it is written."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: nightly2\ntasks:\n  a: {task: t.add, retry_cap: 0}\n")
    result = invoke("jobs", "apply", "-f", str(jobs_file), "-f", str(bad))
    line = one_error_line(result, code=2)
    assert f"{bad}: job 'nightly2': tasks.a.retry_cap: 0 is below retry_base" in line
    assert ok_json(invoke("jobs", "list", "--tenant", "default", "--json")) == []
