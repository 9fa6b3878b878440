"""Driving beats in-process: tick until something shows, read a job's runs.
Imported by name (``tests/helpers`` is on ``sys.path``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from polling import wait_for

from redcron.app import App
from redcron.beat.beat import Beat
from redcron.model import RunRecord
from redcron.model.records import EPOCH


def tick_until(
    beats: Beat | Sequence[Beat], pred: Callable[[], Any], what: str, timeout: float = 15
) -> Any:
    """Tick every beat, then ask ``pred``, until it returns something truthy."""
    group = [beats] if isinstance(beats, Beat) else list(beats)

    def ticked() -> Any:
        for b in group:
            b.tick()
        return pred()

    return wait_for(ticked, what, timeout, interval=0.02)


def runs_of(app: App, job_id: str) -> list[RunRecord]:
    """A job's runs, oldest fire first."""
    return sorted(app.jobs.runs(job_id, limit=10_000), key=lambda r: r.scheduled_for or EPOCH)
