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

An attempt is one asyncio task, driven by callbacks (a timer for its timeout,
a done callback for its end) rather than by a coroutine of ours awaiting it:
slots as coroutines on an ``asyncio.Queue``, each awaiting ``asyncio.wait``
with the timeout, cost 19 µs of CPU per attempt of an empty body against 11
µs this way (a pool thread: 3 µs; 20,000 attempts, no Redis).

At its timeout (the loop's timer, and the keeper's check as for any attempt),
on a cancel request (the heartbeat's answer) or a hand-back, an attempt's task
is cancelled for real: the coroutine gets ``CancelledError`` at its
``await``, its ``finally`` blocks run, and the attempt is reported
``timed_out`` or ``cancelled`` once the coroutine has stopped.  A coroutine
that swallows the cancel and runs on is given :data:`CANCEL_GRACE_S`, then
reported as if it had stopped and left running unseen (as a Python thread is
abandoned at its timeout): its result is never reported.  Results go through
the worker's batched reports, as a thread's do; a ``SystemExit`` raised by a
task is its attempt's error, not the loop's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from redcron.worker import capture
from redcron.worker.execute import (
    Attempt,
    Call,
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


Hooks = tuple[Callable[[Attempt], None], ...]
AfterHooks = tuple[Callable[[Attempt, Outcome], None], ...]


class TaskExit(Exception):
    """A coroutine task raised ``SystemExit``: an error of its attempt (asyncio would
    let it through and stop the loop, and with it every other task's attempt)."""


async def _guarded(coro: Coroutine[Any, Any, Any], attempt: Attempt) -> Any:
    """The task's coroutine, its output sent to its attempt's buffer (the asyncio
    task's own context) and a ``SystemExit`` made an error of the attempt."""
    capture.attach(attempt.buffer)
    try:
        return await coro
    except SystemExit as exc:
        raise TaskExit(f"SystemExit({exc.code!r})") from exc


class _Run:
    """One attempt of a coroutine task on the loop, from its start to its outcome,
    handed to ``on_end`` (on the loop's thread) exactly once."""

    __slots__ = ("app", "attempt", "before", "broker", "call", "ended", "grace", "loop",
                 "on_end", "task", "timer")  # fmt: skip

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        app: App,
        attempt: Attempt,
        broker: Any,
        before: Hooks,
        on_end: Callable[[Outcome], None],
    ) -> None:
        self.loop = loop
        self.app = app
        self.attempt = attempt
        self.broker = broker
        self.before = before
        self.on_end = on_end
        self.call: Call | None = None
        self.task: asyncio.Task[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.grace: asyncio.TimerHandle | None = None
        self.ended = False

    def start(self) -> bool:
        """Begin the attempt (False: it was ended while it waited: never run)."""
        if not self.attempt.try_begin(self.cancel_threadsafe):
            return False
        try:
            if self.before or "/" in self.attempt.lease.iid:
                # the hooks may wait for Redis (an audit record), and a DAG task's
                # call may read its run's params: on a thread, never on the loop
                self.loop.create_task(self._off_loop_then_body())
            else:
                self._body(prepare(self.app, self.attempt, self.broker))
        except Exception as exc:
            self._worker_error(exc)
        return True

    async def _off_loop_then_body(self) -> None:
        try:
            for hook in self.before:
                await asyncio.to_thread(hook, self.attempt)
            self._body(await asyncio.to_thread(prepare, self.app, self.attempt, self.broker))
        except Exception as exc:
            self._worker_error(exc)

    def _worker_error(self, exc: Exception) -> None:
        """The worker's own code failed around a begun attempt (a hook that raised,
        a bug): end it, retryable, rather than hold its lease for ever."""
        log.error("attempt of %s failed in the worker", self.attempt.lease.iid, exc_info=exc)
        if not self.ended:
            self._end(Outcome(ok=False, outcome="failed", error=f"worker error: {exc!r}"))

    def _body(self, call: Call | Outcome) -> None:
        attempt = self.attempt
        if isinstance(call, Outcome):
            self._end(call)
            return
        self.call = call
        try:
            coro = call()
        except Exception as exc:  # a function marked as a coroutine function raised at once
            self._end(error_outcome(exc, call))
            return
        if not inspect.iscoroutine(coro):
            self._end(
                Outcome(
                    ok=False,
                    outcome="failed",
                    retryable=False,
                    error=f"task {attempt.lease.name!r} returned {type(coro).__name__}, "
                    "not a coroutine",
                )
            )
            return
        task = self.loop.create_task(_guarded(coro, attempt), name=f"redcron:{attempt.lease.iid}")
        self.task = task
        task.add_done_callback(self._done)
        if attempt.kill_reason is not None:
            # killed while the hooks ran, its cancel finding no task: a task
            # cancelled before its first step never runs its body
            self._cancel()
        elif attempt.deadline is not None:
            left = max(0.0, attempt.deadline - time.monotonic())
            self.timer = self.loop.call_later(left, self._timed_out)

    def cancel_threadsafe(self) -> None:
        """The attempt's canceller: the keeper's, the drain's, or the loop's own."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs on it
            self.loop.call_soon_threadsafe(self._cancel)

    def _timed_out(self) -> None:
        self.timer = None
        self.attempt.kill("timed_out")  # its canceller runs _cancel, here, next
        self._cancel()

    def _cancel(self) -> None:
        task = self.task
        if task is None or task.done() or self.ended:
            return
        task.cancel()
        if self.grace is None:
            self.grace = self.loop.call_later(CANCEL_GRACE_S, self._give_up)

    def _give_up(self) -> None:
        self.grace = None
        if self.ended:
            return
        log.warning(
            "task %s went on after its cancel (%s) for %.0fs; reported, and left running",
            self.attempt.lease.iid,
            self.attempt.kill_reason,
            CANCEL_GRACE_S,
        )
        self._end(killed_outcome(self.attempt))

    def _done(self, task: asyncio.Task[Any]) -> None:
        if self.ended:
            return  # reported when it would not stop
        if task.cancelled():
            self._end(killed_outcome(self.attempt))
            return
        exc = task.exception()
        if exc is None:
            self._end(result_outcome(self.app, task.result()))
        elif self.attempt.kill_reason is not None and isinstance(exc, TimeoutError):
            # its own code turned our cancel into another error (asyncio.timeout):
            # the end is still the worker's
            self._end(killed_outcome(self.attempt))
        else:
            assert self.call is not None  # set before the task was made
            self._end(error_outcome(exc, self.call))

    def _end(self, outcome: Outcome) -> None:
        self.ended = True
        for handle in (self.timer, self.grace):
            if handle is not None:
                handle.cancel()
        self.timer = self.grace = None
        self.on_end(outcome)


async def run_coroutine(
    app: App, attempt: Attempt, broker: Any = None, before: Hooks = ()
) -> Outcome | None:
    """Run one attempt of a coroutine task on the running loop, to its outcome, as
    a slot of the worker's loop does (the testing mode's runner).

    None: the attempt was ended before it began: it never runs, and whoever
    ended it reports it."""
    loop = asyncio.get_running_loop()
    end: asyncio.Future[Outcome] = loop.create_future()
    run = _Run(loop, app, attempt, broker, before, end.set_result)
    if not run.start():
        return None
    return await end


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
    """The worker's event loop and its ``size`` slots: the attempts of coroutine
    tasks start in the order they were submitted, ``size`` at most at once."""

    def __init__(self, app: App, size: int, on_done: Done, broker: Any) -> None:
        self.app = app
        self.size = size
        self.on_done = on_done
        self.broker = broker
        self.hooks = HookChain()
        self._thread: LoopThread | None = None
        # submitted from the lease loop's thread, taken by the loop in one go: a
        # batch of leases wakes the loop once, not once per attempt
        self._inbox: list[Attempt] = []
        self._inbox_lock = threading.Lock()
        self._wake_pending = False
        # the loop's own, touched on its thread only
        self._waiting: deque[Attempt] = deque()
        self._running = 0
        self._filling = False

    def start(self, hooks: HookChain | None = None) -> None:
        """Start the loop's thread; each attempt runs ``hooks`` before and after
        its body (on a thread of the loop's executor, so an audit record waiting
        for Redis never holds the loop)."""
        if hooks is not None:
            self.hooks = hooks
        self._thread = LoopThread()

    def submit(self, attempt: Attempt) -> None:
        """Queue an attempt for a slot (from the lease loop's thread)."""
        assert self._thread is not None, "start() first"
        with self._inbox_lock:
            self._inbox.append(attempt)
            if self._wake_pending:
                return
            self._wake_pending = True
        self._thread.loop.call_soon_threadsafe(self._take)

    def queued(self) -> int:
        """Attempts waiting for a slot."""
        return len(self._inbox) + len(self._waiting)

    def _take(self) -> None:
        with self._inbox_lock:
            got, self._inbox = self._inbox, []
            self._wake_pending = False
        self._waiting.extend(got)
        self._fill()

    def _fill(self) -> None:
        # an attempt may end within its start (arguments that do not fit): its
        # report's call here returns at once, and this loop takes the freed slot
        if self._filling:
            return
        self._filling = True
        try:
            self._start_waiting()
        finally:
            self._filling = False

    def _start_waiting(self) -> None:
        assert self._thread is not None
        loop = self._thread.loop
        before = self.hooks.before_attempt
        while self._running < self.size and self._waiting:
            attempt = self._waiting.popleft()
            run = _Run(loop, self.app, attempt, self.broker, before, self._ender(attempt))
            self._running += 1  # before start: an attempt may end within it
            if not run.start():
                self._running -= 1  # ended while it waited: never run, not ours to report

    def _ender(self, attempt: Attempt) -> Callable[[Outcome], None]:
        def ended(outcome: Outcome) -> None:
            after = self.hooks.after_attempt
            if after:
                assert self._thread is not None
                self._thread.loop.create_task(self._after_then_report(attempt, outcome, after))
            else:
                self._report(attempt, outcome)

        return ended

    async def _after_then_report(
        self, attempt: Attempt, outcome: Outcome, after: AfterHooks
    ) -> None:
        try:
            for hook in after:
                await asyncio.to_thread(hook, attempt, outcome)
        except Exception:  # a hook must not raise; if one does, the report still goes
            log.exception("an after_attempt hook failed on %s", attempt.lease.iid)
        finally:
            self._report(attempt, outcome)

    def _report(self, attempt: Attempt, outcome: Outcome) -> None:
        self._running -= 1
        try:
            if not attempt.finish():  # True: handed back meanwhile, not ours to report
                self.on_done(attempt, outcome)
        finally:
            self._fill()

    def shutdown(self) -> None:
        if self._thread is not None:
            self._thread.close()
