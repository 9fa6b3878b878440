"""A real worker against real Redis: retries, timeouts, cancel, DLQ, ctx, output capture.

Most tests run the worker in a thread of the test process (fast); output
capture replaces ``sys.stdout``, which pytest also does, so the capture test
runs the worker as a subprocess, as ``redcron worker`` would.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import chaos_app  # tests/apps and tests/helpers are put on sys.path by tests/conftest.py
import pytest
import redis
from worker_procs import (
    WorkerProc,
    chaos_app_client,
    outcomes,
    thread_workers,
    wait_for,
    worker_spawner,
)

from redcron import App, TaskFailed
from redcron.worker import Worker


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    with chaos_app_client(redis_url, key_prefix) as a:
        yield a


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    """Start in-process workers (threads pool); they are stopped and joined afterwards."""
    with thread_workers(app, "test-worker") as start:
        yield start


@pytest.fixture
def spawn_worker(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> Iterator[Callable[..., WorkerProc]]:
    """Start worker subprocesses running ``chaos_app``; stopped in teardown."""
    with worker_spawner(redis_url, key_prefix, tmp_path, lease_ttl=2.0, grace=1.0) as start:
        yield start


# -- timeouts -------------------------------------------------------------------


def test_thread_pool_timeout_abandons_thread_and_keeps_serving(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    start_worker(concurrency=1)
    runaway = app.enqueue("slow", 10, True, _timeout=1, _retries=0)
    wait_for(lambda: runaway.state == "running", "the runaway task to run")
    t0 = time.monotonic()
    after = app.enqueue("echo", "next")
    # One slot, still sleeping in the abandoned thread: only its replacement can
    # serve this well before the runaway's 10 s are up.
    assert after.result(timeout=30) == "next"
    assert time.monotonic() - t0 < 8.5
    info = runaway.info()
    assert info["state"] == "dead"
    assert outcomes(info) == ["timed_out"]
    assert "timed out" in info["error"]
    with pytest.raises(TaskFailed) as exc:
        runaway.result(timeout=1)
    assert exc.value.state == "dead"


# -- retries, Retry(delay), Permanent, DLQ and replay ----------------------------


def test_retry_with_backoff_succeeds_on_third_attempt(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    start_worker(concurrency=2)
    h = app.enqueue("flaky", 3)
    assert h.result(timeout=30) == 3
    info = h.info()
    assert outcomes(info) == ["failed", "failed", "succeeded"]
    assert "attempt 2 fails" in info["attempts"][1]["error"]
    # backoff goes through the timer set (retry_wait), then back to ready
    assert app.broker.stats().get("retries", 0) >= 2


def test_retry_delay_is_honoured(app: App, start_worker: Callable[..., Worker]) -> None:
    start_worker(concurrency=2)
    h = app.enqueue("retry_later", 1.0)
    assert h.result(timeout=30) == 2
    info = h.info()
    first, second = info["attempts"]
    assert first["outcome"] == "failed" and "Retry: not yet" in first["error"]
    assert second["outcome"] == "succeeded"
    # server-clock ms: the retry was not leased before the requested delay
    assert int(second["leased"]) - int(first["ended"]) >= 1000


def test_permanent_goes_straight_to_dlq(app: App, start_worker: Callable[..., Worker]) -> None:
    start_worker(concurrency=2)
    h = app.enqueue("permanent")  # declared with retries=5
    with pytest.raises(TaskFailed) as exc:
        h.result(timeout=30)
    assert exc.value.state == "dead"
    info = h.info()
    assert outcomes(info) == ["failed"]
    assert "Permanent: bad input" in info["error"]
    entries = [e for e in app.broker.dlq_list() if e["i"] == h.id]
    assert len(entries) == 1
    assert entries[0]["attempts"] == "1"


def test_dlq_after_max_attempts_then_replay_succeeds(
    app: App, start_worker: Callable[..., Worker], r: redis.Redis
) -> None:
    start_worker(concurrency=2)
    marker = chaos_app.rec_key(app, "marker", "replay")
    h = app.enqueue("needs_marker", marker)  # retries=1: two attempts
    with pytest.raises(TaskFailed):
        h.result(timeout=30)
    info = h.info()
    assert info["state"] == "dead"
    assert outcomes(info) == ["failed", "failed"]
    entries = [e for e in app.broker.dlq_list() if e["i"] == h.id]
    assert len(entries) == 1 and entries[0]["attempts"] == "2"
    assert "is not set" in entries[0]["error"]

    r.set(marker, "1")
    assert app.broker.dlq_replay([h.id]) == 1
    assert h.result(timeout=30) == "replayed"
    assert outcomes(h.info()) == ["failed", "failed", "succeeded"]
    assert [e for e in app.broker.dlq_list() if e["i"] == h.id] == []
    assert app.broker.dlq_replay([h.id]) == 0  # not dead any more: left alone


# -- cancel of work that is not running -----------------------------------------


def test_cancel_ready_and_scheduled_work_never_runs(
    app: App, start_worker: Callable[..., Worker], r: redis.Redis
) -> None:
    ready = app.enqueue("mark", "ready-one")
    later = app.enqueue("mark", "later-one", _countdown=0.5)
    assert ready.cancel() == "cancelled"
    assert later.cancel() == "cancelled"
    assert ready.state == "cancelled" and later.state == "cancelled"

    start_worker(concurrency=2)
    time.sleep(0.6)  # past the countdown: promote would have moved it
    after = app.enqueue("mark", "after")
    assert after.result(timeout=30) == "after"
    for h, name in ((ready, "ready-one"), (later, "later-one")):
        info = h.info()
        assert info["state"] == "cancelled"
        assert info["attempts"] == []
        assert r.get(chaos_app.rec_key(app, "mark", name)) is None
        with pytest.raises(TaskFailed) as exc:
            h.result(timeout=1)
        assert exc.value.state == "cancelled"
    assert ready.cancel() == "cancelled"  # idempotent


# -- ctx and output capture --------------------------------------------------------


def test_ctx_and_output_capture(
    app: App, spawn_worker: Callable[..., WorkerProc], r: redis.Redis
) -> None:
    proc = spawn_worker(concurrency=2)
    h = app.enqueue("probe")
    assert h.result(timeout=30) == "probed"
    seen = [json.loads(x) for x in r.lrange(chaos_app.rec_key(app, "probe", h.id), 0, -1)]
    assert [s["attempt"] for s in seen] == [1, 2]
    assert {s["task_id"] for s in seen} == {h.id}
    assert seen[0]["idem_key"] == seen[1]["idem_key"] != ""
    assert [s["once"] for s in seen] == [True, False]

    for attempt in (1, 2):
        lines = app.broker.log_lines(h.id, attempt)
        assert f"print from attempt {attempt}" in lines
        assert f"INFO chaos_app: log from attempt {attempt}" in lines
        assert f"WARNING chaos_app: warning from attempt {attempt}" in lines

    dead = app.enqueue("noisy_fail")
    with pytest.raises(TaskFailed):
        dead.result(timeout=30)
    assert "noisy failure" in dead.info()["error"]
    (entry,) = [e for e in app.broker.dlq_list() if e["i"] == dead.id]
    tail = entry["tail"].splitlines()
    assert tail[:3] == ["noisy line 0", "noisy line 1", "noisy line 2"]
    assert "WARNING chaos_app: about to fail" in tail
    assert "noisy failure" in entry["error"]
    assert proc.poll() is None


def test_process_pool_captures_output(app: App, spawn_worker: Callable[..., WorkerProc]) -> None:
    spawn_worker(concurrency=1, pool="processes", app_path="chaos_app:app")
    h = app.enqueue("probe")
    assert h.result(timeout=30) == "probed"
    for attempt in (1, 2):
        lines = app.broker.log_lines(h.id, attempt)
        assert f"print from attempt {attempt}" in lines
        assert f"WARNING chaos_app: warning from attempt {attempt}" in lines


# -- throughput sanity ----------------------------------------------------------------


def test_idle_worker_picks_up_and_many_tasks_complete(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    start_worker(concurrency=8)
    time.sleep(1.2)  # let the worker go idle (blocked on its wake list)
    assert app.enqueue("echo", {"a": [1, 2]}).result(timeout=10) == {"a": [1, 2]}

    handles = app.tasks["echo"].enqueue_many([(i,) for i in range(500)])
    assert len({h.id for h in handles}) == 500
    assert [h.result(timeout=60) for h in handles] == list(range(500))
    states = {h.state for h in handles}
    assert states == {"succeeded"}
