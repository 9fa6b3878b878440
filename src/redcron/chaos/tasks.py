"""The tasks the chaos scenario runs, registered under ``chaos.*``.

Workers load them as ``redcron.chaos.tasks:chaos_app()`` (the processes pool
needs an importable app): the factory builds the App from the environment the
runner gives its workers (``REDCRON_REDIS_URL``, ``REDCRON_SHARDS``...), when
called, never at import.  The runner registers the same tasks on its own App
with :func:`register`, so both sides agree on names and options.
"""

from __future__ import annotations

import time

from redcron.app import App
from redcron.context import Context
from redcron.errors import Permanent


def register(app: App) -> App:
    """Register every chaos task on ``app``; returns it."""

    @app.task(name="chaos.work", retries=3, retry_base=0.05, retry_cap=0.2)
    def work(ctx: Context, ms: int = 0, fail_until: int = 0, permanent: bool = False) -> int:
        """Sleep ``ms``; fail (retryably) on attempts before ``fail_until``; with
        ``permanent``, fail for good.  Returns the attempt that succeeded."""
        if ms:
            time.sleep(ms / 1000)
        if permanent:
            raise Permanent("chaos: permanent failure")
        if ctx.attempt < fail_until:
            raise RuntimeError(f"chaos: transient failure on attempt {ctx.attempt}")
        return ctx.attempt

    @app.task(name="chaos.hold", retries=3, retry_base=0.05, retry_cap=0.2)
    def hold(seconds: float) -> str:
        """Hold a slot for ``seconds`` (the runner cancels it while it runs)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.02)
        return "held"

    @app.task(name="chaos.step", retries=2, retry_base=0.05, retry_cap=0.2)
    def step(ctx: Context, ms: int = 5, fail_until: int = 0) -> str:
        """A DAG task: sleep ``ms``, fail on attempts before ``fail_until``."""
        time.sleep(ms / 1000)
        if ctx.attempt < fail_until:
            raise RuntimeError(f"chaos: step fails on attempt {ctx.attempt}")
        return "ok"

    @app.task(name="chaos.broken", retries=0)
    def broken() -> None:
        """A DAG branch that always fails: its downstream ends upstream_failed."""
        raise Permanent("chaos: this branch always fails")

    return app


def chaos_app() -> App:
    """A worker's App (``-A redcron.chaos.tasks:chaos_app()``), from the environment."""
    return register(App())
