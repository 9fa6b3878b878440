"""Pure time helpers: ULIDs (``now`` may be passed in).

The retry backoff has no Python copy: ``end_attempt`` in ``lua/lib/attempts.lua``
computes it, and ``tests/lua/test_failure_paths.py`` checks the due times it sets.
"""

from __future__ import annotations

import os
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = tuple(_CROCKFORD[i >> 5] + _CROCKFORD[i & 31] for i in range(1024))


def ulid(now_ms: int | None = None, randomness: bytes | None = None) -> str:
    """A 26-character ULID: 48-bit time then 80 random bits, Crockford base32.

    Sortable by creation time, so ids list in order in ``redis-cli``.
    """
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
