"""HTTP workers are first-class: the dashboard registers them on lease (with
their token id, queues and a TTL) so they show in ``workers list``, ``GET
/v1/workers``, the Workers page and ``inspect``; they drop out after their TTL;
each reported attempt logs the worker's line; the shell example fails loudly
when nothing answers."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import flask
import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient

from redcron import App
from redcron.cli.main import main as cli
from redcron.dashboard import create_app
from redcron.engine import WorkerRegistry
from redcron.engine.inspect import queue_loads
from redcron.engine.workers import TTL_LEASES
from redcron.store.tokens import TokenStore

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "http_worker.sh"
ADMIN = "test-admin-token"
TENANT = "acme"


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5, lease_ttl=10)

    @a.task(name="hr.add", tenant=TENANT, retries=2)
    def add(x: int, y: int = 0) -> int:
        return x + y

    yield a
    a.close()


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def bearer(web: flask.Flask, token: str) -> FlaskClient:
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    client.environ_base["HTTP_USER_AGENT"] = "test-agent/1"
    return client


def worker_token(app: App, queues: tuple[str, ...] = ("default",)) -> tuple[str, str]:
    """(token id, token) of a new worker token for ``queues`` and tenant acme."""
    info, token = TokenStore(app.broker).create_worker(queues, (TENANT,))
    return info.id, token


def test_a_lease_registers_the_worker_everywhere(app: App, web: flask.Flask) -> None:
    token_id, token = worker_token(app)
    client = bearer(web, token)
    handle = app.enqueue("hr.add", 2, y=3)
    resp = client.post("/v1/worker/lease", json={"worker_id": "http-1", "capacity": {"slots": 3}})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    (item,) = resp.get_json()

    (info,) = WorkerRegistry(app.broker).list()
    assert (info.id, info.via, info.token) == ("http-1", "http", token_id)
    assert info.queues == ("default",) and info.tenants == (TENANT,)
    assert (info.slots, info.running, info.leased) == (3, 1, (handle.id,))
    assert info.host == "127.0.0.1" and info.version == "http test-agent/1"
    assert info.heartbeat_at is not None and info.expires_at is not None
    life = (info.expires_at - info.heartbeat_at).total_seconds()
    assert life == TTL_LEASES * 10  # 3 lease TTLs (wait_s 0)

    # inspect: the queue is served (the check that flagged it served by nobody)
    (load,) = [q for q in queue_loads(app.broker, [info]) if q.queue == "default"]
    assert load.served

    # GET /v1/workers and the Workers page, as an admin sees them
    admin = bearer(web, ADMIN)
    rows = admin.get("/v1/workers").get_json()["workers"]
    assert [(w["id"], w["via"], w["token"]) for w in rows] == [("http-1", "http", token_id)]
    assert [h["id"] for h in rows[0]["holding"]] == [handle.id]
    browser = web.test_client()
    browser.get("/login")
    with browser.session_transaction() as session:
        csrf = session["csrf_token"]
    browser.post("/login", data={"token": ADMIN, "csrf_token": csrf})
    page = browser.get("/workers").get_data(as_text=True)
    assert 'data-worker-id="http-1"' in page and f"token {token_id}" in page

    # redcron workers list
    listed = CliRunner().invoke(
        cli, ["workers", "list", "--json"], env=_cli_env(app), catch_exceptions=False
    )
    assert listed.exit_code == 0, listed.output
    (shown,) = json.loads(listed.output)
    assert (shown["id"], shown["via"], shown["token"]) == ("http-1", "http", token_id)
    text = CliRunner().invoke(cli, ["workers", "list"], env=_cli_env(app))
    assert f"127.0.0.1 (http, token {token_id})" in text.output

    # a heartbeat renews it with what it still runs; a report logs a line
    resp = client.post(
        "/v1/worker/heartbeat", json={"worker_id": "http-1", "lease_ids": [item["lease_id"]]}
    )
    assert resp.get_json() == {item["lease_id"]: "ok"}
    (renewed,) = WorkerRegistry(app.broker).list()
    assert (renewed.running, renewed.leased, renewed.slots) == (1, (handle.id,), 3)


def _cli_env(app: App) -> dict[str, str]:
    return {"REDCRON_REDIS_URL": app.settings.redis_url, "REDCRON_PREFIX": app.settings.prefix}


def test_another_token_cannot_take_over_a_workers_entry(app: App, web: flask.Flask) -> None:
    owner_id, owner = worker_token(app)
    _other_id, other = worker_token(app)
    first = bearer(web, owner).post("/v1/worker/lease", json={"worker_id": "http-9", "wait_s": 0})
    assert first.status_code == 200
    # a second token naming the same worker id leases, but the entry stays the owner's
    again = bearer(web, other).post(
        "/v1/worker/lease", json={"worker_id": "http-9", "wait_s": 0, "capacity": {"slots": 7}}
    )
    assert again.status_code == 200
    (info,) = WorkerRegistry(app.broker).list()
    assert (info.id, info.token, info.slots) == ("http-9", owner_id, 1)


def test_the_entry_drops_out_after_its_ttl(app: App, web: flask.Flask) -> None:
    client = bearer(web, ADMIN)
    resp = client.post("/v1/worker/lease", json={"worker_id": "http-2", "wait_s": 0})
    assert resp.get_json() == []
    registry = WorkerRegistry(app.broker)
    (info,) = registry.list()
    assert (info.via, info.token, info.running, info.tenants) == ("http", "admin", 0, ())
    assert info.expires_at is not None
    after = int(info.expires_at.timestamp() * 1000) + 1
    assert registry.count(after) == 0  # the index drops it at its expiry (server clock)
    assert registry.list(after) == []


def test_a_long_poll_lives_its_wait_longer(app: App, web: flask.Flask) -> None:
    client = bearer(web, ADMIN)
    resp = client.post("/v1/worker/lease", json={"worker_id": "http-3", "wait_s": 0.2})
    assert resp.get_json() == []
    (info,) = WorkerRegistry(app.broker).list()
    assert info.expires_at is not None and info.heartbeat_at is not None
    assert (info.expires_at - info.heartbeat_at).total_seconds() == TTL_LEASES * 10 + 0.2


def test_each_report_logs_the_workers_line(
    app: App, web: flask.Flask, caplog: pytest.LogCaptureFixture
) -> None:
    client = bearer(web, ADMIN)
    ok = app.enqueue("hr.add", 1)
    bad = app.enqueue("hr.add", 2)
    items = client.post(
        "/v1/worker/lease", json={"worker_id": "http-4", "capacity": {"slots": 2}}
    ).get_json()
    by_task = {i["task_id"]: i for i in items}
    caplog.set_level(logging.INFO, logger="redcron.worker.worker")
    client.post("/v1/worker/complete", json={"lease_id": by_task[ok.id]["lease_id"], "result": 1})
    client.post(
        "/v1/worker/fail",
        json={"lease_id": by_task[bad.id]["lease_id"], "error": "Traceback...\nValueError: no"},
    )
    lines = [r for r in caplog.records if r.name == "redcron.worker.worker"]
    done, failed = (
        next(r for r in lines if getattr(r, "task_id", "") == i) for i in (ok.id, bad.id)
    )
    assert done.getMessage().startswith(f"task hr.add {ok.id} (tenant {TENANT}, queue default)")
    assert "attempt 1/3 succeeded in " in done.getMessage()
    assert done.getMessage().endswith("(http worker http-4)")
    assert done.via == "http" and done.duration_ms >= 0
    assert "attempt 1/3 failed in " in failed.getMessage()
    assert "(http worker http-4): ValueError: no; retry in " in failed.getMessage()
    assert failed.state == "retry_wait"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(
    not (shutil.which("curl") and shutil.which("jq") and shutil.which("bash")),
    reason="the shell worker needs bash, curl and jq",
)
def test_the_shell_worker_fails_loudly_when_nothing_answers() -> None:
    api = f"http://127.0.0.1:{_closed_port()}"
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env={"PATH": "/usr/bin:/bin", "REDCRON_API": api, "REDCRON_TOKEN": "x", "ROUNDS": "3"},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"http_worker.sh: nothing answers at {api}/v1/worker "
        "(start redcron dashboard, or set REDCRON_API)"
    ]


def test_the_shell_worker_defaults_to_make_runs_port() -> None:
    assert "REDCRON_API:-http://127.0.0.1:8000}" in SCRIPT.read_text()
