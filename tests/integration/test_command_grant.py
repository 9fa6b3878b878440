"""Tenant commands and the trust boundary (issue 16 item 4, DESIGN §8a).

A tenant token created a command job, and a worker with ``--allow-commands``
ran it with the worker's whole environment: the job printed the Redis URL and
read every tenant's keys.  Now command and container tasks need the admin's
grant (tenant setting ``allow_commands``), refused at every door when it is
missing (the scripts check it), checked again at lease time (a revoke keeps
queued work from running), and they run with a clean environment.  A worker
can be confined to some tenants (``--tenants``).
"""

from __future__ import annotations

import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import flask
import pytest
import redis
from click.testing import CliRunner
from flask.testing import FlaskClient
from grants import grant_commands
from redis_dump import is_action_stream
from worker_procs import thread_workers, wait_for  # tests/helpers is on sys.path

from redcron import App
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.engine.workers import WorkerRegistry
from redcron.errors import ConfigError, Forbidden, Rejected
from redcron.keys import shard_of
from redcron.model.jobs import Task, job_spec
from redcron.store.tokens import TokenStore
from redcron.worker import Worker

TENANT = "acme"
OTHER = "globex"
ADMIN = "admin-token-for-grant-tests"
#: what the worker's environment holds that a command must never see
SECRET_URL_PASSWORD = "hunter2-url-password"
SECRET_TOKEN = "secret-token-of-the-worker"
TERMINAL = ("succeeded", "dead", "failed", "cancelled")
#: a command that prints its whole environment, one NAME=value per line
PRINT_ENV = "import os\nfor k, v in sorted(os.environ.items()): print(f'{k}={v}')"


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    """A stand-in container runtime that prints its own environment."""
    script = tmp_path / "fake-docker"
    script.write_text('#!/bin/sh\necho "runtime: $*"\nenv\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.fixture
def app(redis_url: str, key_prefix: str, runtime: Path) -> Iterator[App]:
    a = App(
        redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5, container_runtime=str(runtime)
    )

    @a.task(name="grant.add")
    def add(x: int, y: int = 0) -> int:
        return x + y

    yield a
    a.close()


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "grant-worker") as start:
        yield start


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def client_with(web: flask.Flask, token: str) -> FlaskClient:
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


@pytest.fixture
def admin(web: flask.Flask) -> FlaskClient:
    return client_with(web, ADMIN)


@pytest.fixture
def tenant(web: flask.Flask, app: App) -> FlaskClient:
    return client_with(web, TokenStore(app.broker).create_tenant(TENANT)[1])


def ended(app: App, task_id: str) -> Any:
    return wait_for(
        lambda: (i := app.get(task_id).info()).state in TERMINAL and i,
        f"task {task_id} to end",
        timeout=20,
    )


def forbidden(resp: Any, tenant: str = TENANT) -> str:
    """The 403 in the error shape; its message names the setting and the grant."""
    assert resp.status_code == 403, resp.get_data(as_text=True)
    err = resp.get_json()["error"]
    assert set(err) == {"code", "message", "field"} and err["code"] == "forbidden"
    message: str = err["message"]
    assert "allow_commands" in message
    assert f"redcron tenants set {tenant} --allow-commands" in message
    return message


def keys_of(r: redis.Redis, app: App) -> set[bytes]:
    """The keys of the test's shards (every tenant key has a hash tag), but the
    audit trail's (a refused request is recorded there)."""
    keys = r.scan_iter(match=f"{app.broker.keys.prefix}:{{s*", count=1000)
    return {k for k in keys if not is_action_stream(k)}


# -- the grant, at every door that writes ---------------------------------------------


def test_a_tenant_token_cannot_create_command_jobs_without_the_grant(
    app: App, admin: FlaskClient, tenant: FlaskClient, r: redis.Redis
) -> None:
    before = keys_of(r, app)
    short = {"name": "leak", "every": "30s", "task": {"command": ["sh", "-c", "env"]}}
    forbidden(tenant.post("/v1/jobs", json=short))
    dag = {
        "name": "dag",
        "tasks": {"a": {"task": "grant.add", "args": [1]}, "b": {"image": "alpine:3"}},
    }
    assert "task b is a container" in forbidden(tenant.post("/v1/jobs", json=dag))
    assert keys_of(r, app) == before  # nothing written
    assert tenant.get("/v1/jobs").get_json()["jobs"] == []
    # a tenant cannot grant itself
    resp = tenant.put(f"/v1/tenants/{TENANT}", json={"allow_commands": True})
    assert resp.status_code == 403 and "admin" in resp.get_json()["error"]["message"]
    # Python tasks never needed it
    assert (
        tenant.post(
            "/v1/jobs", json={"name": "py", "task": {"name": "grant.add", "args": [1]}}
        ).status_code
        == 201
    )

    resp = admin.put(f"/v1/tenants/{TENANT}", json={"allow_commands": True})
    assert resp.status_code == 200 and resp.get_json()["settings"]["allow_commands"] is True
    assert tenant.get(f"/v1/tenants/{TENANT}").get_json()["settings"]["allow_commands"] is True
    assert tenant.post("/v1/jobs", json=short).status_code == 201
    # granted to one tenant only
    other = {**short, "tenant": OTHER}
    forbidden(admin.post("/v1/jobs", json=other), OTHER)
    bad = admin.put(f"/v1/tenants/{TENANT}", json={"allow_commands": "yes"})
    assert bad.status_code == 400 and bad.get_json()["error"]["field"] == "allow_commands"


def test_the_app_and_the_admin_are_refused_too(app: App, r: redis.Redis) -> None:
    # the check is in the scripts that write tasks: no door goes around it
    before = keys_of(r, app)
    with pytest.raises(Forbidden, match="allow_commands") as info:
        app.enqueue_command(["sh", "-c", "env"], tenant=TENANT)
    assert isinstance(info.value, Rejected)
    assert f"redcron tenants set {TENANT} --allow-commands" in str(info.value)
    with pytest.raises(Forbidden, match="task sh is a command"):
        app.jobs.put("j", tasks={"py": Task("grant.add"), "sh": Task(command=["true"])},
                     tenant=TENANT)  # fmt: skip
    # a batch of jobs is checked before any of them is written
    ok = job_spec("ok", tasks={"t": Task("grant.add")}, tenant=TENANT)
    cmd = job_spec("cmd", tasks={"t": Task(image="alpine:3")}, tenant=TENANT)
    with pytest.raises(Forbidden, match="job cmd, task t is a container"):
        app.jobs.put_many([ok, cmd])
    assert keys_of(r, app) == before
    # Python tasks never needed the grant
    assert app.enqueue("grant.add", 1, _tenant=TENANT).info().state == "ready"
    assert keys_of(r, app) != before  # (and keys_of does see what is written)


def test_a_batch_of_many_calls_is_refused_before_its_first_write(app: App, r: redis.Redis) -> None:
    # more than one enqueue call: the grant is checked with the admission, so the
    # first 256 Python rows are not written before the command row is refused
    add = app.tasks["grant.add"]
    rows = [app._row("grant.add", "python", [[i], {}], add.options, {"_tenant": TENANT})
            for i in range(300)]  # fmt: skip
    command = app._row(
        "redcron.command", "command", {"argv": ["true"]}, add.options, {"_tenant": TENANT}
    )
    before = keys_of(r, app)
    with pytest.raises(Forbidden):
        app.broker.enqueuer.enqueue([*rows, command])
    assert keys_of(r, app) == before
    grant_commands(app, TENANT)
    assert app.broker.enqueuer.enqueue([*rows, command]) == 301


def test_the_cli_grants_shows_and_revokes(app: App, tmp_path: Path, redis_url: str) -> None:
    runner = CliRunner()
    env = {"REDCRON_PREFIX": app.broker.keys.prefix.rstrip(":")}

    def cli(*args: str) -> Any:
        return runner.invoke(main, [*args, "--redis", redis_url], env=env)

    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(f"name: sh\ntenant: {TENANT}\ntasks:\n  a: {{command: [sh, -c, env]}}\n")
    res = cli("jobs", "apply", "-f", str(jobs))
    assert res.exit_code != 0
    assert "allow_commands" in res.output
    assert f"redcron tenants set {TENANT} --allow-commands" in res.output
    assert "Traceback" not in res.output
    res = cli("tenants", "set", TENANT, "--allow-commands")
    assert res.exit_code == 0, res.output
    assert "commands       granted" in res.output
    assert cli("jobs", "apply", "-f", str(jobs)).exit_code == 0
    assert "granted" in cli("tenants", "show", TENANT).output
    assert app.tenants.get(TENANT).allow_commands is True
    res = cli("tenants", "set", TENANT, "--no-allow-commands")
    assert res.exit_code == 0 and "not granted" in res.output
    assert app.tenants.get(TENANT).allow_commands is False


# -- checked again at lease time ------------------------------------------------------


def test_a_revoked_grant_keeps_queued_commands_from_running(
    app: App, start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    touch = ["sh", "-c", f"touch {marker}"]
    grant_commands(app, TENANT)
    one_off = app.enqueue_command(touch, tenant=TENANT, retries=3)
    app.jobs.put(
        "chain",
        tasks={"py": Task("grant.add", args=[1]), "sh": Task(command=touch, depends_on=["py"])},
        tenant=TENANT,
    )
    grant_commands(app, TENANT, granted=False)  # revoked while the work waits
    # re-applying the unchanged job is not refused (a beat does at every start)...
    assert (
        app.jobs.put(
            "chain",
            tasks={"py": Task("grant.add", args=[1]), "sh": Task(command=touch, depends_on=["py"])},
            tenant=TENANT,
        ).change
        == "unchanged"
    )
    run_id = app.jobs.trigger("chain", tenant=TENANT)
    start_worker(queues=["default", "commands"], allow_commands=True)

    info = ended(app, one_off.id)
    assert info.state == "dead" and not info.attempts  # never handed to a worker
    assert "allow_commands" in (info.error or "")
    assert f"redcron tenants set {TENANT} --allow-commands" in (info.error or "")
    shell = ended(app, f"{run_id}/sh")
    assert shell.state == "dead" and ended(app, f"{run_id}/py").state == "succeeded"
    assert not marker.exists()
    dead = {e.task_id: e for e in app.broker.dlq.list(TENANT)}
    assert dead[one_off.id].outcome == "not_granted"
    assert dead[f"{run_id}/sh"].outcome == "not_granted"
    wait_for(lambda: app.jobs.run(run_id).state == "failed", "the run to fail")


def test_granted_again_before_promote_it_is_made_ready_again(app: App) -> None:
    grant_commands(app, TENANT)
    handle = app.enqueue_command(["true"], tenant=TENANT)
    shard = shard_of(TENANT, app.broker.shards)
    grant_commands(app, TENANT, granted=False)
    assert app.broker.leases.lease(shard, "w1", 10, 30_000, ["commands"]) == []
    assert handle.info().state == "retry_wait"  # off its stream, waiting for promote
    grant_commands(app, TENANT)
    app.broker.maintenance.promote(shard)
    assert handle.info().state == "ready"
    [lease] = app.broker.leases.lease(shard, "w1", 10, 30_000, ["commands"])
    assert lease.iid == handle.id


# -- a clean environment ---------------------------------------------------------------


@pytest.fixture
def worker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a worker's environment holds: its Redis URL, tokens, other secrets."""
    monkeypatch.setenv("REDCRON_REDIS_URL", f"redis://:{SECRET_URL_PASSWORD}@db.internal:6379/0")
    monkeypatch.setenv("REDCRON_ADMIN_TOKEN", SECRET_TOKEN)
    monkeypatch.setenv("REDCRON_TOKEN", SECRET_TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-of-the-worker")
    monkeypatch.setenv("PASSED_ON_PURPOSE", "passed-value")


def printed_env(app: App, task_id: str) -> list[str]:
    info = ended(app, task_id)
    assert info.state == "succeeded", info.error
    return app.broker.inspection.log_lines(task_id, 1, count=500)


def assert_clean(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert not [line for line in lines if line.startswith("REDCRON_")], text
    for secret in (SECRET_URL_PASSWORD, SECRET_TOKEN, "aws-secret-of-the-worker", "redis://"):
        assert secret not in text
    assert any(line.startswith("PATH=") for line in lines)


@pytest.mark.usefixtures("worker_env")
def test_a_command_runs_with_a_clean_environment(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    grant_commands(app, TENANT)
    start_worker(queues=["commands"], allow_commands=True)
    handle = app.enqueue_command(
        [sys.executable, "-c", PRINT_ENV], tenant=TENANT, env={"FROM_SPEC": "on-purpose"}
    )
    lines = printed_env(app, handle.id)
    assert_clean(lines)
    assert "FROM_SPEC=on-purpose" in lines  # the spec's env: how a job passes a value
    assert "PASSED_ON_PURPOSE=passed-value" not in lines  # only when the worker passes it
    names = {line.split("=", 1)[0] for line in lines}
    assert names <= {"PATH", "HOME", "LANG", "FROM_SPEC", "LC_CTYPE"}, names


@pytest.mark.usefixtures("worker_env")
def test_a_worker_passes_a_variable_only_when_told_to(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    grant_commands(app, TENANT)
    start_worker(queues=["commands"], allow_commands=True, pass_env=["PASSED_ON_PURPOSE"])
    handle = app.enqueue_command([sys.executable, "-c", PRINT_ENV], tenant=TENANT)
    lines = printed_env(app, handle.id)
    assert_clean(lines)
    assert "PASSED_ON_PURPOSE=passed-value" in lines


@pytest.mark.usefixtures("worker_env")
def test_a_container_runtime_gets_the_clean_environment_too(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    grant_commands(app, TENANT)
    start_worker(queues=["commands"], allow_commands=True)
    app.jobs.put("img", tasks={"c": Task(image="alpine:3", env={"FROM_SPEC": "1"})}, tenant=TENANT)
    run_id = app.jobs.trigger("img", tenant=TENANT)
    lines = printed_env(app, f"{run_id}/c")
    assert_clean(lines)
    assert "runtime: run --rm -e FROM_SPEC=1 alpine:3" in lines  # into the container
    assert "FROM_SPEC=1" not in lines  # not the runtime's own environment
    assert "PASSED_ON_PURPOSE=passed-value" not in lines  # not passed unless asked


def test_the_workers_own_settings_cannot_be_passed(app: App) -> None:
    with pytest.raises(ConfigError, match="REDCRON_"):
        Worker(app, queues=["commands"], allow_commands=True, pass_env=["REDCRON_REDIS_URL"])
    with pytest.raises(ConfigError, match="pass_env"):
        Worker(app, queues=["commands"], allow_commands=True, pass_env=["A=B"])


# -- workers confined to tenants ---------------------------------------------------------


def test_a_worker_with_tenants_takes_only_their_work(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    grant_commands(app, TENANT, OTHER)
    theirs = app.enqueue("grant.add", 2, _tenant=OTHER)
    their_cmd = app.enqueue_command(["true"], tenant=OTHER)
    mine = app.enqueue("grant.add", 1, _tenant=TENANT)
    my_cmd = app.enqueue_command(["true"], tenant=TENANT)
    w = start_worker(queues=["default", "commands"], allow_commands=True, tenants=[TENANT])
    assert mine.result(timeout=20) == 1
    assert ended(app, my_cmd.id).state == "succeeded"
    assert theirs.info().state == "ready" and their_cmd.info().state == "ready"
    [reg] = [x for x in WorkerRegistry(app.broker).list() if x.id == w.id]
    assert list(reg.tenants) == [TENANT]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_command_worker_process_cannot_be_read_by_its_commands() -> None:
    # `redcron worker --allow-commands` makes itself non-dumpable: a command of the
    # same OS user cannot read /proc/<worker>/environ (where redcron up puts the
    # Redis URL) nor attach to it.  Checked in a child process: PR_GET_DUMPABLE.
    code = (
        "import ctypes; from redcron.lifeline import forbid_inspection; "
        "assert forbid_inspection(); print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
