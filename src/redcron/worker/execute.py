"""Running one attempt: a Python callable or a command, turned into an Outcome."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redcron import serde
from redcron.broker import Lease
from redcron.context import Context
from redcron.errors import Permanent, Retry
from redcron.worker import capture

if TYPE_CHECKING:
    from redcron.app import App

MAX_ERROR_CHARS = 4_000


@dataclass
class Outcome:
    """How an attempt ended, ready to report."""

    ok: bool
    result: bytes = b""
    outcome: str = "succeeded"  # succeeded | failed | timed_out | cancelled
    error: str = ""
    retryable: bool = True
    delay_ms: int | None = None
    exit_code: int | None = None
    lines: list[str] = field(default_factory=list)


@dataclass(eq=False)
class Attempt:
    """One leased attempt on this worker."""

    lease: Lease
    buffer: capture.LineBuffer
    began: float | None = None  # monotonic time execution began (None: waiting for a slot)
    ended: float | None = None  # monotonic time it ended (ran to an outcome, or was ended)
    deadline: float | None = None  # monotonic time at which it is timed out
    marked: bool = False  # the 'running' mark was sent
    finished: bool = False
    abandoned: bool = False  # ended by the worker (never begun, revoked or timed out in a
    # thread we cannot kill, or handed back): the pool must not start or report it
    pgid: int | None = None  # process group to kill (command, or process-pool child)
    kill_reason: str | None = None
    slot_freed: bool = False  # the worker gave its slot back (guarded by the worker's lock)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def try_begin(self) -> bool:
        """Claim the attempt for the executing thread, just before the task runs.

        False if it was cancelled, timed out or handed back while it waited for
        a slot: whoever ended it has reported it (or handed it back), so it must
        not start at all.  Checked and set under the attempt's lock, so an end and a
        start cannot both win.
        """
        with self.lock:
            if self.abandoned or self.kill_reason is not None:
                return False
            self.began = time.monotonic()
            if self.lease.timeout_ms > 0:
                self.deadline = self.began + self.lease.timeout_ms / 1000
            return True

    def finish(self) -> bool:
        """Mark the attempt finished (it ran); True if the worker abandoned it
        meanwhile (timed out, revoked or handed back): its outcome is not
        reported by the pool."""
        with self.lock:
            self.finished = True
            if self.ended is None:  # a timed-out thread ends after the worker ended it
                self.ended = time.monotonic()
            return self.abandoned

    def kill(self, reason: str) -> bool:
        """Kill the attempt's process group (commands / process pool); False if it has none."""
        with self.lock:
            self.kill_reason = self.kill_reason or reason
            pgid = self.pgid
        if pgid is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        return True


def _trim(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else "…" + text[-MAX_ERROR_CHARS:]


def run_python(app: App, attempt: Attempt, broker: Any = None) -> Outcome:
    """Run a registered task on the current thread, capturing its output."""
    lease = attempt.lease
    task = app.tasks.get(lease.name)
    if task is None:
        return Outcome(
            ok=False,
            outcome="failed",
            error=f"unknown task {lease.name!r} on this worker (registered: "
            f"{', '.join(sorted(app.tasks)) or 'none'}); is the worker running the right app?",
            retryable=True,
        )
    capture.attach(attempt.buffer)
    try:
        args, kwargs = serde.loads(lease.args)
        if task.wants_ctx:
            run_id, _, task_name = lease.iid.rpartition("/")
            ctx = Context(
                task_id=lease.iid,
                attempt=lease.attempt,
                # stable across attempts: the task id, or run_id:task_name in a run
                idem_key=f"{run_id}:{task_name}" if run_id else lease.iid,
                tenant=lease.tenant,
                queue=task.options.queue,
                shard=lease.shard,
                broker=broker,
                run_id=run_id or None,
            )
            value = task.fn(ctx, *args, **kwargs)
        else:
            value = task.fn(*args, **kwargs)
        try:
            result = serde.dumps(value, field="result")
        except Exception as exc:
            return Outcome(ok=False, outcome="failed", error=str(exc), retryable=False)
        return Outcome(ok=True, result=result)
    except Retry as exc:
        delay = None if exc.delay is None else int(exc.delay * 1000)
        return Outcome(ok=False, outcome="failed", error=f"Retry: {exc}", delay_ms=delay)
    except Permanent as exc:
        return Outcome(
            ok=False, outcome="failed", error=_trim(f"Permanent: {exc}"), retryable=False
        )
    except BaseException as exc:  # task code may raise anything, SystemExit included
        if isinstance(exc, KeyboardInterrupt):
            raise
        return Outcome(ok=False, outcome="failed", error=_trim(traceback.format_exc()))
    finally:
        capture.attach(None)


def container_argv(runtime: str, payload: dict[str, Any]) -> list[str]:
    """``<runtime> run --rm [--cpus N] [--memory M] [-e K=V...] IMAGE [COMMAND...]``.

    ``runtime`` is a docker-compatible CLI (docker, podman, nerdctl) or any
    stand-in executable taking the same arguments.
    """
    argv = [*runtime.split(), "run", "--rm"]
    if payload.get("cpu"):
        argv += ["--cpus", str(payload["cpu"])]
    if payload.get("mem"):
        argv += ["--memory", str(payload["mem"])]
    for key, value in sorted((payload.get("env") or {}).items()):
        argv += ["-e", f"{key}={value}"]
    return [*argv, str(payload["image"]), *(payload.get("command") or [])]


def run_command(
    attempt: Attempt, timeout_s: float | None, container_runtime: str = "docker"
) -> Outcome:
    """Run a command (or container) task in its own process group; kill the group at
    the timeout."""
    payload = serde.loads(attempt.lease.args) or {}
    if attempt.lease.kind == "container":
        argv = container_argv(container_runtime, payload)
        payload = {"argv": argv}
    argv = payload.get("argv") or []
    env = dict(os.environ)
    env.update(payload.get("env") or {})
    try:
        proc = subprocess.Popen(
            argv,
            cwd=payload.get("cwd") or None,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return Outcome(
            ok=False, outcome="failed", error=f"cannot start {argv!r}: {exc}", retryable=False
        )
    with attempt.lock:
        attempt.pgid = proc.pid
        killed_early = attempt.kill_reason is not None
    if killed_early:
        attempt.kill(attempt.kill_reason or "cancelled")
    out = b""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        attempt.kill("timed_out")
        out, _ = proc.communicate()
    with attempt.lock:
        attempt.pgid = None
    for line in out.decode(errors="replace").splitlines():
        attempt.buffer.write(line + "\n")
    code = proc.returncode
    if attempt.kill_reason == "timed_out":
        return Outcome(
            ok=False,
            outcome="timed_out",
            error=f"killed after timeout of {timeout_s}s",
            exit_code=code,
        )
    if attempt.kill_reason == "cancelled":
        return Outcome(ok=False, outcome="cancelled", error="cancelled", exit_code=code)
    if code == 0:
        return Outcome(ok=True, result=serde.dumps({"exit_code": 0}), exit_code=0)
    return Outcome(
        ok=False, outcome="failed", error=f"command exited with code {code}", exit_code=code
    )
