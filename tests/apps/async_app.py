"""A mixed app for worker subprocess tests of ``async def`` tasks (issue 32 §6):
imported as ``async_app`` (``-A async_app:app``, ``tests/apps`` on ``PYTHONPATH``)
by workers, and by the tests for :func:`register`."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from redcron import App


def register(app: App) -> None:
    """Register the tasks on ``app``: one coroutine task and one plain."""

    @app.task(name="aio_whereami", retries=0)
    async def aio_whereami() -> dict[str, Any]:
        await asyncio.sleep(0)
        print("async print")
        return {"thread": threading.current_thread().name, "pid": os.getpid()}

    @app.task(name="plain_whereami", retries=0)
    def plain_whereami() -> dict[str, Any]:
        return {"thread": threading.current_thread().name, "pid": os.getpid()}


# Worker subprocesses get their deployment from the environment (never at import
# in the tests: no REDCRON_REDIS_URL there).
app: App | None = None
if os.environ.get("REDCRON_REDIS_URL"):
    app = App()
    register(app)
