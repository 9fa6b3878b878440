"""A Python client generated from the live ``GET /v1/openapi.json`` with
``openapi-python-client`` (the dev extra) is typed, and drives docs/api.md's
walkthrough: the admin sets tenant acme up and mints its token (no CLI), then
acme creates a job, triggers and reads a run, pauses and resumes it, enqueues a
task and reads its result, and a task that fails ends in the DLQ and is
replayed.  The HTTP worker protocol stands in for ``make run``'s worker, so the
test needs no process but the generator.

What it proves: every route the walkthrough uses is generated (none dropped
for a schema the generator cannot read), its body is a typed model, and its
reply parses into a model whose attributes are the fields
(``run.trigger``, ``task.result``, ``lease.lease_id``), not a dict.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import flask
import httpx
import pytest

from redcron import App, Permanent
from redcron.dashboard import create_app

ADMIN = "client-admin-token"
GENERATOR = Path(sys.executable).parent / "openapi-python-client"
PACKAGE = "redcron_api_client"


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))

    @a.task(name="walk.add", tenant="acme")
    def add(x: int, y: int = 0) -> int:
        return x + y

    @a.task(name="walk.flaky", tenant="acme", retries=0)
    def flaky(succeed_on: int = 1) -> None:
        raise Permanent("flaky")

    yield a
    a.close()


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def _generate(web: flask.Flask, out: Path) -> ModuleType:
    """The client package, generated from the document the server serves."""
    doc = web.test_client().get("/v1/openapi.json").get_json()
    (out / "openapi.json").write_text(json.dumps(doc))
    (out / "config.yaml").write_text(f"project_name_override: {PACKAGE}\npost_hooks: []\n")
    done = subprocess.run(
        [str(GENERATOR), "generate", "--path", str(out / "openapi.json"), "--meta", "none",
         "--config", str(out / "config.yaml"), "--output-path", str(out / PACKAGE)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    text = done.stdout + done.stderr
    assert done.returncode == 0, text
    # a warning is a piece of the API the client goes without (a route, a model)
    assert "Warning" not in text and "WARNING" not in text, text
    sys.path.insert(0, str(out))
    importlib.invalidate_caches()
    return importlib.import_module(PACKAGE)


@pytest.fixture
def gen(web: flask.Flask, tmp_path: Path) -> Iterator[Any]:
    package = _generate(web, tmp_path)
    try:
        yield package
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def _ops(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.api.default.{name}")


@pytest.mark.timeout(180)
def test_a_generated_client_walks_the_api_typed(web: flask.Flask, gen: Any) -> None:
    m = importlib.import_module(f"{PACKAGE}.models")
    transport = {"transport": httpx.WSGITransport(app=web)}

    def as_(token: str) -> Any:
        return gen.AuthenticatedClient(base_url="http://redcron", token=token,
                                       httpx_args=transport)  # fmt: skip

    admin = as_(ADMIN)
    # step 1: the admin sets tenant acme up
    status = _ops("set_tenant").sync(
        tenant="acme", client=admin,
        body=m.TenantSettings(weight=3, rate="20/s", max_queued=10_000, allow_commands=True),
    )  # fmt: skip
    assert isinstance(status, m.TenantStatus), status
    assert status.settings.weight == 3 and status.settings.allow_commands is True
    # step 2: acme's own token, minted through the API
    body = m.TenantTokenBody(kind="tenant", tenant="acme")
    made = _ops("create_token").sync(client=admin, body=body)
    assert isinstance(made, m.TokenCreated), made
    assert made.token.tenant == "acme" and made.token.role == m.TokenRole.OPERATOR
    acme = as_(made.secret)
    listed = _ops("list_tenants").sync(client=admin)
    assert [t.tenant for t in listed.tenants] == ["acme"]

    # a job, a manual run of it, and the run
    job = _ops("create_job").sync(client=acme, body=m.JobShortBody.from_dict(
        {"name": "hello", "every": "5m", "task": {"command": ["echo", "hi"]}}))  # fmt: skip
    assert isinstance(job, m.JobCreated), job
    assert job.tenant == "acme" and job.next_fire is not None and job.warnings == []
    triggered = _ops("trigger_job").sync(job_id=job.id, client=acme)
    run = _ops("get_run").sync(run_id=triggered.run_id, client=acme)
    assert isinstance(run, m.Run), run
    assert run.trigger == "manual" and run.state == m.RunState.QUEUED
    assert [t.name for t in run.tasks] == ["hello"]
    failed = _ops("list_runs").sync(client=acme, tenant="acme", state=m.ListRunsState.FAILED,
                                    limit=20)  # fmt: skip
    assert failed.runs == [] and failed.next_cursor is None
    assert _ops("pause_job").sync(job_id=job.id, client=acme).paused is True
    assert _ops("resume_job").sync(job_id=job.id, client=acme).next_fire is not None
    assert _ops("delete_job").sync_detailed(job_id=job.id, client=acme).status_code == 204

    # a one-off task, run by an HTTP worker (the admin token), and its result
    task = _ops("enqueue_task").sync(
        client=acme, body=m.TaskBody(name=m.TaskBodyName("walk.add"), args=[2, 3])
    )
    assert isinstance(task, m.EnqueuedTask) and task.duplicate is False, task
    (lease,) = _ops("worker_lease").sync(client=admin, body=m.WorkerLeaseBody(worker_id="walker"))
    assert isinstance(lease, m.WorkerLease) and lease.task_id == task.id
    assert lease.kind == m.WorkerLeaseKind.PYTHON and lease.args == [2, 3]
    _ops("worker_complete").sync(
        client=admin, body=m.WorkerCompleteBody.from_dict({"lease_id": lease.lease_id,
                                                           "result": 5}))  # fmt: skip
    done = _ops("get_task").sync(task_id=task.id, client=acme)
    assert isinstance(done, m.Task)
    assert done.state == m.TaskState.SUCCEEDED and done.result == 5 and done.attempt == 1
    assert done.queue == "default" and done.tenant == "acme"

    # a task that fails is dead-lettered; the tenant's DLQ, the DLQ by name, a replay
    kwargs = m.TaskBodyKwargs.from_dict({"succeed_on": 99})
    bad = _ops("enqueue_task").sync(
        client=acme, body=m.TaskBody(name=m.TaskBodyName("walk.flaky"), kwargs=kwargs)
    )
    (lease,) = _ops("worker_lease").sync(client=admin, body=m.WorkerLeaseBody(worker_id="walker"))
    _ops("worker_fail").sync(client=admin, body=m.WorkerFailBody(
        lease_id=lease.lease_id, error="flaky", retryable=False))  # fmt: skip
    dead = _ops("list_tenant_dlq").sync(tenant="acme", client=acme)
    assert [(e.task_id, e.error) for e in dead.entries] == [(bad.id, "flaky")]
    by_name = _ops("list_dlq").sync(client=acme, name="walk.flaky", limit=100)
    assert [e.tenant for e in by_name.entries] == ["acme"]
    replayed = _ops("replay_dead").sync(tenant="acme", task_id=bad.id, client=acme)
    assert isinstance(replayed, m.Task) and replayed.state == m.TaskState.READY
