"""Tasks and a job for the browser test: imported as ``browser_app`` by a
``redcron worker -A browser_app:app`` subprocess (``tests/apps`` on
``PYTHONPATH``) and by the test, which calls :func:`register` and
:func:`put_job` on its own App so both sides agree on names.

- the job ``pipeline``: ``prepare`` (short) → ``crunch`` (sleeps ~3 s, so a
  browser can watch it go running → succeeded) → ``report``;
- ``broken``: fails permanently (``Permanent``: straight to the DLQ) until the
  key :func:`fixed_key` exists, which the test sets before it replays the task
  (else the replayed task would land in the DLQ again under the same id, and
  the row the test watches leave the list could come straight back).
"""

from __future__ import annotations

import os
import time

from redcron import App, Context, Permanent, Task
from redcron.model import JobRecord

JOB = "pipeline"
SLOW_TASK = "crunch"
SLOW_SECONDS = 3.0


def fixed_key(app: App) -> str:
    """Once this key exists, ``broken`` succeeds (under the test's key prefix)."""
    return f"{app.settings.prefix}:x:broken-fixed"


def register(app: App) -> None:
    """Register every task of this app on ``app``."""

    @app.task(name="browser.step", retries=0)
    def step(seconds: float = 0.0) -> str:
        time.sleep(seconds)
        return "ok"

    @app.task(name="browser.broken", retries=3)
    def broken(ctx: Context) -> str:
        assert ctx.broker is not None
        if not ctx.broker.client.exists(fixed_key(app)):
            raise Permanent("broken on purpose until the test fixes it")
        return "fixed"


def put_job(app: App) -> JobRecord:
    """Write the manual-only job ``pipeline`` (no trigger: it runs when triggered)."""
    return app.jobs.put(
        JOB,
        tasks={
            "prepare": Task("browser.step", args=[0.5]),
            SLOW_TASK: Task("browser.step", args=[SLOW_SECONDS], depends_on=["prepare"]),
            "report": Task("browser.step", depends_on=[SLOW_TASK]),
        },
    )


# The worker subprocess gets its deployment from the environment.  The test
# imports this module only for register()/put_job(); without REDCRON_REDIS_URL
# no App is built, so nothing here can fall back to a developer's Redis on :6379.
app: App | None = None
if os.environ.get("REDCRON_REDIS_URL"):
    app = App()
    register(app)
