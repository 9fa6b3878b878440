"""``ctx.progress`` in the testing mode (issue 34 §1): ``app.progress_of(handle)``
gives what the task last said, as a worker writes it by the attempt's end."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from redcron import Context, TaskFailed
from redcron.errors import ValidationError
from redcron.testing import TestApp

T0 = datetime(2027, 1, 4, 9, 0, tzinfo=UTC)


@pytest.fixture
def app() -> Any:
    with TestApp(now=T0) as test_app:
        yield test_app


def test_progress_of_gives_the_last_value_and_the_recent_messages(app: TestApp) -> None:
    @app.task
    def export(ctx: Context, n: int) -> int:
        for i in range(n):
            ctx.progress(i + 1, n, f"row {i + 1}" if i % 100 == 99 else None)
        return n

    handle = export.enqueue(1500)
    assert app.progress_of(handle) is None  # not run yet
    assert app.drain().succeeded == 1
    got = app.progress_of(handle)
    assert got is not None
    assert (got.done, got.total, got.message, got.attempt) == (1500, 1500, "row 1500", 1)
    assert got.at == T0
    assert got.fraction == 1.0
    # the last 10 messages of the 15 given, oldest first
    assert [n.message for n in got.recent] == [f"row {i}" for i in range(600, 1501, 100)]
    assert [n.done for n in got.recent][-1] == 1500
    assert app.progress_of(handle.id) == got


def test_an_async_task_reports_progress_and_a_task_without_it_has_none(app: TestApp) -> None:
    @app.task
    async def crawl(ctx: Context) -> None:
        for i in range(3):
            await asyncio.sleep(0)
            ctx.progress(i, message=f"page {i}")

    @app.task
    def quiet() -> None:
        pass

    a, b = crawl.enqueue(), quiet.enqueue()
    app.drain()
    got = app.progress_of(a)
    assert got is not None
    assert (got.done, got.total, got.message) == (2, None, "page 2")
    assert got.fraction is None
    assert [n.message for n in got.recent] == ["page 0", "page 1", "page 2"]
    assert app.progress_of(b) is None


@pytest.mark.parametrize(
    ("args", "field"),
    [((-1,), "done"), ((float("nan"),), "done"), ((True,), "done"), (("3",), "done"),
     ((1, 0), "total"), ((1, -5), "total"), ((1, 2, 7), "message")],
)  # fmt: skip
def test_a_bad_value_fails_the_attempt_naming_the_field(
    app: TestApp, args: tuple[Any, ...], field: str
) -> None:
    @app.task
    def bad(ctx: Context) -> None:
        ctx.progress(*args)

    with pytest.raises(TaskFailed, match=field):
        app.perform(bad)
    with pytest.raises(ValidationError) as info:
        Context("t", 1, "t", "default", "default", 0).progress(*args)
    assert info.value.field == field
