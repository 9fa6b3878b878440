"""The worker's event loop slots on their own, without Redis (issue 32 §6)."""

from __future__ import annotations

import asyncio
import threading

from redcron import App, serde
from redcron.engine import Lease
from redcron.worker import capture
from redcron.worker.aio import AsyncSlots
from redcron.worker.execute import Attempt, Outcome
from redcron.worker.hooks import HookChain

ARGS = serde.dumps([[], {}])


def _attempt(i: int, name: str) -> Attempt:
    lease = Lease(f"0-{i:08d}", "1", 1, name, "python", ARGS, 0, 0, "default", queue="default")
    return Attempt(lease, capture.LineBuffer(10))


def _slots(app: App, size: int, n: int) -> tuple[AsyncSlots, list[Outcome], threading.Event]:
    outcomes: list[Outcome] = []
    done = threading.Event()

    def on_done(_attempt: Attempt, outcome: Outcome) -> None:
        outcomes.append(outcome)
        if len(outcomes) == n:
            done.set()

    slots = AsyncSlots(app, size, on_done, None)
    slots.start(HookChain())
    return slots, outcomes, done


def test_attempts_that_end_as_they_start_do_not_nest() -> None:
    # an unknown task ends within its start; 3,000 in a row once recursed from
    # each report into the next start, past Python's recursion limit
    app = App("redis://127.0.0.1:1/0")
    n = 3_000
    slots, outcomes, done = _slots(app, 4, n)
    try:
        for i in range(n):
            slots.submit(_attempt(i, "nobody.registered.this"))
        assert done.wait(30)
        assert len(outcomes) == n
        assert all("unknown task" in o.error for o in outcomes)
        assert slots.queued() == 0
    finally:
        slots.shutdown()
        app.close()


def test_no_more_than_size_coroutines_run_at_once() -> None:
    app = App("redis://127.0.0.1:1/0")
    state = {"running": 0, "peak": 0}

    @app.task(name="t.step")
    async def step() -> int:
        state["running"] += 1
        state["peak"] = max(state["peak"], state["running"])
        await asyncio.sleep(0)  # let the others start, if the slots allowed them
        state["running"] -= 1
        return 1

    n = 200
    slots, outcomes, done = _slots(app, 3, n)
    try:
        for i in range(n):
            slots.submit(_attempt(i, "t.step"))
        assert done.wait(30)
        assert all(o.ok for o in outcomes) and len(outcomes) == n
        assert state["peak"] == 3
    finally:
        slots.shutdown()
        app.close()
