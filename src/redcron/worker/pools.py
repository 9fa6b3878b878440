"""Execution pools: where an attempt runs.

``threads``: N threads in the worker process.  A Python task that passes its
timeout cannot be killed: the attempt is recorded ``timed_out``, the thread
is abandoned (it runs on; its late result is discarded) and a fresh thread
takes its slot.  ``processes``: N child processes, each in its own process
group; a timed-out or cancelled task's group is killed and the child
respawned.  Command tasks always run as a subprocess in their own process
group, killed at the timeout, whichever pool is used.

``async def`` tasks run on neither: whichever the pool, a registered coroutine
function's attempts go to the worker's event loop (:mod:`redcron.worker.aio`),
which the pool starts beside its own slots when the app has such a task.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from redcron.engine import Engine, Lease
from redcron.lifeline import signal_on_parent_death
from redcron.loader import load_app
from redcron.model.progress import Pending
from redcron.worker import capture
from redcron.worker.aio import AsyncSlots, coroutine_tasks
from redcron.worker.execute import Attempt, Outcome, run_command, run_python
from redcron.worker.hooks import HookChain

if TYPE_CHECKING:
    from redcron.app import App

log = logging.getLogger(__name__)

Done = Callable[[Attempt, Outcome], None]


def _timeout_s(attempt: Attempt) -> float | None:
    return attempt.lease.timeout_ms / 1000 if attempt.lease.timeout_ms > 0 else None


def _killed_outcome(attempt: Attempt) -> Outcome:
    if attempt.kill_reason == "timed_out":
        secs = attempt.lease.timeout_ms / 1000
        return Outcome(ok=False, outcome="timed_out", error=f"killed after timeout of {secs}s")
    if attempt.kill_reason == "cancelled":
        return Outcome(ok=False, outcome="cancelled", error="cancelled")
    return Outcome(ok=False, outcome="failed", error=f"killed: {attempt.kill_reason}")


class _Slots:
    """N threads (``thread_name``) taking attempts from one queue, in ``_loop``;
    and the event loop's N slots (:attr:`aio`) for the app's coroutine tasks."""

    thread_name = "redcron-slot"

    def __init__(self, app: App, size: int, on_done: Done) -> None:
        self.app = app
        self.size = size
        self.on_done = on_done
        self.hooks = HookChain()
        self._queue: queue.SimpleQueue[Attempt | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        #: the event loop of the app's ``async def`` tasks (None: it has none)
        self.aio: AsyncSlots | None = None
        self._coroutines: frozenset[str] = frozenset()

    def start(self, hooks: HookChain | None = None, plain: bool = True) -> None:
        """Start the slots; each runs ``hooks`` before and after an attempt's body.

        The app's coroutine tasks get the event loop, with as many slots; the
        pool's own slots start only with ``plain`` (the worker runs plain
        functions or commands): a worker of ``async def`` tasks only starts no
        thread or child process it would never use."""
        if hooks is not None:
            self.hooks = hooks
        self._coroutines = coroutine_tasks(self.app)
        if self._coroutines:
            self.aio = AsyncSlots(self.app, self.size, self.on_done, self.app.broker)
            self.aio.start(self.hooks)
        if not plain:
            return
        for _ in range(self.size):
            self._spawn()

    def _spawn(self) -> None:
        t = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._threads.append(t)
        t.start()

    def _loop(self) -> None:
        raise NotImplementedError

    def submit(self, attempt: Attempt) -> None:
        """Queue an attempt for a slot: a coroutine task's for the event loop's."""
        aio = self.aio
        if (
            aio is not None
            and attempt.lease.name in self._coroutines
            and attempt.lease.kind == "python"
        ):
            aio.submit(attempt)
            return
        self._queue.put(attempt)

    def queued(self) -> int:
        """Attempts waiting for a slot."""
        waiting = self._queue.qsize()
        return waiting if self.aio is None else waiting + self.aio.queued()

    def shutdown(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        if self.aio is not None:
            self.aio.shutdown()


class ThreadPool(_Slots):
    """N threads pulling attempts from one queue."""

    thread_name = "redcron-exec"

    def __init__(self, app: App, size: int, on_done: Done, broker: Engine) -> None:
        super().__init__(app, size, on_done)
        self.broker = broker

    def replace(self) -> None:
        """A thread was abandoned (timed out or revoked): keep the slot count."""
        self._spawn()

    def _loop(self) -> None:
        while True:
            attempt = self._queue.get()
            if attempt is None:
                return
            if not attempt.try_begin():
                continue  # ended while it waited for this slot: never run it
            for before in self.hooks.before_attempt:
                before(attempt)
            if attempt.lease.kind != "python":
                outcome = run_command(
                    attempt, _timeout_s(attempt), self.app.settings.container_runtime, self.broker
                )
            else:
                outcome = run_python(self.app, attempt, self.broker)
            for after in self.hooks.after_attempt:
                after(attempt, outcome)
            if attempt.finish():
                # this thread's slot was handed to a replacement; leave quietly
                return
            self.on_done(attempt, outcome)


def _die_with_parent(parent_pid: int, lifeline: Connection) -> None:
    """Make sure a child never outlives the worker that spawned it.

    A child killed only by its parent would, once the worker is SIGKILLed, run
    its task past any timeout and then die on a broken pipe.  On Linux the
    kernel sends the child SIGKILL when its parent goes (the parent is the
    spawning *thread*: a pool slot thread, which lives as long as the pool).
    Everywhere, a daemon thread waits on a pipe whose only write end the parent
    holds: end of file means the parent is gone, and the child's whole process
    group (subprocesses the task started included) is killed.
    """
    signal_on_parent_death(signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(1)  # orphaned before the death signal was armed
    watch_lifeline(lifeline)


def watch_lifeline(lifeline: Connection) -> None:
    """Kill this process's group once the write end of ``lifeline`` is closed
    everywhere (its holder died), from a daemon thread."""

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            lifeline.recv_bytes()  # the parent never writes: this returns at EOF
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="redcron-lifeline", daemon=True).start()


def _child_main(
    app_path: str,
    conn: Connection,
    log_level: int = logging.WARNING,
    parent_pid: int | None = None,
    lifeline: Connection | None = None,
) -> None:
    """A process-pool child: its own session (so its group can be killed), runs tasks.

    A spawned child starts with a bare root logger: take the parent's level so
    a task's ``logging.info`` is captured as it is in the threads pool.
    """
    os.setsid()
    if parent_pid is not None and lifeline is not None:
        _die_with_parent(parent_pid, lifeline)
    logging.getLogger().setLevel(log_level)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    app = load_app(app_path)
    capture.install()
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        lease = Lease(**msg["lease"])
        attempt = Attempt(lease=lease, buffer=capture.LineBuffer(msg["max_lines"]))
        attempt.on_progress = functools.partial(_send_progress, conn)
        out = run_python(app, attempt, app.broker)
        out.lines = attempt.buffer.drain()
        try:
            if attempt.progress is not None:  # the last value goes before the outcome
                rest = attempt.progress.take_rest(time.monotonic())
                if rest is not None:
                    conn.send(rest)
            conn.send(out)
        except OSError:  # BrokenPipeError: the worker is gone, and nobody to tell
            return


#: how often a child sends its task's progress on to the worker, at most (the
#: worker's keeper coalesces again, to one write per heartbeat period)
CHILD_PROGRESS_S = 0.05


def _send_progress(conn: Connection, attempt: Attempt) -> None:
    """After a task's ``ctx.progress`` in a child: send what is due to the worker,
    which writes it as its own (worker/progress.py)."""
    assert attempt.progress is not None  # the call just made it
    due = attempt.progress.take(time.monotonic(), CHILD_PROGRESS_S)
    if due is not None:
        with contextlib.suppress(OSError):  # the worker is gone: nobody to tell
            conn.send(due)


class _Child:
    def __init__(self, app_path: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        watch_end, self._lifeline = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(
            target=_child_main,
            args=(
                app_path,
                child_conn,
                logging.getLogger().getEffectiveLevel(),
                os.getpid(),
                watch_end,
            ),
            daemon=True,
        )
        self.proc.start()
        child_conn.close()
        watch_end.close()
        self._killed = False
        self._kill_lock = threading.Lock()

    def kill(self) -> None:
        """Kill the child's process group; safe to call twice (slot thread and shutdown)."""
        with self._kill_lock:
            if self._killed:
                return
            self._killed = True
        pid = self.proc.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        # A child that has not reached os.setsid() yet has no group of its own
        # (killpg fails): kill the process itself, or join() waits its 5 s out.
        self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()
        self._lifeline.close()


class ProcessPool(_Slots):
    """N slots, each a thread driving one child process."""

    def __init__(
        self,
        app: App,
        size: int,
        on_done: Done,
        app_path: str,
        max_lines: int,
    ) -> None:
        super().__init__(app, size, on_done)
        self.app_path = app_path
        self.max_lines = max_lines
        self._children: list[_Child] = []
        self._lock = threading.Lock()

    def replace(self) -> None:  # children are killed, never abandoned
        pass

    def _new_child(self) -> _Child:
        child = _Child(self.app_path)
        with self._lock:
            self._children.append(child)
        return child

    def _drop_child(self, child: _Child) -> None:
        child.kill()
        with self._lock:
            if child in self._children:
                self._children.remove(child)

    def _loop(self) -> None:
        child = self._new_child()
        while True:
            attempt = self._queue.get()
            if attempt is None:
                self._drop_child(child)
                return
            if not attempt.try_begin():
                continue  # ended while it waited for this slot: the child stays as it is
            for before in self.hooks.before_attempt:
                before(attempt)
            if attempt.lease.kind != "python":
                outcome = run_command(
                    attempt,
                    _timeout_s(attempt),
                    self.app.settings.container_runtime,
                    self.app.broker,
                )
            else:
                outcome, child = self._run_in_child(child, attempt)
            # the child is gone or has answered: the execution is over
            for after in self.hooks.after_attempt:
                after(attempt, outcome)
            if attempt.finish():
                # handed back on shutdown (or already reported by the worker):
                # a report now could race the hand-back and end the attempt twice
                continue
            self.on_done(attempt, outcome)

    def _run_in_child(self, child: _Child, attempt: Attempt) -> tuple[Outcome, _Child]:
        lease = attempt.lease
        fields = {k: getattr(lease, k) for k in lease.__slots__}
        with attempt.lock:
            # killed between try_begin() and here: the worker has ended the attempt;
            # leave the idle child alone (a pgid now would have it killed for nothing)
            killed = attempt.kill_reason is not None
            if not killed:
                attempt.pgid = child.proc.pid
        if killed:
            return _killed_outcome(attempt), child
        try:
            child.conn.send({"lease": fields, "max_lines": self.max_lines})
            while True:
                if child.conn.poll(0.05):
                    got: Outcome | Pending = child.conn.recv()
                    if isinstance(got, Pending):  # ctx.progress in the child
                        attempt.progress_of().merge(got)
                        continue
                    return got, child
                if attempt.kill_reason is not None or not child.proc.is_alive():
                    break
        except (EOFError, OSError, BrokenPipeError):
            pass
        reason = attempt.kill_reason
        self._drop_child(child)
        with attempt.lock:
            attempt.pgid = None
        fresh = self._new_child()
        if reason is None:
            return Outcome(ok=False, outcome="failed", error="worker child process died"), fresh
        return _killed_outcome(attempt), fresh

    def shutdown(self) -> None:
        super().shutdown()
        with self._lock:
            children = list(self._children)
        for child in children:
            child.kill()


#: the pools a worker runs attempts in
Pool = ThreadPool | ProcessPool
