"""Pure time helpers: every function takes ``now`` (or a fraction) as an argument."""

from __future__ import annotations

import base64
import os
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_B32_TO_CROCKFORD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", _CROCKFORD.encode())


def backoff_ceiling_ms(base_ms: int, cap_ms: int, attempt: int) -> int:
    """Largest delay before the retry that follows failed attempt ``attempt`` (1-based).

    ``min(base * 2^(attempt-1), cap)``; the actual delay is drawn uniformly
    below it (full jitter).  Mirrors ``end_attempt`` in ``lua/lib/common.lua``.
    """
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    return int(min(base_ms * 2 ** (attempt - 1), cap_ms))


def backoff_delay_ms(base_ms: int, cap_ms: int, attempt: int, fraction: float) -> int:
    """Full-jitter delay: ``floor(ceiling * fraction)`` with ``fraction`` in [0, 1)."""
    return int(backoff_ceiling_ms(base_ms, cap_ms, attempt) * fraction)


def ulid(now_ms: int | None = None, randomness: bytes | None = None) -> str:
    """A 26-character ULID: 48-bit time then 80 random bits, Crockford base32.

    Sortable by creation time, so ids list in order in ``redis-cli``.
    """
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    rnd = os.urandom(10) if randomness is None else randomness
    head = []
    for _ in range(10):
        head.append(_CROCKFORD[ts & 31])
        ts >>= 5
    # 80 random bits are exactly 16 base32 characters: let the C encoder do them
    tail = base64.b32encode(rnd).translate(_B32_TO_CROCKFORD).decode()
    return "".join(reversed(head)) + tail
