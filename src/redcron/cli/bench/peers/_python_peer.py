"""What the Python peers share: their latency, measured from the stamps their
``now`` body pushes (enqueue, then BLPOP the start time)."""

from __future__ import annotations

import time
from collections.abc import Callable

from redcron.cli.bench.peers import stamps_key


def stamp_latency(
    enqueue_now: Callable[[], object],
    blpop: Callable[[str, float], float | None],
    ns: str,
    samples: int,
) -> list[float]:
    """Enqueue → start (ms) of ``samples`` ``now`` tasks one at a time, after
    one to warm up; ``blpop(key, timeout)`` returns the pushed start time."""
    key = stamps_key(ns)
    enqueue_now()
    if blpop(key, 60) is None:
        raise TimeoutError("the worker ran no task within 60 s")
    out: list[float] = []
    for _ in range(samples):
        time.sleep(0.005)  # let the worker go idle
        t0 = time.time()
        enqueue_now()
        started = blpop(key, 60)
        if started is None:
            raise TimeoutError("a latency sample did not start within 60 s")
        out.append((started - t0) * 1000)
    return out
