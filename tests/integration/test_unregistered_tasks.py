"""Issue 29 §3: a worker never leases an instance of a task it has not
registered.  It leaves it ready, no attempt spent, for a worker that has it,
and says so once per task name at WARNING; a worker that registers the task
then runs it.  Real Redis, real (in-process) workers."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from worker_procs import thread_workers, wait_for

from redcron import App

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
