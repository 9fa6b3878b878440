"""``async def`` tasks: the worker's event loop.

A registered coroutine function runs on an event loop, never on a pool thread:
one loop per worker process, on a thread of its own (``redcron-asyncio``),
started only when the app registers such a task.  Plain functions and commands
go on running in the worker's pool; which one runs an attempt is decided by
the function, so one worker serves an app that mixes both.

Slots: the loop runs at most ``size`` coroutines at once (the worker's
concurrency), and a leased attempt takes one of the worker's slots in the
ledger wherever it runs, so ``concurrency`` and ``prefetch`` bound the leases
a worker holds as they always did.

An attempt is one asyncio task.  At its timeout (a timer on the loop, and the
keeper's check as for any attempt) or on a cancel request (the heartbeat's
answer) or a hand-back, its task is cancelled for real: the coroutine gets
``CancelledError`` at its ``await``, its ``finally`` blocks run, and the
attempt is reported ``timed_out`` or ``cancelled`` once the coroutine has
stopped.  A coroutine that swallows the cancel and runs on is given
:data:`CANCEL_GRACE_S`, then reported as if it had stopped and left running
unseen (as a Python thread is abandoned at its timeout): its result is never
reported.  Results go through the worker's batched reports, as a thread's do.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from redcron.worker import capture
from redcron.worker.execute import (
    Attempt,
    Outcome,
    error_outcome,
    prepare,
    result_outcome,
)
from redcron.worker.hooks import HookChain

if TYPE_CHECKING:
    from redcron.app import App

log = logging.getLogger(__name__)

Done = Callable[[Attempt, Outcome], None]
T = TypeVar("T")

#: seconds a cancelled coroutine gets to stop (its ``finally`` blocks, an
#: ``except CancelledError`` that cleans up) before it is reported anyway
CANCEL_GRACE_S = 5.0


def is_coroutine_task(fn: Callable[..., Any]) -> bool:
    """Whether a task function runs on the event loop: an ``async def`` (also
    through ``functools.partial``, or marked with ``inspect.markcoroutinefunction``)."""
    return inspect.iscoroutinefunction(fn)


def coroutine_tasks(app: App) -> frozenset[str]:
    """The names of ``app``'s tasks that run on the event loop."""
    return frozenset(name for name, t in app.tasks.items() if is_coroutine_task(t.fn))


def killed_outcome(attempt: Attempt) -> Outcome:
    """How an attempt the worker ended is reported (by its kill reason)."""
    if attempt.kill_reason == "timed_out":
        secs = attempt.lease.timeout_ms / 1000
        return Outcome(ok=False, outcome="timed_out", error=f"cancelled after timeout of {secs}s")
    if attempt.kill_reason == "cancelled":
        return Outcome(ok=False, outcome="cancelled", error="cancelled")
    if attempt.kill_reason is not None:
        return Outcome(ok=False, outcome="failed", error=f"killed: {attempt.kill_reason}")
    # cancelled by something other than the worker (its own code, a library)
    return Outcome(ok=False, outcome="failed", error="the task's coroutine was cancelled")


async def run_coroutine(
    app: App,
    attempt: Attempt,
    broker: Any = None,
    before: tuple[Callable[[Attempt], None], ...] = (),
) -> Outcome | None:
    """Run one attempt of a coroutine task on the running loop, to its outcome.

    None: the attempt was ended before it began (cancelled, timed out or handed
    back while it waited for a slot): it never runs, and whoever ended it
    reports it.  Otherwise the attempt is begun here (``try_begin``), with its
    canceller, ``before`` (the attempt hooks) run on a thread (an audit record
    may wait for Redis: never on the loop), and it is ended at its deadline."""
    loop = asyncio.get_running_loop()
    box: list[asyncio.Task[Any]] = []

    def cancel() -> None:  # from any thread: the keeper's, the drain's, or the loop's
        loop.call_soon_threadsafe(_cancel_all, box)

    if not attempt.try_begin(cancel):
        return None
    for hook in before:
        await asyncio.to_thread(hook, attempt)
    call = prepare(app, attempt, broker)
    if isinstance(call, Outcome):
        return call

    async def body() -> Any:
        capture.attach(attempt.buffer)  # this task's context only
        return await call()

    task = loop.create_task(body(), name=f"redcron:{attempt.lease.iid}")
    box.append(task)
    if attempt.kill_reason is not None:
        # killed while the hooks ran, its cancel finding no task yet: a task
        # cancelled before its first step never runs its body
        task.cancel()
    timeout = None if attempt.deadline is None else max(0.0, attempt.deadline - time.monotonic())
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        attempt.kill("timed_out")
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
        if not done:
            log.warning(
                "task %s went on after its cancel (%s) for %.0fs; reported, and left running",
                attempt.lease.iid,
                attempt.kill_reason,
                CANCEL_GRACE_S,
            )
            return killed_outcome(attempt)
    if task.cancelled():
        return killed_outcome(attempt)
    exc = task.exception()
    if exc is not None:
        if isinstance(exc, asyncio.CancelledError):  # pragma: no cover - cancelled() above
            return killed_outcome(attempt)
        if isinstance(exc, KeyboardInterrupt):
            raise exc
        if attempt.kill_reason is not None and isinstance(exc, TimeoutError | RuntimeError):
            # a coroutine whose own code turned our cancel into another error
            # (asyncio.timeout, an async library): the end is still the worker's
            return killed_outcome(attempt)
        return error_outcome(exc)
    return result_outcome(task.result())


def _cancel_all(box: list[asyncio.Task[Any]]) -> None:
    for task in box:
        task.cancel()


class LoopThread:
    """An event loop running on a daemon thread of its own, until :meth:`close`."""

    def __init__(self, name: str = "redcron-asyncio") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Start ``coro`` on the loop without waiting for it."""
        asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what still runs on the loop, stop it and close it."""
        if self.loop.is_closed() or not self._thread.is_alive():
            return
        with contextlib.suppress(RuntimeError):  # stopped meanwhile
            self.spawn(self._wind_down())
        self._thread.join(timeout)

    async def _wind_down(self) -> None:
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        with contextlib.suppress(TimeoutError):
            # to_thread calls (ctx.aonce...) still blocked: not waited for long
            await asyncio.wait_for(self.loop.shutdown_default_executor(), 1.0)
        self.loop.stop()


class AsyncSlots:
    """The worker's event loop and its ``size`` slots: coroutines that take the
    attempts of coroutine tasks from one queue, in turn, as pool threads do."""

    def __init__(self, app: App, size: int, on_done: Done, broker: Any) -> None:
        self.app = app
        self.size = size
        self.on_done = on_done
        self.broker = broker
        self.hooks = HookChain()
        self._loop: LoopThread | None = None
        self._queue: asyncio.Queue[Attempt | None] | None = None
        self._waiting = 0
        self._count_lock = threading.Lock()

    def start(self, hooks: HookChain | None = None) -> None:
        """Start the loop's thread and its slots; each runs ``hooks`` before and
        after an attempt's body (on the loop's thread: they must be quick)."""
        if hooks is not None:
            self.hooks = hooks
        self._loop = LoopThread()
        self._loop.run(self._open())

    async def _open(self) -> None:
        self._queue = asyncio.Queue()
        for i in range(self.size):
            asyncio.get_running_loop().create_task(self._slot(), name=f"redcron-aslot-{i}")

    def submit(self, attempt: Attempt) -> None:
        """Queue an attempt for a slot (from the lease loop's thread)."""
        assert self._loop is not None and self._queue is not None, "start() first"
        with self._count_lock:
            self._waiting += 1
        self._loop.loop.call_soon_threadsafe(self._queue.put_nowait, attempt)

    def queued(self) -> int:
        """Attempts waiting for a slot."""
        return self._waiting

    async def _slot(self) -> None:
        assert self._queue is not None
        while True:
            attempt = await self._queue.get()
            if attempt is None:
                return
            with self._count_lock:
                self._waiting -= 1
            try:
                await self._one(attempt)
            except Exception:  # the worker's own bug: the slot must live on
                log.exception("the event loop slot failed on %s", attempt.lease.iid)

    async def _one(self, attempt: Attempt) -> None:
        hooks = self.hooks
        outcome = await run_coroutine(self.app, attempt, self.broker, hooks.before_attempt)
        if outcome is None:
            return  # ended while it waited for this slot: never run
        for after in hooks.after_attempt:
            await asyncio.to_thread(after, attempt, outcome)
        if attempt.finish():
            return  # ended by the worker meanwhile (handed back): not ours to report
        self.on_done(attempt, outcome)

    def shutdown(self) -> None:
        if self._loop is not None:
            self._loop.close()
