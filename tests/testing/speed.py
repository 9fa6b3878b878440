"""How fast the testing mode lives through time: the figures of docs/testing.md
("Speed").  Not a test (no assertion on time: the suite's machines vary);
run it by hand::

    .venv/bin/python tests/testing/speed.py            # this checkout
    PYTHONPATH=<other checkout>/src .venv/bin/python tests/testing/speed.py

It reports CPU time (``time.process_time``), which a busy machine disturbs
far less than wall time (given too, for the week).  The scenes:

- ``fire``: a minutely job (``overlap="allow"``) over a day, the clock moved
  without running anything (``advance(..., run=False)``; before that option
  existed, ``advance``): per fire.
- ``task``: 1,000 enqueued tasks, one ``drain()``: per drained task.
- ``day``: a minutely job over a day, each fire run as it falls due
  (``advance(86_400)``; before, an ``advance(60)`` then a ``drain()`` per
  minute, the nearest a test could get): per minute (a fire and its run).
- ``week``: the same over a week (10,080 fires), when the checkout can.
"""

from __future__ import annotations

import inspect
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

from redcron import Task
from redcron.testing import TestApp

T0 = datetime(2027, 1, 4, tzinfo=UTC)
DAY = 86_400
#: attempts of ``tick`` run (a job's history keeps only its last runs)
RAN: list[int] = []


def _app(overlap: str | None = None) -> TestApp:
    """A TestApp with a task ``tick``; with an ``overlap`` policy, a minutely job
    of it too."""
    app = TestApp(now=T0)

    @app.task(name="tick")
    def tick() -> None:
        RAN.append(1)

    if overlap is not None:
        app.job("minutely", cron="* * * * *", tasks={"t": Task("tick")}, overlap=overlap)
    app.drain()  # writes the declared job
    return app


def _cpu(what: Callable[[], object]) -> float:
    start = time.process_time()
    what()
    return time.process_time() - start


def _has_run() -> bool:
    return "run" in inspect.signature(TestApp.advance).parameters


def fire() -> str:
    app = _app(overlap="allow")
    if _has_run():
        spent = _cpu(lambda: app.advance(DAY, run=False))
    else:
        spent = _cpu(lambda: app.advance(DAY))
    fires = DAY // 60
    return f"fire: {fires} fires in {spent:.2f} s CPU: {spent / fires * 1000:.2f} ms a fire"


def task(n: int = 1_000) -> str:
    app = _app()
    for _ in range(n):
        app.enqueue("tick")
    spent = _cpu(app.drain)
    return f"task: {n} drained in {spent:.2f} s CPU: {spent / n * 1000:.2f} ms a task"


def _live(days: int) -> tuple[float, int]:
    """CPU seconds and attempts run, living ``days`` of a minutely job."""
    app = _app(overlap="skip")  # the default policy
    RAN.clear()
    if _has_run():
        spent = _cpu(lambda: app.advance(days * DAY))
    else:

        def minute_by_minute() -> None:
            for _ in range(days * 1_440):
                app.advance(60)
                app.drain()

        spent = _cpu(minute_by_minute)
    return spent, len(RAN)


def day() -> str:
    spent, ran = _live(1)
    return f"day: {ran} runs in {spent:.2f} s CPU: {spent / ran * 1000:.2f} ms a fire and its run"


def week() -> str:
    if not _has_run():
        return "week: skipped (advance steps at most 10,000 fire times a call)"
    start = time.perf_counter()
    spent, ran = _live(7)
    wall = time.perf_counter() - start
    return f"week: {ran} runs in {spent:.1f} s CPU ({wall:.1f} s wall)"


SCENES = {"fire": fire, "task": task, "day": day, "week": week}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(SCENES):
        print(SCENES[name](), flush=True)
