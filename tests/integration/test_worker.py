"""A real worker against real Redis: retries, timeouts, cancel, DLQ, ctx, output capture.

Most tests run the worker in a thread of the test process (fast); output
capture replaces ``sys.stdout``, which pytest also does, so the capture test
runs the worker as a subprocess, as ``redcron worker`` would.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import chaos_app  # tests/apps and tests/helpers are put on sys.path by tests/conftest.py
import pytest
import redis
from worker_procs import (  # noqa: F401 (app_fixture, start_worker_fixture: fixtures)
    WorkerProc,
    app_fixture,
    chaos_app_client,
    outcomes,
    start_worker_fixture,
    thread_workers,
    wait_for,
    worker_spawner,
)

from redcron import App, Context, Retry, TaskFailed
from redcron.worker import Worker


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
    # both ended about when the runaway's second was up: their reports may
    # share a batch, in which completions are recorded before failures
    wait_for(lambda: runaway.state == "dead", "the runaway's timeout to be recorded", 5)
    info = runaway.info()
    assert info.state == "dead"
    assert outcomes(info) == ["timed_out"]
    assert "timed out" in str(info.error)
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
    assert "attempt 2 fails" in str(info.attempts[1].error)
    # backoff goes through the timer set (retry_wait), then back to ready; the
    # counters are follow-ups, applied after the attempt's end: apply them here
    # (the worker's maintenance may not have reached the last one yet)
    for shard in range(app.broker.shards):
        app.broker.maintenance.follow_all(shard)
    assert app.broker.inspection.stats().get("retries", 0) >= 2


def test_retry_delay_is_honoured(app: App, start_worker: Callable[..., Worker]) -> None:
    start_worker(concurrency=2)
    h = app.enqueue("retry_later", 1.0)
    assert h.result(timeout=30) == 2
    info = h.info()
    first, second = info.attempts
    assert first.outcome == "failed" and "Retry: not yet" in str(first.error)
    assert second.outcome == "succeeded"
    # server clock: the retry was not leased before the requested delay
    assert second.leased_at is not None and first.ended_at is not None
    assert (second.leased_at - first.ended_at).total_seconds() >= 1.0


def test_permanent_goes_straight_to_dlq(app: App, start_worker: Callable[..., Worker]) -> None:
    start_worker(concurrency=2)
    h = app.enqueue("permanent")  # declared with retries=5
    with pytest.raises(TaskFailed) as exc:
        h.result(timeout=30)
    assert exc.value.state == "dead"
    info = h.info()
    assert outcomes(info) == ["failed"]
    assert "Permanent: bad input" in str(info.error)
    entries = [e for e in app.broker.dlq.list() if e.task_id == h.id]
    assert len(entries) == 1
    assert entries[0].attempts == 1


def test_arguments_that_do_not_fit_fail_the_first_attempt_for_good(
    app: App, start_worker: Callable[..., Worker], redis_url: str, key_prefix: str
) -> None:
    # issue 16 item 9: the TypeError of an unknown keyword was retried into the DLQ.
    # A producer whose registration of "echo" differs from the worker's (an
    # older or newer version of the code) enqueues what the worker cannot call.
    producer = App(redis_url, prefix=key_prefix.rstrip(":"))

    @producer.task(name="echo", retries=3)
    def echo(value: Any = None, extra: Any = None) -> Any:
        return value

    try:
        # read back through the worker's app: the producer is closed below
        fits = app.get(producer.enqueue("echo", "kept").id)
        h = app.get(producer.enqueue("echo", 1, extra=2).id)
        missing = app.get(producer.enqueue("echo").id)
    finally:
        producer.close()
    start_worker(concurrency=2)
    assert fits.result(timeout=30) == "kept"
    for handle, error in (
        (h, "echo() got an unexpected keyword argument 'extra'"),
        (missing, "echo() missing a required argument: 'value'"),
    ):
        with pytest.raises(TaskFailed) as exc:
            handle.result(timeout=30)
        assert exc.value.state == "dead"
        info = handle.info()
        assert outcomes(info) == ["failed"]  # one attempt of four: no retry
        assert info.error == error
        [entry] = [e for e in app.broker.dlq.list() if e.task_id == handle.id]
        assert (entry.attempts, entry.error) == (1, error)


def test_dlq_after_max_attempts_then_replay_succeeds(
    app: App, start_worker: Callable[..., Worker], r: redis.Redis
) -> None:
    start_worker(concurrency=2)
    marker = chaos_app.rec_key(app, "marker", "replay")
    h = app.enqueue("needs_marker", marker)  # retries=1: two attempts
    with pytest.raises(TaskFailed):
        h.result(timeout=30)
    info = h.info()
    assert info.state == "dead"
    assert outcomes(info) == ["failed", "failed"]
    entries = [e for e in app.broker.dlq.list() if e.task_id == h.id]
    assert len(entries) == 1 and entries[0].attempts == 2
    assert "is not set" in entries[0].error

    r.set(marker, "1")
    assert app.broker.dlq.replay([h.id]) == 1
    assert h.result(timeout=30) == "replayed"
    assert outcomes(h.info()) == ["failed", "failed", "succeeded"]
    assert [e for e in app.broker.dlq.list() if e.task_id == h.id] == []
    assert app.broker.dlq.replay([h.id]) == 0  # not dead any more: left alone


# -- cancel of work that is not running -----------------------------------------


def test_cancel_ready_and_scheduled_work_never_runs(
    app: App, start_worker: Callable[..., Worker], r: redis.Redis
) -> None:
    ready = app.enqueue("mark", "ready-one")
    later = app.enqueue("mark", "later-one", _countdown=0.5)
    assert ready.cancel().state == "cancelled"
    assert later.cancel().state == "cancelled"
    assert ready.state == "cancelled" and later.state == "cancelled"

    start_worker(concurrency=2)
    time.sleep(0.6)  # past the countdown: promote would have moved it
    after = app.enqueue("mark", "after")
    assert after.result(timeout=30) == "after"
    for h, name in ((ready, "ready-one"), (later, "later-one")):
        info = h.info()
        assert info.state == "cancelled"
        assert info.attempts == ()
        assert r.get(chaos_app.rec_key(app, "mark", name)) is None
        with pytest.raises(TaskFailed) as exc:
            h.result(timeout=1)
        assert exc.value.state == "cancelled"
    assert not ready.cancel().cancelled  # it had ended: nothing to do


# -- prefetched work: cancel, re-lease, shutdown (issue 7) ------------------------


class Holder:
    """In-process tasks that record what ran and how many ran at once; ``first``
    holds its slot until ``gate`` is set."""

    def __init__(self, app: App) -> None:
        self.gate = threading.Event()
        self.ran: list[str] = []
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

        @app.task(name="t.hold", retries=0)
        def hold(tag: str) -> str:
            with self._lock:
                self.ran.append(tag)
                self.running += 1
                self.peak = max(self.peak, self.running)
            try:
                if tag == "first":
                    self.gate.wait(60)
            finally:
                with self._lock:
                    self.running -= 1
            return tag

        self.task = hold


def test_cancelled_prefetched_task_never_runs_and_slots_stay_at_concurrency(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    holder = Holder(app)
    try:
        w = start_worker(concurrency=1, prefetch=1, lease_ttl=1.2)
        first = holder.task.enqueue("first")
        wait_for(lambda: holder.ran == ["first"], "the first task to hold the only slot")
        second = holder.task.enqueue("second")
        wait_for(lambda: second.state == "leased", "the second task to be prefetched")
        assert second.cancel().may_still_be_running  # the worker holds it
        assert second.state == "cancelled"
        wait_for(lambda: not _holds(w, second.id), "the heartbeat to revoke it")
        third = holder.task.enqueue("third")
    finally:
        holder.gate.set()
    assert first.result(timeout=30) == "first"
    # the slot's queue is FIFO: once the third has run, the second was passed over
    assert third.result(timeout=30) == "third"
    assert holder.ran == ["first", "third"]
    assert holder.peak == 1  # -c 1: one at a time, no replacement thread for a task never begun
    assert outcomes(second.info()) == ["cancelled"]


def test_attempt_leased_again_by_the_same_worker_keeps_its_own_lease(
    app: App,
    start_worker: Callable[..., Worker],
    r: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    began = threading.Event()
    finish = threading.Event()

    @app.task(name="t.again", retries=3, cpu=0.5)
    def again(ctx: Context) -> int:
        if ctx.attempt == 1:
            raise Retry("at once", delay=0)
        began.set()
        finish.wait(60)
        return ctx.attempt

    # Hold the reporter thread after attempt 1's failure is recorded (the task is
    # ready again at once) until this worker has leased and started attempt 2:
    # only then is attempt 1 forgotten, as happens when the lease loop wins.
    # (A report the lease loop carries with its lease is forgotten before the
    # leases it brings are dispatched: no race there, and no waiting on itself.)
    real = app.broker.leases.report_and_lease

    def report_and_lease(*args: Any) -> Any:
        out = real(*args)
        fails, lease = args[3], args[5]
        if fails and lease is None:
            began.wait(30)
        return out

    monkeypatch.setattr(app.broker.leases, "report_and_lease", report_and_lease)
    w = start_worker(concurrency=2, lease_ttl=1.5, cpus=2)
    h = again.enqueue()
    try:
        assert began.wait(30)
        wait_for(lambda: w.processed >= 1, "attempt 1's slot to be released")
        key = app.broker.keys.ti(0, h.id)
        state, epoch, deadline = r.hmget(key, "state", "epoch", "deadline")
        assert state in (b"leased", b"running") and h.info().attempt == 2

        def renewed() -> bool:
            now = r.hmget(key, "epoch", "deadline")
            return now[0] == epoch and int(now[1] or 0) > int(deadline or 0)

        # attempt 2 is still this worker's: its heartbeats go on
        wait_for(renewed, "a heartbeat to renew attempt 2's lease", timeout=10)
    finally:
        finish.set()
    assert h.result(timeout=30) == 2
    assert outcomes(h.info()) == ["failed", "succeeded"]
    # each attempt gave back its own slot and cpu
    wait_for(lambda: not w.ledger.active, "the worker to forget both attempts")
    assert w.ledger.cpu_used == 0


def test_drain_hands_back_prefetched_work_without_starting_it(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    holder = Holder(app)
    try:
        w = start_worker(concurrency=1, prefetch=1, grace=60)
        first = holder.task.enqueue("first")
        wait_for(lambda: holder.ran == ["first"], "the first task to hold the only slot")
        second = holder.task.enqueue("second")
        wait_for(lambda: second.state == "leased", "the second task to be prefetched")
        w.stop(graceful=True)
        # handed back at the start of the drain, not after the grace period
        wait_for(lambda: second.state == "ready", "the prefetched lease to go back", timeout=10)
    finally:
        holder.gate.set()  # the slot frees: the handed-back attempt must not start here
    assert first.result(timeout=30) == "first"
    info = second.info()
    assert outcomes(info) == ["lost"]
    assert "handed back" in str(info.attempts[0].error)
    wait_for(lambda: not w.ledger.active, "the worker to finish its drain")
    assert holder.ran == ["first"]


def test_process_pool_never_starts_a_cancelled_prefetched_task(
    app: App, spawn_worker: Callable[..., WorkerProc], r: redis.Redis
) -> None:
    proc = spawn_worker(concurrency=1, prefetch=1, pool="processes", app_path="chaos_app:app")
    go = chaos_app.rec_key(app, "go")
    first = app.enqueue("wait_key", go)
    wait_for(lambda: first.state == "running", "the first task to hold the only child")
    second = app.enqueue("slow", 0)
    wait_for(lambda: second.state == "leased", "the second task to be prefetched")
    assert second.cancel().may_still_be_running
    assert second.state == "cancelled"
    wait_for(lambda: f"task {second.id} cancelled" in proc.log(), "the heartbeat to revoke it")
    r.set(go, "1")
    child = first.result(timeout=30)
    # the slot passed the cancelled task over: the same child serves the next one,
    # not killed and respawned for a task that was never to start
    assert app.enqueue("whoami").result(timeout=30) == child
    assert r.llen(chaos_app.rec_key(app, "attempts", second.id)) == 0
    assert outcomes(second.info()) == ["cancelled"]


# -- cancel of running work (issue 16 item 8) ---------------------------------------


def _holds(w: Worker, iid: str) -> bool:
    """Does the worker still hold an attempt of ``iid`` (not yet reported)?"""
    with w.ledger.lock:
        return any(a.lease.iid == iid for a in w.ledger.active.values())


def test_cancelled_running_task_ends_cancelled_though_its_thread_returns(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    # a running task cancelled, whose code then returned before the next
    # heartbeat, ended succeeded: the cancel must hold whatever the worker reports
    holder = Holder(app)
    try:
        # a long TTL: the heartbeat (every TTL/6) comes after the task returns
        w = start_worker(concurrency=1, lease_ttl=60)
        h = holder.task.enqueue("first")
        wait_for(lambda: h.state == "running", "the task to run")
        done = h.cancel()
        assert (done.state, done.cancelled, done.may_still_be_running) == (
            "cancelled",
            True,
            True,  # a Python thread cannot be killed
        )
        assert h.state == "cancelled"
    finally:
        holder.gate.set()  # its code returns "first" and the worker reports it
    wait_for(lambda: not _holds(w, h.id), "the worker to report the attempt")
    info = h.info()
    assert info.state == "cancelled"
    assert outcomes(info) == ["cancelled"]  # the attempt history ends cancelled
    assert info.result is None
    with pytest.raises(TaskFailed) as exc:
        h.result(timeout=1)
    assert exc.value.state == "cancelled"
    assert holder.ran == ["first"]
    again = h.cancel()
    assert (again.state, again.cancelled) == ("cancelled", False)


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
        lines = app.broker.inspection.log_lines(h.id, attempt)
        assert f"print from attempt {attempt}" in lines
        assert f"INFO chaos_app: log from attempt {attempt}" in lines
        assert f"WARNING chaos_app: warning from attempt {attempt}" in lines

    dead = app.enqueue("noisy_fail")
    with pytest.raises(TaskFailed):
        dead.result(timeout=30)
    assert "noisy failure" in str(dead.info().error)
    (entry,) = [e for e in app.broker.dlq.list() if e.task_id == dead.id]
    tail = list(entry.log_tail)
    assert tail[:3] == ["noisy line 0", "noisy line 1", "noisy line 2"]
    assert "WARNING chaos_app: about to fail" in tail
    assert "noisy failure" in str(entry.error)
    assert proc.poll() is None


def test_process_pool_captures_output(app: App, spawn_worker: Callable[..., WorkerProc]) -> None:
    spawn_worker(concurrency=1, pool="processes", app_path="chaos_app:app")
    h = app.enqueue("probe")
    assert h.result(timeout=30) == "probed"
    for attempt in (1, 2):
        lines = app.broker.inspection.log_lines(h.id, attempt)
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


def test_once_records_are_the_tenants_own(app: App) -> None:
    """ctx.once keys its record under the task's tenant (dedupe:<tenant>:once:...):
    another tenant's task giving the same idem_key and key reaches none of it."""

    def ctx(tenant: str) -> Context:
        return Context(
            task_id="0-T", attempt=1, idem_key="0-J@1:send", tenant=tenant, queue="default",
            shard=0, broker=app.broker,
        )  # fmt: skip

    assert ctx("acme").once("mail") is True
    assert ctx("acme").once("mail") is False
    assert ctx("globex").once("mail") is True  # not acme's record
    assert app.broker.client.exists(app.broker.keys.dedupe(0, "acme", "once", "0-J@1:send:mail"))
