"""Task progress on a real Redis (issue 34 §1): a Python task (plain or ``async
def``) calling ``ctx.progress`` in a loop costs a handful of writes and its
last value is stored; the HTTP worker's ``POST /v1/worker/progress`` (and the
heartbeat's ``progress``) is fenced like a report; ``GET /v1/tasks/{id}``,
``task show`` and the task and run pages show it; another tenant's token can
neither read nor write it."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import flask
import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from lease_ids import forged, parts, signed  # tests/helpers
from web_app import bearer, login
from worker_procs import chaos_app_client, thread_workers, wait_for, worker_spawner

from redcron import App, Context
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.model.jobs import Task
from redcron.store.tokens import TokenStore
from redcron.worker import Worker

TENANT, OTHER = "acme", "globex"
ADMIN = "test-admin-token"
N = 10_000
release = threading.Event()


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)

    @a.task(name="pg.loop", tenant=TENANT)
    def loop(ctx: Context, n: int) -> int:
        for i in range(n):
            ctx.progress(i + 1, n, f"row {i + 1}" if (i + 1) % 1000 == 0 else None)
        return n

    @a.task(name="pg.aloop", tenant=TENANT)
    async def aloop(ctx: Context, n: int) -> int:
        for i in range(n):
            ctx.progress(i + 1, message="batch" if i == n - 1 else None)
            if i % 1000 == 0:
                await asyncio.sleep(0)
        return n

    @a.task(name="pg.wait", tenant=TENANT)
    def wait(ctx: Context) -> None:
        ctx.progress(1, 3, "first step")
        release.wait(20)

    @a.task(name="pg.noop", tenant=TENANT)
    def noop() -> None:
        pass

    yield a
    a.close()


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "progress-worker") as start:
        yield start


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


@pytest.fixture
def client(web: flask.Flask) -> FlaskClient:
    return bearer(web, ADMIN)


def test_a_loop_of_10000_calls_makes_a_handful_of_writes_and_the_last_is_stored(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    worker = start_worker(concurrency=2, lease_ttl=60.0)  # heartbeat period: 10 s
    plain, coro = app.enqueue("pg.loop", N), app.enqueue("pg.aloop", N)
    assert plain.result(timeout=30) == N and coro.result(timeout=30) == N
    # at most: the first value at once, and the rest before the outcome, per task
    # (no flush: the keeper's tick and the report may share nothing)
    assert 1 <= worker.progress.calls <= 4
    got = plain.info().progress
    assert got is not None
    assert (got.done, got.total, got.message, got.attempt) == (N, N, f"row {N}", 1)
    assert [n.message for n in got.recent] == [f"row {i}" for i in range(1000, N + 1, 1000)]
    got = coro.info().progress
    assert got is not None and (got.done, got.total, got.message) == (N, None, "batch")


def test_a_process_pool_child_sends_its_progress_to_the_worker(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    with chaos_app_client(redis_url, key_prefix) as client_app:
        handle = client_app.enqueue("progress_loop", 5000)
        with worker_spawner(redis_url, key_prefix, tmp_path, lease_ttl=2.0) as spawn:
            spawn(concurrency=1, pool="processes", app_path="chaos_app:app")
            assert handle.result(timeout=60) == 5000
        got = handle.info().progress
        assert got is not None and (got.done, got.total, got.message) == (5000, 5000, "step 5000")
        assert [n.message for n in got.recent] == [f"step {i}" for i in range(4100, 5001, 100)]


def test_the_first_value_shows_while_the_task_runs(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    release.clear()
    start_worker(concurrency=1)
    handle = app.enqueue("pg.wait")
    try:
        wait_for(lambda: handle.info().progress is not None, "the first progress write", 10)
        got = handle.info().progress
        assert got is not None and (got.done, got.total, got.message) == (1, 3, "first step")
        assert handle.state == "running"
    finally:
        release.set()
    handle.result(timeout=10)


def _leased(client: FlaskClient, worker: str = "hw-1") -> dict[str, Any]:
    resp = client.post("/v1/worker/lease", json={"worker_id": worker})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    (item,) = resp.get_json()
    return dict(item)


def _error(resp: Any, status: int, field: str | None) -> dict[str, Any]:
    assert resp.status_code == status, resp.get_data(as_text=True)
    err: dict[str, Any] = resp.get_json()["error"]
    assert err["field"] == field, err
    return err


def test_the_http_route_is_fenced_and_checks_its_body(app: App, client: FlaskClient) -> None:
    handle = app.enqueue("pg.noop")
    item = _leased(client)
    lease_id = item["lease_id"]
    post = client.post
    for body, field in (
        ({"lease_id": lease_id}, "done"),
        ({"lease_id": lease_id, "done": -1}, "done"),
        ({"lease_id": lease_id, "done": "3"}, "done"),
        ({"lease_id": lease_id, "done": 1, "total": 0}, "total"),
        ({"lease_id": lease_id, "done": 1, "message": 5}, "message"),
        ({"lease_id": lease_id, "done": 1, "extra": 5}, "extra"),
    ):
        _error(post("/v1/worker/progress", json=body), 400, field)
    assert handle.info().progress is None
    # a stale epoch, or another worker: genuine lease ids, not the held lease
    epoch = parts(lease_id)["epoch"]
    for stale in (
        signed(app, lease_id, epoch=str(int(epoch) + 1)),
        signed(app, lease_id, worker="someone-else"),
    ):
        resp = post("/v1/worker/progress", json={"lease_id": stale, "done": 9})
        assert _error(resp, 409, "lease_id")["code"] == "lease_lost"
    assert handle.info().progress is None
    # tampered: the signature no longer fits (403), nothing written
    for bad_id in (forged(lease_id, epoch=str(int(epoch) + 1)), forged(lease_id, worker="x")):
        _error(post("/v1/worker/progress", json={"lease_id": bad_id, "done": 9}), 403, "lease_id")
    assert handle.info().progress is None
    resp = post("/v1/worker/progress", json={"lease_id": lease_id, "done": 2, "total": 4,
                                             "message": "half"})  # fmt: skip
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.get_json() == {"task_id": handle.id, "done": 2, "total": 4, "message": "half"}
    # riding on the heartbeat: stored for a lease answered ok
    told = {lease_id: {"done": 3, "total": 4}}
    beat = {"worker_id": "hw-1", "lease_ids": [lease_id], "progress": told}
    resp = post("/v1/worker/heartbeat", json=beat)
    assert resp.get_json() == {lease_id: "ok"}
    got = handle.info().progress
    assert got is not None and (got.done, got.total, got.message) == (3, 4, None)
    assert [n.message for n in got.recent] == ["half"]
    bad = {"worker_id": "hw-1", "lease_ids": [lease_id], "progress": {lease_id: {"done": -2}}}
    _error(post("/v1/worker/heartbeat", json=bad), 400, "progress.done")
    # the attempt over, the lease writes nothing more
    assert post("/v1/worker/complete", json={"lease_id": lease_id}).status_code == 200
    _error(post("/v1/worker/progress", json={"lease_id": lease_id, "done": 4}), 409, "lease_id")
    got = handle.info().progress
    assert got is not None and got.done == 3


def test_get_task_show_and_the_pages_show_it(
    app: App,
    web: flask.Flask,
    client: FlaskClient,
    redis_url: str,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handle = app.enqueue("pg.noop")
    item = _leased(client)
    for done, message in ((10, "warming up"), (40, "copying rows")):
        resp = client.post("/v1/worker/progress", json={"lease_id": item["lease_id"],
                                                        "done": done, "total": 100,
                                                        "message": message})  # fmt: skip
        assert resp.status_code == 200
    body = client.get(f"/v1/tasks/{handle.id}").get_json()
    shown = body["progress"]
    assert {k: shown[k] for k in ("done", "total", "message", "attempt")} == {
        "done": 40, "total": 100, "message": "copying rows", "attempt": 1}  # fmt: skip
    assert shown["at"].endswith("Z")
    assert [n["message"] for n in shown["recent"]] == ["warming up", "copying rows"]

    monkeypatch.setenv("REDCRON_PREFIX", key_prefix.rstrip(":"))
    cli = CliRunner()
    args = ["task", "show", handle.id, "--redis", redis_url]
    out = cli.invoke(main, args)
    assert out.exit_code == 0, out.output
    assert "40/100 (40%) copying rows (attempt 1," in out.stdout
    assert "warming up" in out.stdout
    as_json = json.loads(cli.invoke(main, [*args, "--json"]).stdout)
    assert as_json["progress"] == shown

    page = login(web, ADMIN).get(f"/tasks/{handle.id}").get_data(as_text=True)
    assert '<progress value="40" max="100">' in page and "copying rows" in page


def test_the_run_page_draws_progress_on_the_dag_node(
    app: App, web: flask.Flask, client: FlaskClient
) -> None:
    app.jobs.put("pgjob", tasks={"a": Task("pg.noop")}, tenant=TENANT)
    run_id = app.jobs.trigger("pgjob", tenant=TENANT)
    item = _leased(client)
    assert item["task_id"] == f"{run_id}/a"
    resp = client.post("/v1/worker/progress", json={"lease_id": item["lease_id"], "done": 1,
                                                    "total": 4})  # fmt: skip
    assert resp.status_code == 200
    page = login(web, ADMIN).get(f"/runs/{run_id}").get_data(as_text=True)
    assert "running \u00b7 1/4" in page
    assert 'class="progress-bar"' in page and 'width="39"' in page  # a quarter of 156


def test_another_tenants_token_can_neither_read_nor_write_it(
    app: App, web: flask.Flask, client: FlaskClient
) -> None:
    handle = app.enqueue("pg.noop")
    item = _leased(client)
    tokens = TokenStore(app.broker)
    theirs = bearer(web, tokens.create_tenant(OTHER)[1])
    assert theirs.get(f"/v1/tasks/{handle.id}").status_code == 404
    # a worker token of another tenant: the lease is not its own (403), nothing written
    _info, worker_token = tokens.create_worker(["default"], [OTHER])
    resp = bearer(web, worker_token).post(
        "/v1/worker/progress", json={"lease_id": item["lease_id"], "done": 1}
    )
    _error(resp, 403, "lease_id")
    assert handle.info().progress is None
    mine = bearer(web, tokens.create_tenant(TENANT)[1])
    client.post("/v1/worker/progress", json={"lease_id": item["lease_id"], "done": 1})
    assert mine.get(f"/v1/tasks/{handle.id}").get_json()["progress"]["done"] == 1
