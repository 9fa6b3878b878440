"""The cluster client's retry of calls that did nothing yet (``TRYAGAIN``, or
redis-py's "TTL exhausted" after its own 16 tries): bounded, with a doubling
pause, and never for another error.  A fake clock: nothing sleeps."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from redcron.engine import connection
from redcron.engine.connection import TRYAGAIN_BUDGET_S, retry_not_run


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses taken, on a clock that advances only by them."""
    taken: list[float] = []
    clock = SimpleNamespace(now=0.0)

    def sleep(s: float) -> None:
        taken.append(s)
        clock.now += s

    fake = SimpleNamespace(monotonic=lambda: clock.now, sleep=sleep)
    monkeypatch.setattr(connection, "time", fake)
    return taken


def failing(times: int, exc: Exception) -> Callable[[], Any]:
    calls = SimpleNamespace(n=0)

    def call() -> str:
        calls.n += 1
        if calls.n <= times:
            raise exc
        return "done"

    return call


def test_tryagain_is_retried_with_a_doubling_pause_until_it_runs(pauses: list[float]) -> None:
    tryagain = redis.exceptions.TryAgainError("TRYAGAIN Multiple keys request during rehashing")
    assert retry_not_run(failing(6, tryagain)) == "done"
    assert pauses == [0.05, 0.1, 0.2, 0.4, 0.5, 0.5]


def test_redis_py_giving_up_after_its_redirections_is_retried_too(pauses: list[float]) -> None:
    exhausted = redis.exceptions.ClusterError("TTL exhausted.")
    assert retry_not_run(failing(2, exhausted)) == "done"
    assert len(pauses) == 2


def test_the_retry_is_bounded_then_the_error_is_the_callers(pauses: list[float]) -> None:
    tryagain = redis.exceptions.TryAgainError("TRYAGAIN")
    with pytest.raises(redis.exceptions.TryAgainError):
        retry_not_run(failing(10_000, tryagain))
    assert sum(pauses) <= TRYAGAIN_BUDGET_S
    assert sum(pauses) > TRYAGAIN_BUDGET_S - 0.5  # it did use its budget


@pytest.mark.parametrize(
    "exc",
    [
        redis.exceptions.ClusterError("something else"),
        redis.exceptions.ResponseError("ERR a script error"),
        redis.exceptions.ConnectionError("refused"),
    ],
)
def test_other_errors_are_not_retried(pauses: list[float], exc: Exception) -> None:
    with pytest.raises(type(exc)):
        retry_not_run(failing(1, exc))
    assert pauses == []
