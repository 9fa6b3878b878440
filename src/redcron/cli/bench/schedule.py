"""``redcron bench schedule``: the cost of ``next_fire`` (pure computation, no Redis)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from redcron.schedule.triggers import make_trigger, next_fire


def schedule(calls: int = 2_000) -> dict[str, Any]:
    """Microseconds per ``next_fire`` call (pure computation, no Redis): the one
    bisect jump of a quiet stretch, in UTC and in a DST zone, and the window scan
    within 3 h before a fall-back, where wall order is not instant order."""
    base = datetime(2026, 6, 10, 12, 0, 7, tzinfo=UTC)
    quiet = [base + timedelta(seconds=37 * i) for i in range(calls)]
    fall_back = datetime(2026, 10, 24, 23, tzinfo=UTC)  # Berlin falls back at 01:00 UTC
    near = [fall_back + timedelta(seconds=7 * (i % 1_500)) for i in range(calls)]
    cases = {
        "every_5min_utc": ("*/5 * * * *", "UTC", quiet),
        "every_5min_berlin": ("*/5 * * * *", "Europe/Berlin", quiet),
        "daily_0200_utc": ("0 2 * * *", "UTC", quiet),
        "daily_0200_berlin": ("0 2 * * *", "Europe/Berlin", quiet),
        "every_5min_berlin_near_fall_back": ("*/5 * * * *", "Europe/Berlin", near),
    }
    out: dict[str, Any] = {"calls": calls}
    for name, (expr, tz, afters) in cases.items():
        trigger = make_trigger(cron=expr, tz=tz)
        started = time.perf_counter()
        for after in afters:
            next_fire(trigger, after)
        out[f"{name}_us"] = round((time.perf_counter() - started) / len(afters) * 1e6, 2)
    return out
