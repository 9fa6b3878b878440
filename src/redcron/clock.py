"""Pure time helpers: ULIDs (``now`` may be passed in).

The retry backoff has no Python copy: ``end_attempt`` in ``lua/lib/attempts.lua``
computes it, and ``tests/lua/test_failure_paths.py`` checks the due times it sets.
"""

from __future__ import annotations

import os
import threading
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = tuple(_CROCKFORD[i >> 5] + _CROCKFORD[i & 31] for i in range(1024))


_last = [0, 0]  # the time and randomness of this process's last ULID
_last_lock = threading.Lock()


def _monotonic(ts: int) -> tuple[int, int]:
    """(time, randomness) of a new ULID, after this process's last one: within one
    millisecond (or a clock step back) the last randomness plus one, so ids a
    process makes list in the order it made them (a job's held work, ordered by
    id, is tried oldest first)."""
    with _last_lock:
        last_ts, last_rnd = _last
        if ts > last_ts:
            rnd = int.from_bytes(os.urandom(10), "big")
        elif last_rnd + 1 < 1 << 80:
            ts, rnd = last_ts, last_rnd + 1
        else:  # the randomness ran out within the millisecond: the next one
            ts, rnd = last_ts + 1, int.from_bytes(os.urandom(10), "big")
        _last[0], _last[1] = ts, rnd
        return ts, rnd


def ulid(now_ms: int | None = None, randomness: bytes | None = None) -> str:
    """A 26-character ULID: 48-bit time then 80 random bits, Crockford base32.

    Sortable by creation time, so ids list in order in ``redis-cli``; a process's
    own ids (no ``now_ms`` nor ``randomness`` given) in the order it made them.
    """
    if now_ms is None and randomness is None:
        ts, rnd = _monotonic(int(time.time() * 1000))
    else:
        ts = int(time.time() * 1000) if now_ms is None else now_ms
        rnd = int.from_bytes(os.urandom(10) if randomness is None else randomness, "big")
    pairs = _PAIRS
    # 50 bits of time (2 leading zero bits) then 80 of randomness: 10-bit chunks,
    # two characters each, from a table (this runs once per enqueued task)
    return (
        pairs[(ts >> 40) & 1023]
        + pairs[(ts >> 30) & 1023]
        + pairs[(ts >> 20) & 1023]
        + pairs[(ts >> 10) & 1023]
        + pairs[ts & 1023]
        + pairs[(rnd >> 70) & 1023]
        + pairs[(rnd >> 60) & 1023]
        + pairs[(rnd >> 50) & 1023]
        + pairs[(rnd >> 40) & 1023]
        + pairs[(rnd >> 30) & 1023]
        + pairs[(rnd >> 20) & 1023]
        + pairs[(rnd >> 10) & 1023]
        + pairs[rnd & 1023]
    )


def span(ms: int) -> str:
    """A duration for people: ms below a second, else seconds."""
    return f"{ms}ms" if ms < 1000 else f"{ms / 1000:.1f}s"
