"""Example tasks for ``redcron up`` (``redcron worker -A examples.tasks:app``).

Run ``redcron up`` from the repository root: it starts Redis and a worker,
then calls :func:`enqueue_examples` once.
"""

from __future__ import annotations

import logging
import time

from redcron import App, Context, TaskHandle

log = logging.getLogger(__name__)

app = App()


@app.task
def add(x: int, y: int) -> int:
    """The smallest task there is."""
    return x + y


@app.task(retries=3, retry_base=0.5, retry_cap=2.0)
def flaky(ctx: Context, succeed_on: int = 3) -> str:
    """Fails on purpose until attempt ``succeed_on``: watch the retries in ``task show``."""
    if ctx.attempt < succeed_on:
        # not "attempt 1 of 3": 3 is where it succeeds, not the attempts allowed
        raise RuntimeError(f"attempt {ctx.attempt} fails on purpose (succeeds on {succeed_on})")
    return f"succeeded on attempt {ctx.attempt}"


@app.task(timeout=120)
def slow(seconds: float = 5.0) -> float:
    """Sleeps, printing progress (captured into the attempt's log)."""
    for i in range(int(seconds)):
        print(f"slow: {i + 1}/{int(seconds)}s", flush=True)
        time.sleep(1)
    time.sleep(seconds - int(seconds))
    return seconds


@app.task(retries=2)
def send_welcome(ctx: Context, user: str) -> str:
    """An effect guarded by ``ctx.once``: a retry after the send does not send twice."""
    if ctx.once("welcome-email"):
        print(f"sending the welcome email to {user}", flush=True)
        return "sent"
    return "already sent by an earlier attempt"


def enqueue_examples(app: App) -> list[TaskHandle]:
    """Enqueue a handful of the tasks above and one shell command."""
    return [
        add.enqueue(2, 3),
        add.enqueue(40, 2, _tenant="acme"),
        flaky.enqueue(succeed_on=3),
        slow.enqueue(3.0),
        send_welcome.enqueue("ada@example.com"),
        app.enqueue_command(["sh", "-c", "echo hello from redcron"]),
    ]
