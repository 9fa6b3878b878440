"""``durability="strict"`` on the session server (no replica): acknowledging writes
wait for a replica and fail clearly when none confirms; one server needs
``appendfsync always``.  The failover with a replica is tests/integration/test_sentinel.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from worker_procs import thread_workers, wait_for  # tests/helpers

from redcron import App, NotReplicated
from redcron.errors import ConfigError


@pytest.fixture
def strict(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), durability="strict", durability_timeout=0.1)

    @a.task(name="noop")
    def noop() -> None:
        return None

    yield a
    a.close()


def test_an_enqueue_no_replica_confirms_raises_not_replicated(strict: App) -> None:
    began = time.monotonic()
    with pytest.raises(NotReplicated, match="0 of the 1 replicas asked for confirmed it") as err:
        strict.enqueue("noop")
    assert time.monotonic() - began < 2
    # the write did happen on the master: it is the confirmation that is missing,
    # and the error names the task so the caller can look it up instead of resending
    assert [(t.tenant, t.ready) for t in strict.broker.inspection.inspect()] == [("default", 1)]
    assert err.value.task_ids is not None and len(err.value.task_ids) == 1
    (task_id,) = err.value.task_ids
    assert task_id in str(err.value) and strict.get(task_id).state == "ready"


def test_a_pipelined_acknowledging_write_waits_too(strict: App) -> None:
    with pytest.raises(NotReplicated):
        strict.tasks["noop"].enqueue_many([()] * 300)  # more than one script call


def test_writes_that_acknowledge_nothing_do_not_wait(strict: App) -> None:
    assert strict.broker.leases.lease(0, "w", 1, 2000, ["default"]) == []
    assert strict.broker.server_ms() > 0


def test_strict_reloads_scripts_after_a_flush(strict: App, r: redis.Redis) -> None:
    r.script_flush()
    with pytest.raises(NotReplicated):
        strict.enqueue("noop")  # NOSCRIPT, loaded, run again, then WAIT


def test_strict_on_one_server_needs_appendfsync_always(redis_url: str, key_prefix: str) -> None:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), durability="strict", durability_replicas=0)
    try:
        with pytest.raises(ConfigError, match="appendfsync always"):
            a.broker.ensure_meta()
    finally:
        a.close()


def test_a_report_resent_after_an_unconfirmed_write_is_not_called_lost(
    redis_url: str, key_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The first report lands on the master but WAIT falls short (NotReplicated):
    the worker sends it again, Redis refuses it (the attempt already ended), and
    the worker recognises its own outcome in the record instead of warning that
    the lease was lost."""
    app = App(redis_url, prefix=key_prefix.rstrip(":"))

    @app.task(name="noop")
    def noop() -> None:
        return None

    real = app.broker.leases.report_and_lease
    unconfirmed: list[int] = []

    def first_unconfirmed(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        if args[2] and not unconfirmed:  # the first call carrying a completion
            unconfirmed.append(1)
            raise NotReplicated("written on the master, but 0 of the 1 replicas confirmed it")
        return result

    app.broker.leases.report_and_lease = first_unconfirmed  # type: ignore[method-assign]
    handle = noop.enqueue()
    caplog.set_level(logging.INFO, logger="redcron.worker.worker")
    with thread_workers(app, "strict-worker") as start:
        start(prefetch=0)
        wait_for(lambda: handle.state == "succeeded", "the task to succeed")
        wait_for(
            lambda: "results were already written" in caplog.text, "the resend to be recognised"
        )
    assert unconfirmed and handle.attempts == 1
    assert "leases were lost" not in caplog.text
    app.close()
