"""examples/celery_port.py, the Celery app ported in docs/migrate-celery.md, runs
on a real Redis with a thread worker: its chord (a DAG whose last task sums
what its upstream tasks computed) after a retried dropped connection, its
``retry_on`` (a listed exception retries, any other dead-letters at once), its
run-time fan-out and join, and its signals ported to an attempt hook."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from worker_procs import thread_workers

from redcron import TaskFailed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "celery_port.py"


@pytest.fixture
def shop(redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The example module, fresh, its App() on this test's Redis and key prefix
    (found through the environment, as in production), its jobs written."""
    monkeypatch.setenv("REDCRON_REDIS_URL", redis_url)
    monkeypatch.setenv("REDCRON_PREFIX", key_prefix.rstrip(":"))
    spec = importlib.util.spec_from_file_location("celery_port_under_test", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    module.app.apply_declared()
    try:
        yield module
    finally:
        module.app.close()


def test_the_chord_sums_upstream_results_after_a_retried_drop(shop: ModuleType) -> None:
    app = shop.app
    shop.DROPS["EUR"] = 1  # the rates service drops the first call
    job = app.jobs.get("nightly-sales")
    assert (job.cron, job.tz) == ("30 2 * * *", "Europe/Berlin")
    hook = shop.Timings()
    with thread_workers(app) as start:
        start(queues=["default", "reports"], concurrency=4, hooks=[hook])
        run_id = app.jobs.trigger("nightly-sales")
        # (120 + 80) * 0.5 + 200 * 0.5: each region's total used the rate handed on
        assert app.get(f"{run_id}/total").result(timeout=8) == 200.0
    rate = app.get(f"{run_id}/rate").info()
    assert (rate.attempt, rate.queue) == (2, "reports")  # retry_on=ConnectionError: retried
    assert app.get(f"{run_id}/eu").result() == 100.0
    # the hook saw every attempt, and the failure (task_prerun/postrun/failure)
    assert len(hook.seconds["shop.fetch_rate"]) == 2
    assert len(hook.seconds["shop.grand_total"]) == 1
    assert hook.failures["shop.fetch_rate"][0].startswith("ConnectionResetError")


def test_an_exception_not_in_retry_on_dead_letters_at_once(shop: ModuleType) -> None:
    app = shop.app
    with thread_workers(app) as start:
        start(concurrency=2)
        unknown = shop.fetch_rate.enqueue("GBP")  # KeyError: not a ConnectionError
        with pytest.raises(TaskFailed):
            unknown.result(timeout=8)
    info = unknown.info()
    assert (info.state, info.attempt) == ("dead", 1)
    assert "KeyError" in (info.error or "")


def test_a_fan_out_known_at_run_time_is_joined(shop: ModuleType) -> None:
    app = shop.app
    with thread_workers(app) as start:
        start(concurrency=2)
        run_id = app.jobs.trigger("resend-receipts")
        assert app.get(f"{run_id}/receipts_sent").result(timeout=8) == [101, 102, 103]
    assert sorted(shop.SENT) == [("alice", 101), ("alice", 103), ("bob", 102)]
    mapped = app.get(f"{run_id}/send_receipt").info().mapped
    assert mapped is not None and (mapped.count, mapped.succeeded) == (3, 3)
    assert app.get(f"{run_id}/send_receipt[1]").info().rate == "10/s"
