"""Declared jobs (issue 9): ``app.job`` and ``@app.cron`` write nothing at
import; ``jobs apply -A`` writes them (created/updated/unchanged, ``--prune``)
after checking task names against the app's registry; ``jobs apply -f`` warns
about tasks no live worker serves; ``app.jobs.put`` writes now."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from cli_fixtures import Invoke, app_fixture, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)
from cli_output import one_error_line
from click.testing import Result
from grants import grant_commands

from redcron import App, Task
from redcron.engine.workers import Registration, WorkerRegistry
from redcron.errors import ValidationError
from redcron.model.jobs import JobSpec

APP = """
    from redcron import App, Task
    app = App({url!r}, prefix={prefix!r})

    @app.task(name="t.add")
    def add(x, y):
        return x + y

    app.job("nightly", cron={cron!r}, tenant="acme", tasks={{"a": Task("t.add", args=[1, 2])}})

    @app.cron(every="1m", tenant="acme", name="poll")
    @app.task(name="t.poll")  # not named after the module: each test writes a new one
    def poll():
        pass
"""


@pytest.fixture
def write_app(module_dir: Callable[[str], str], redis_url: str, prefix: str) -> Callable[..., str]:
    """Write the declaring module (its App on the test server and prefix),
    importable by name (module_dir restores sys.path afterwards)."""
    sys.path.insert(0, str(Path.cwd()))

    def write(cron: str = "0 2 * * *", source: str = APP) -> str:
        name = module_dir(source.format(url=redis_url, prefix=prefix, cron=cron))
        importlib.invalidate_caches()
        return name

    return write


def keys(r: redis.Redis, prefix: str) -> list[bytes]:
    return sorted(r.scan_iter(match=f"{prefix}*"))


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def job_names(app: App, tenant: str = "acme") -> set[str]:
    return {j.name for j in app.jobs.list_jobs(tenant)}


def test_importing_a_module_with_app_job_writes_nothing(
    write_app: Callable[..., str], r: redis.Redis, prefix: str
) -> None:
    name = write_app()
    before = keys(r, prefix)
    module = importlib.import_module(name)
    assert keys(r, prefix) == before
    assert set(module.app.declared_jobs) == {("acme", "nightly"), ("acme", "poll")}
    assert module.app._broker is None  # not even a connection


def test_apply_reports_created_updated_unchanged(
    write_app: Callable[..., str], invoke: Invoke
) -> None:
    out = ok(invoke("jobs", "apply", "-A", f"{write_app()}:app"))
    assert "created    acme/nightly" in out and "created    acme/poll" in out
    assert out.splitlines()[-1] == "2 jobs: 2 created, 0 updated, 0 unchanged"
    out = ok(invoke("jobs", "apply", "-A", f"{write_app(cron='0 3 * * *')}:app"))
    assert "updated    acme/nightly" in out and "unchanged  acme/poll" in out
    assert out.splitlines()[-1] == "2 jobs: 0 created, 1 updated, 1 unchanged"


def test_a_deleted_job_stays_deleted_after_a_reimport(
    write_app: Callable[..., str], invoke: Invoke, app: App
) -> None:
    name = write_app()
    ok(invoke("jobs", "apply", "-A", f"{name}:app"))
    ok(invoke("jobs", "delete", "nightly", "--tenant", "acme"))
    sys.modules.pop(name, None)
    importlib.import_module(name)  # what every worker and client process does
    ok(invoke("jobs", "list", "-A", f"{name}:app"))
    assert job_names(app) == {"poll"}
    # ...and applying the declarations again is what brings it back
    out = ok(invoke("jobs", "apply", "-A", f"{name}:app"))
    assert "created    acme/nightly" in out
    assert job_names(app) == {"nightly", "poll"}


def test_prune_deletes_only_undeclared_jobs_of_the_declaring_tenants(
    write_app: Callable[..., str], invoke: Invoke, app: App, tmp_path: Path
) -> None:
    tasks = {"a": Task("t.add")}
    # written by a client that does not register t.add (the declaring app does)
    app.jobs.put("stale", tenant="acme", tasks=tasks, every="1h", allow_unregistered=True)
    app.jobs.put("other", tenant="elsewhere", tasks=tasks, every="1h", allow_unregistered=True)
    jobs_file = tmp_path / "jobs.yaml"
    jobs_file.write_text("name: filed\ntenant: acme\ntasks:\n  a: {ref: t.add, args: [1, 2]}\n")
    name = write_app()
    out = ok(invoke("jobs", "apply", "-A", f"{name}:app"))
    assert "deleted" not in out  # no --prune: undeclared jobs stay
    assert job_names(app) == {"nightly", "poll", "stale"}
    out = ok(invoke("jobs", "apply", "-A", f"{name}:app", "-f", str(jobs_file), "--prune"))
    assert "deleted    acme/stale" in out
    assert out.splitlines()[-1] == "4 jobs: 1 created, 0 updated, 2 unchanged, 1 deleted"
    assert job_names(app) == {"nightly", "poll", "filed"}
    assert job_names(app, "elsewhere") == {"other"}


def test_prune_needs_an_app(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("name: j\ntasks:\n  a: t.add\n")
    result = invoke("jobs", "apply", "-f", str(path), "--prune")
    assert result.exit_code == 2
    assert "give -A" in result.output


UNKNOWN = """
    from redcron import App, Task
    app = App("redis://127.0.0.1:1/0")
    app.job("ok", tasks={{"a": Task(command=["true"])}})
    app.job("broken", tenant="acme", tasks={{"load": Task("etl.lod")}})

    @app.task(name="etl.load")
    def load():
        pass
"""


def test_apply_app_refuses_a_task_name_the_app_does_not_register(
    module_dir: Callable[[str], str], invoke: Invoke, r: redis.Redis, prefix: str
) -> None:
    name = module_dir(UNKNOWN.format())
    before = keys(r, prefix)
    result = invoke("jobs", "apply", "-A", f"{name}:app")
    assert result.exit_code != 0
    line = one_error_line(result)
    assert "acme/broken" in line and "'load'" in line and "'etl.lod'" in line
    assert "did you mean 'etl.load'?" in line  # the closest registered names (issue 29)
    assert keys(r, prefix) == before  # nothing written, not even the good job


def test_apply_file_with_an_app_refuses_arguments_that_do_not_fit(
    write_app: Callable[..., str], invoke: Invoke, r: redis.Redis, prefix: str, tmp_path: Path
) -> None:
    # the app at hand (-A) registers t.add(x, y): a job file's call of it must fit
    name = write_app()
    path = tmp_path / "jobs.yaml"
    path.write_text("name: j\ntenant: acme\ntasks:\n  a: {ref: t.add, args: [1], kwargs: {z: 2}}\n")
    before = keys(r, prefix)
    result = invoke("jobs", "apply", "-A", f"{name}:app", "-f", str(path))
    assert result.exit_code != 0
    line = one_error_line(result)
    assert "tasks.a.kwargs.z" in line and "add() got an unexpected keyword argument 'z'" in line
    assert keys(r, prefix) == before  # nothing written


def test_apply_file_warns_once_per_unserved_task_however_many_jobs_name_it(
    invoke: Invoke, app: App, tmp_path: Path
) -> None:
    path = tmp_path / "jobs.yaml"
    jobs = "".join(f"  - name: j{i:03d}\n    tasks: {{a: t.add, b: t.mul}}\n" for i in range(120))
    path.write_text("jobs:\n" + jobs)
    result = invoke("jobs", "apply", "-f", str(path), "--allow-unregistered")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: no live worker serves task 't.add' (120 jobs: default/j000, default/j001, "
        "default/j002 and 117 more); their runs will wait until a worker registering it starts",
        "warning: no live worker serves task 't.mul' (120 jobs: default/j000, default/j001, "
        "default/j002 and 117 more); their runs will wait until a worker registering it starts",
    ]


def test_apply_file_warns_about_tasks_no_live_worker_serves(
    invoke: Invoke, app: App, tmp_path: Path
) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("name: j\ntasks:\n  a: t.add\n  b: {command: [sh, -c, 'true']}\n")
    grant_commands(app)
    result = invoke("jobs", "apply", "-f", str(path), "--allow-unregistered")
    assert result.exit_code == 0, result.output
    assert "warning: no live worker serves task 't.add' (job default/j, task 'a')" in (
        result.stderr
    )
    assert "created    default/j" in result.stdout  # allowed: a warning, not a refusal
    registry = WorkerRegistry(app.broker)
    reg = Registration("w1", "host", 1, ["default"], [], 1, 0, ["t.add"])
    registry.publish(reg, ttl_ms=30_000)
    result = invoke("jobs", "apply", "-f", str(path))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    registry.remove("w1")


def test_jobs_put_writes_now_and_returns_the_record(app: App) -> None:
    tasks = {"a": Task("t.add")}
    # a live worker registers t.add (this App does not): jobs.put accepts it
    WorkerRegistry(app.broker).publish(
        Registration("w1", "host", 1, ["default"], [], 1, 0, ["t.add"]), ttl_ms=30_000
    )
    job = app.jobs.put("hourly", cron="0 * * * *", tz="Europe/Berlin", tenant="acme", tasks=tasks)
    assert (job.name, job.tenant, job.change) == ("hourly", "acme", "created")
    assert job.id and job.next_fire is not None
    again = app.jobs.put("hourly", cron="0 * * * *", tz="Europe/Berlin", tenant="acme", tasks=tasks)
    assert (again.id, again.change) == (job.id, "unchanged")
    spec = JobSpec(name="hourly", tenant="acme", tasks=tasks, cron="30 * * * *")
    assert app.jobs.put(spec).change == "updated"
    assert app.jobs.get("hourly", tenant="acme").change is None  # a plain read made no change
    with pytest.raises(ValidationError, match="not both"):
        app.jobs.put(spec, cron="0 * * * *")
    with pytest.raises(ValidationError, match="unknown job option"):
        app.jobs.put("x", tasks=tasks, cronn="0 * * * *")


def test_app_job_declares_validates_and_refuses_duplicates(redis_url: str) -> None:
    app = App("redis://127.0.0.1:1/0")  # unreachable: declaring must not connect
    spec = app.job("nightly", cron="0 2 * * *", tasks={"a": Task("t.add")}, overlap="allow")
    assert isinstance(spec, JobSpec) and spec.overlap == "allow"
    assert app.declared_jobs == {("default", "nightly"): spec}
    with pytest.raises(ValidationError, match="already declared"):
        app.job("nightly", every="1m", tasks={"a": Task("t.add")})
    with pytest.raises(ValidationError):
        app.job("bad", cron="not a cron", tasks={"a": Task("t.add")})
    assert app._broker is None


def test_declared_jobs_check_the_arguments_of_the_tasks_the_app_registers() -> None:
    # issue 16 item 9: arguments that do not fit the function fail every run
    app = App("redis://127.0.0.1:1/0")  # unreachable: declaring must not connect

    @app.task(name="t.add")
    def add(x: int, y: int = 0) -> int:
        return x + y

    with pytest.raises(ValidationError) as exc:
        app.job("j1", every="1m", tasks={"a": Task("t.add", args=[1], kwargs={"z": 2})})
    assert exc.value.field == "tasks.a.kwargs.z"
    assert "add() got an unexpected keyword argument 'z'" in str(exc.value)
    with pytest.raises(ValidationError) as exc:
        app.job("j2", every="1m", tasks={"a": Task("t.add")})
    assert exc.value.field == "tasks.a.args"  # x is missing
    assert app.declared_jobs == {}
    app.job("j3", every="1m", tasks={"a": Task("t.add", args=[1], kwargs={"y": 2})})

    # a task registered only later is checked when the jobs are applied
    app.job("j4", every="1m", tasks={"b": Task("t.later", args=[1, 2])})

    @app.task(name="t.later")
    def later(x: int) -> int:
        return x

    with pytest.raises(ValidationError) as exc:
        app.check_task_names(app.declared_jobs.values())
    assert exc.value.field == "tasks.b.args"

    # a cron job calls its function with no arguments: it must take none
    with pytest.raises(ValidationError) as exc:

        @app.cron(every="1m")
        def needs_one(x: int) -> None:
            return None

    assert exc.value.field == "tasks.needs_one.args"
    assert "needs_one" not in app.tasks  # refused whole: not registered either
    assert app._broker is None
