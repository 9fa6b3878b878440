"""What the Python peers share: their latency, measured from the stamps their
``now`` body pushes (enqueue, then BLPOP the start time), and a base for their
session objects (:class:`PythonPeer`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from bench.peers import Blpop, stamps_key
from bench.peers._proc import process, python


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


class PythonPeer:
    """What the Python peers' session objects share: the worker process (the
    peer module's ``run_worker()``, given the URL and namespace in its
    environment) and the latency from the ``now`` body's stamps."""

    #: the peer's module, whose ``run_worker()`` is the worker process's main
    module = ""

    def __init__(self, url: str, ns: str) -> None:
        self.url, self.ns = url, ns

    def enqueue(self, kind: str, count: int, bulk: bool) -> float:
        raise NotImplementedError

    def worker(self) -> AbstractContextManager[Any]:
        code = f"from {self.module} import run_worker; run_worker()"
        return process(python(code), self.url, self.ns)

    def latency(self, samples: int, blpop: Blpop) -> list[float]:
        return stamp_latency(lambda: self.enqueue("now", 1, False), blpop, self.ns, samples)
