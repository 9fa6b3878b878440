"""An App with one declared cron job, for ``redcron beat -A beat_app:app`` in tests
(``tests/apps`` on ``PYTHONPATH``).  The Redis URL comes from ``--redis`` or
``REDCRON_REDIS_URL``; without either it points at a closed port, never at a
developer's Redis on :6379."""

from __future__ import annotations

import os

from redcron import App

app = App(os.environ.get("REDCRON_REDIS_URL") or "redis://127.0.0.1:1/0")


@app.cron(every="1s", name="heartbeat", overlap="allow")
def heartbeat() -> None:
    """Does nothing: the tests look at the runs the beat creates."""
