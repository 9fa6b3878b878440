"""Tasks for worker tests: imported as ``chaos_app`` by worker subprocesses
(``-A chaos_app:app``, with ``tests/apps`` on ``PYTHONPATH``) and by the tests
themselves, which call :func:`register` on their own App so both sides agree on
task names and options.

Tasks record what they saw under ``<prefix>:x:...`` (deleted with the test's
prefix), so the tests can check attempts, pids and effects from outside.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from redcron import App, Context, Permanent, Retry

log = logging.getLogger("chaos_app")


def rec_key(app: App, *parts: object) -> str:
    """Where tasks record things (under the test's key prefix)."""
    return ":".join([app.settings.prefix, "x", *map(str, parts)])


def register(app: App) -> None:
    """Register every test task on ``app``."""

    def client(ctx: Context) -> Any:
        assert ctx.broker is not None
        return ctx.broker.client

    @app.task(name="slow", retries=3, retry_base=0.05, retry_cap=0.2)
    def slow(ctx: Context, seconds: float, every_attempt: bool = False) -> str:
        """Sleep ``seconds`` on attempt 1 (or on every attempt); result names the attempt."""
        client(ctx).rpush(rec_key(app, "attempts", ctx.task_id), f"{ctx.attempt}:{os.getpid()}")
        if ctx.attempt == 1 or every_attempt:
            time.sleep(seconds)
        return f"attempt-{ctx.attempt}"

    @app.task(name="spin", retries=0)
    def spin(ctx: Context, limit: float = 120.0) -> None:
        """Never finishes on its own (bounded so a leaked child cannot run forever)."""
        client(ctx).rpush(rec_key(app, "pids", ctx.task_id), os.getpid())
        end = time.monotonic() + limit
        while time.monotonic() < end:
            time.sleep(0.02)

    @app.task(name="wait_key", retries=0)
    def wait_key(ctx: Context, key: str, limit: float = 60.0) -> int:
        """Hold a slot until ``key`` exists (bounded); returns the pid that ran it."""
        end = time.monotonic() + limit
        while not client(ctx).exists(key) and time.monotonic() < end:
            time.sleep(0.02)
        return os.getpid()

    @app.task(name="whoami", retries=0)
    def whoami() -> int:
        return os.getpid()

    @app.task(name="echo", retries=0)
    def echo(value: Any) -> Any:
        return value

    @app.task(name="mark", retries=0)
    def mark(ctx: Context, name: str) -> str:
        client(ctx).set(rec_key(app, "mark", name), ctx.task_id)
        return name

    @app.task(name="flaky", retries=3, retry_base=0.05, retry_cap=0.1)
    def flaky(ctx: Context, fail_until: int) -> int:
        """Raise on attempts ``< fail_until``; return the attempt that succeeded."""
        if ctx.attempt < fail_until:
            raise ValueError(f"flaky: attempt {ctx.attempt} fails")
        return ctx.attempt

    @app.task(name="retry_later", retries=2)
    def retry_later(ctx: Context, delay: float) -> int:
        if ctx.attempt == 1:
            raise Retry("not yet", delay=delay)
        return ctx.attempt

    @app.task(name="permanent", retries=5)
    def permanent(ctx: Context) -> None:
        raise Permanent("bad input, never retry")

    @app.task(name="needs_marker", retries=1, retry_base=0.05, retry_cap=0.1)
    def needs_marker(ctx: Context, marker: str) -> str:
        """Fails until the key ``marker`` exists."""
        if not client(ctx).exists(marker):
            raise RuntimeError(f"marker {marker} is not set (attempt {ctx.attempt})")
        return "replayed"

    @app.task(name="probe", retries=2, retry_base=0.05, retry_cap=0.1)
    def probe(ctx: Context) -> str:
        """Record what ctx looks like, write output, fail once (Retry) then succeed."""
        once = ctx.once("x")
        seen = {
            "task_id": ctx.task_id,
            "attempt": ctx.attempt,
            "idem_key": ctx.idem_key,
            "once": once,
        }
        client(ctx).rpush(rec_key(app, "probe", ctx.task_id), json.dumps(seen))
        print(f"print from attempt {ctx.attempt}")
        log.info("log from attempt %d", ctx.attempt)
        log.warning("warning from attempt %d", ctx.attempt)
        if ctx.attempt == 1:
            raise Retry("once more", delay=0)
        return "probed"

    @app.task(name="ck_hold", retries=2, concurrency_key="key", max_concurrent=1)
    def ck_hold(ctx: Context, key: str, gate: str, limit: float = 60.0) -> int:
        """One at a time per ``key`` (a concurrency key): records its start, then
        holds until ``gate`` exists (bounded); returns the attempt."""
        client(ctx).rpush(rec_key(app, "ck", key), f"{ctx.task_id}:{ctx.attempt}:{os.getpid()}")
        end = time.monotonic() + limit
        while not client(ctx).exists(gate) and time.monotonic() < end:
            time.sleep(0.02)
        return ctx.attempt

    @app.task(name="progress_loop", retries=0)
    def progress_loop(ctx: Context, n: int) -> int:
        for i in range(1, n + 1):
            ctx.progress(i, n, f"step {i}" if i % 100 == 0 else None)
        return n

    @app.task(name="noisy_fail", retries=0)
    def noisy_fail(ctx: Context) -> None:
        for i in range(3):
            print(f"noisy line {i}")
        log.warning("about to fail")
        raise RuntimeError("noisy failure")


# Worker subprocesses get their deployment from the environment.  The tests
# import this module only for register(); without REDCRON_REDIS_URL no App is
# built, so nothing here can fall back to a developer's Redis on :6379.
app: App | None = None
if os.environ.get("REDCRON_REDIS_URL"):
    app = App()
    register(app)
