"""``async def`` tasks in the testing mode: drained and performed on the testing
mode's event loop, through the worker's own ``run_coroutine`` (issue 32 §6)."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from redcron import Context, Retry, Task, TaskFailed
from redcron.testing import TestApp
from redcron.worker import aio

T0 = datetime(2027, 1, 4, 9, 0, tzinfo=UTC)


@pytest.fixture
def app() -> Any:
    with TestApp(now=T0) as test_app:
        yield test_app


def test_an_async_task_drains_and_its_result_comes_back(app: TestApp) -> None:
    @app.task
    async def add(ctx: Context, x: int, y: int) -> dict[str, Any]:
        await asyncio.sleep(0)
        print("adding", x, y)
        ctx.logger.warning("added on attempt %d", ctx.attempt)
        return {"sum": x + y, "thread": threading.current_thread().name}

    handle = add.enqueue(2, 3)
    assert app.drain().succeeded == 1
    assert handle.result() == {"sum": 5, "thread": "redcron-testing-asyncio"}
    assert app.logs(handle.id) == ["adding 2 3", "WARNING redcron.task: added on attempt 1"]
    # perform runs it too; calling the function itself gives the coroutine
    assert app.perform(add, 1, 1)["sum"] == 2
    coro = add.fn(None, 1, 1)  # type: ignore[arg-type]
    assert asyncio.iscoroutine(coro)
    coro.close()


def test_a_raising_async_task_is_retried_then_succeeds(app: TestApp) -> None:
    @app.task(retries=2)
    async def flaky(ctx: Context) -> int:
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        if ctx.attempt == 2:
            raise Retry(delay=0)
        return ctx.attempt

    handle = flaky.enqueue()
    drained = app.drain(with_scheduled=True)
    assert (drained.succeeded, drained.failed, drained.retried) == (1, 2, 2)
    assert handle.result() == 3
    info = handle.info()
    assert "RuntimeError: first attempt fails" in str(info.attempts[0].error)
    assert str(info.attempts[1].error).startswith("Retry")


def test_an_async_task_is_cancelled_at_its_timeout(app: TestApp) -> None:
    seen: list[str] = []

    @app.task(retries=0, timeout=1)
    async def stuck() -> None:
        try:
            await asyncio.Event().wait()  # never set: only the timeout ends it
            seen.append("ran on")
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("finally")

    handle = stuck.enqueue()
    drained = app.drain()
    assert (drained.failed, drained.dead) == (1, 1)
    assert seen == ["cancelled", "finally"]
    info = handle.info()
    assert [a.outcome for a in info.attempts] == ["timed_out"]
    with pytest.raises(TaskFailed, match="timeout"):
        app.perform(stuck)


def test_ctx_async_forms_in_a_run_with_params(app: TestApp) -> None:
    @app.task
    async def probe(ctx: Context) -> list[Any]:
        return [await ctx.aonce("mail"), await ctx.aonce("mail"), await ctx.aparams()]

    app.job("report", tasks={"probe": Task(probe.name)})
    app.advance(0, run=False)  # the declared job is applied
    app.jobs.trigger("report", params={"day": "monday"})
    assert app.drain().succeeded == 1
    (run,) = app.runs("report")
    (task,) = run.tasks or ()
    assert app.get(task.id).result() == [True, False, {"day": "monday"}]


def test_a_coroutine_test_may_drain_too(app: TestApp) -> None:
    @app.task
    async def double(x: int) -> int:
        return 2 * x

    async def scenario() -> int:
        handle = double.enqueue(21)
        app.drain()  # blocks this loop; the task runs on the testing mode's own
        return int(handle.result())

    assert asyncio.run(scenario()) == 42


def test_a_plain_function_returning_a_coroutine_fails_for_good(app: TestApp) -> None:
    async def body() -> int:
        return 1

    @app.task(retries=3)
    def wrapped() -> Any:
        return body()

    handle = wrapped.enqueue()
    drained = app.drain()
    assert (drained.failed, drained.dead) == (1, 1)
    assert "declare it `async def`" in str(handle.info().error)


def test_a_coroutine_that_swallows_its_cancel_is_reported_and_left(
    app: TestApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aio, "CANCEL_GRACE_S", 0.1)
    let_go = threading.Event()
    seen: list[str] = []

    @app.task(retries=0, timeout=1)
    async def stubborn() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("swallowed")
        # runs on past its cancel until the test lets it go (after the report)
        await asyncio.to_thread(let_go.wait, 30)
        seen.append("returned")
        return "late"

    handle = stubborn.enqueue()
    assert app.drain().dead == 1
    assert seen == ["swallowed"]  # reported while it still ran
    info = handle.info()
    assert [a.outcome for a in info.attempts] == ["timed_out"] and info.result is None
    let_go.set()
    assert app.perform(double_of(app), 2) == 4  # the loop goes on serving
    assert handle.info().state == "dead"  # its late result was never reported


def test_system_exit_in_a_coroutine_fails_its_attempt_not_the_loop(app: TestApp) -> None:
    @app.task(retries=0)
    async def leave() -> None:
        raise SystemExit(3)

    handle = leave.enqueue()
    assert app.drain().dead == 1
    assert "SystemExit(3)" in str(handle.info().error)
    assert app.perform(double_of(app), 5) == 10


def double_of(app: TestApp) -> Any:
    @app.task(name="double_of")
    async def double(x: int) -> int:
        return 2 * x

    return double


def test_retry_on_and_a_run_s_params_apply_to_async_tasks(app: TestApp) -> None:
    @app.task(retries=3, retry_on=[KeyError])
    async def picky(ctx: Context) -> None:
        raise ValueError("not listed: permanent")

    handle = picky.enqueue()
    assert app.drain().dead == 1
    assert handle.attempts == 1 and "not retried" in str(handle.info().error)

    @app.task
    async def greet(ctx: Context, who: str = "nobody") -> str:
        # a DAG task's params are read off the loop, then given by name
        return f"hello {who} (params {await ctx.aparams()})"

    app.job("greeting", tasks={"greet": Task(greet.name)})
    app.advance(0, run=False)
    app.jobs.trigger("greeting", params={"who": "ada"})
    assert app.drain().succeeded == 1
    (run,) = app.runs("greeting")
    (task,) = run.tasks or ()
    assert app.get(task.id).result() == "hello ada (params {'who': 'ada'})"
