"""Issue 29 §3: a worker never leases an instance of a task it has not
registered.  It leaves it ready, no attempt spent, for a worker that has it,
and says so once per task name at WARNING; a worker that registers the task
then runs it.  Real Redis, real (in-process) workers."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from worker_procs import thread_workers, wait_for

from redcron import App
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.dashboard.totals import EXTENSION as TOTALS
from redcron.engine import queue_loads
from redcron.engine.workers import Registration, WorkerRegistry
from redcron.model import QueueLoad

LOGGER = "redcron.worker.worker"


@pytest.fixture
def shop(redis_url: str, key_prefix: str) -> Iterator[App]:
    """The app that defines shop.resize (the client enqueues through it)."""
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)

    @a.task(name="shop.resize", retries=2)
    def resize(width: int) -> str:
        return f"resized to {width}"

    yield a
    a.close()


@pytest.fixture
def other(redis_url: str, key_prefix: str) -> Iterator[App]:
    """An app of the same deployment that does not define shop.resize."""
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)

    @a.task(name="shop.echo")
    def echo(x: str) -> str:
        return x

    yield a
    a.close()


def loads(app: App) -> dict[tuple[str, str], QueueLoad]:
    return {
        (q.tenant, q.queue): q for q in queue_loads(app.broker, WorkerRegistry(app.broker).list())
    }


def warnings_about(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == LOGGER and r.levelno == logging.WARNING and repr(name) in r.getMessage()
    ]


def test_a_worker_leaves_a_task_it_has_not_registered_ready_for_one_that_has(
    shop: App, other: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    first = shop.enqueue("shop.resize", 640)
    with thread_workers(other, "lacking") as start_lacking:
        start_lacking(concurrency=2)
        wait_for(lambda: warnings_about(caplog, "shop.resize"), "the worker to say it")
        # its own work still runs
        assert other.enqueue("shop.echo", "hi").result(timeout=30) == "hi"
        second = shop.enqueue("shop.resize", 320)
        time.sleep(1.5)  # past the idle worker's 1 s back-off: several lease calls
        for handle in (first, second):
            info = handle.info()
            assert info.state == "ready"
            assert info.attempt == 0 and info.attempts == ()  # no attempt spent
            assert info.budget == 0
        [line] = warnings_about(caplog, "shop.resize")  # once per task name
        assert "not registered on this worker" in line
        assert "registered: shop.echo" in line

        with thread_workers(shop, "having") as start_having:
            start_having(concurrency=2)
            assert first.result(timeout=30) == "resized to 640"
            assert second.result(timeout=30) == "resized to 320"
    # a first attempt, run by the worker that registers it
    assert [a.outcome for a in first.info().attempts] in ([], ["succeeded"])
    assert first.info().attempt == 1


def test_the_queue_health_counts_ready_work_no_live_worker_registered(
    shop: App, other: App, redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for width in (1, 2, 3):
        shop.enqueue("shop.resize", width)
    shop.enqueue("shop.resize", 4, _tenant="acme", _queue="bulk")  # bulk: no worker
    for _ in range(2):
        other.enqueue("shop.echo", "x")
    # a live worker of "default" whose app has shop.echo only (as `other`'s)
    WorkerRegistry(shop.broker).publish(
        Registration("w-echo", "h", 1, ("default",), (), 4, 0, ("shop.echo",)), 60_000
    )

    rows = loads(shop)
    assert (rows[("default", "default")].ready, rows[("default", "default")].unrunnable) == (5, 3)
    assert rows[("default", "default")].served
    assert (rows[("acme", "bulk")].served, rows[("acme", "bulk")].unrunnable) == (False, 1)

    monkeypatch.setenv("REDCRON_PREFIX", key_prefix.rstrip(":"))
    out = CliRunner().invoke(main, ["inspect", "--redis", redis_url])
    assert out.exit_code == 0, out.output
    [line] = [ln for ln in out.stdout.splitlines() if ln.split()[:2] == ["default", "default"]]
    assert "UNRUNNABLE: 3 ready instances of tasks no live worker has registered" in line
    data = json.loads(CliRunner().invoke(main, ["inspect", "--json", "--redis", redis_url]).stdout)
    assert {(q["tenant"], q["queue"]): q["unrunnable"] for q in data["queues"]} == {
        ("default", "default"): 3,
        ("acme", "bulk"): 1,
    }

    web = create_app(shop, admin_token="admin-token")
    client = web.test_client()
    client.get("/metrics")  # starts the background count
    assert web.extensions[TOTALS].wait() is not None
    text = client.get("/metrics").get_data(as_text=True)
    assert 'redcron_queue_unrunnable{queue="default"} 3.0' in text
    assert 'redcron_queue_unrunnable{queue="bulk"} 1.0' in text

    # the Workers page says where, from the same background count
    assert client.get("/login").status_code == 200
    with client.session_transaction() as session:
        csrf = session["csrf_token"]
    client.post("/login", data={"token": "admin-token", "csrf_token": csrf})
    page = client.get("/workers").get_data(as_text=True)
    assert "Ready work no live worker can run" in page
    assert re.search(
        r'<tr data-tenant="default" data-queue="default">.*?<td class="num">3</td>', page, re.S
    )

    # a worker that registers shop.resize: nothing left unrunnable on default
    WorkerRegistry(shop.broker).publish(
        Registration("w-shop", "h", 2, ("default",), (), 4, 0, ("shop.resize",)), 60_000
    )
    rows = loads(shop)
    assert rows[("default", "default")].unrunnable == 0
