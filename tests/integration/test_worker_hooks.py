"""Attempt hooks on a running worker: when each is called, and with what (issue 17)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from worker_procs import (  # noqa: F401 (fixtures)
    app_fixture,
    start_worker_fixture,
    wait_for,
)

from redcron import App, Context, Retry, TaskFailed
from redcron.worker import AttemptHook, Reports, Worker
from redcron.worker.execute import Attempt, Outcome


class Recorder(AttemptHook):
    """Every call, as (event, task id, attempt, detail)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int, object]] = []
        self._lock = threading.Lock()

    def _add(self, *call: object) -> None:
        with self._lock:
            self.calls.append(call)  # type: ignore[arg-type]

    def before_attempt(self, attempt: Attempt) -> None:
        self._add("before", attempt.lease.iid, attempt.lease.attempt, attempt.began is not None)

    def after_attempt(self, attempt: Attempt, outcome: Outcome) -> None:
        self._add("after", attempt.lease.iid, attempt.lease.attempt, outcome.outcome)

    def after_report(self, reports: Reports) -> None:
        for r in reports:
            self._add("reported", r.attempt.lease.iid, r.attempt.lease.attempt, r.state)

    def of(self, iid: str) -> list[tuple[str, int, object]]:
        with self._lock:
            return [(event, n, detail) for event, i, n, detail in self.calls if i == iid]


def test_hooks_see_each_attempt_begin_end_and_land(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    rec = Recorder()
    w = start_worker(concurrency=2, hooks=[rec])
    assert w.hooks[-1] is rec  # after the worker's own
    h = app.enqueue("retry_later", 0.05)  # fails once (Retry), then succeeds
    assert h.result(timeout=30) == 2
    wait_for(lambda: len(rec.of(h.id)) == 6, "both attempts to be reported")
    assert rec.of(h.id) == [
        ("before", 1, True),  # the slot claimed it: began is set
        ("after", 1, "failed"),
        ("reported", 1, "retry_wait"),
        ("before", 2, True),
        ("after", 2, "succeeded"),
        ("reported", 2, "succeeded"),
    ]


def test_a_dead_lettered_attempt_is_reported_dead(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    rec = Recorder()
    start_worker(concurrency=1, hooks=[rec])
    h = app.enqueue("permanent")
    with pytest.raises(TaskFailed):
        h.result(timeout=30)
    wait_for(lambda: len(rec.of(h.id)) == 3, "the attempt to be reported")
    assert rec.of(h.id)[-1] == ("reported", 1, "dead")


def test_hooks_see_an_async_def_attempt_as_a_thread_s(
    app: App, start_worker: Callable[..., Worker]
) -> None:
    # issue 32 §6: the before and after hooks of a coroutine's attempt run on a
    # thread of the event loop's executor, around its body, as on a pool thread
    rec = Recorder()

    @app.task(name="aio.hooked", retries=1, retry_base=0.05, retry_cap=0.1)
    async def hooked(ctx: Context) -> int:
        if ctx.attempt == 1:
            raise Retry("again", delay=0)
        return ctx.attempt

    start_worker(concurrency=2, hooks=[rec])
    h = hooked.enqueue()
    assert h.result(timeout=30) == 2
    wait_for(lambda: len(rec.of(h.id)) == 6, "both attempts to be reported")
    calls = rec.of(h.id)
    # the retry (no delay) may begin before the first attempt's report hook runs
    assert [c for c in calls if c[1] == 1] == [
        ("before", 1, True),
        ("after", 1, "failed"),
        ("reported", 1, "ready"),
    ]
    assert [c for c in calls if c[1] == 2] == [
        ("before", 2, True),
        ("after", 2, "succeeded"),
        ("reported", 2, "succeeded"),
    ]
