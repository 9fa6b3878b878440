"""Activity figures over minutes: attempts ended, and trigger lag
(``redcron.store.stats``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class MinuteActivity:
    """Attempts that ended in one minute (``redcron.store.stats.activity``).

    ``minute`` is the minute's start (UTC, server clock); ``failed`` counts
    attempts that failed, timed out or were lost, not cancelled ones nor
    hand-backs at worker shutdown."""

    minute: datetime
    succeeded: int
    failed: int


@dataclass(frozen=True, slots=True)
class LagSummary:
    """Trigger lag of the scheduled fires of a window of minutes
    (``redcron.store.stats.trigger_lag``); manual runs are not fires here.

    Lag is read from a histogram, so each figure is the upper bound of the
    bucket it falls in (``p50_s = 0.05``: half the fires were at most 50 ms
    late).  A figure beyond the last finite bound (``LAG_BUCKETS_S[-1]``, 300 s)
    reads as that bound, and ``beyond_last_bucket`` counts those fires.  The
    figures are None when there was no fire."""

    minutes: int
    fires: int
    p50_s: float | None
    p99_s: float | None
    max_bucket_s: float | None
    beyond_last_bucket: int
