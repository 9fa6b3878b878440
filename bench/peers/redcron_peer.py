"""redcron at its defaults, as ``bench throughput`` runs it: one worker process
(threads pool, 32 slots, prefetch 1 per slot), or ``redcron worker --procs N``
of them, the benchmark App of redcron/cli/bench/fixtures.py, enqueue and enqueue_many."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from bench.peers import Blpop
from redcron.cli.bench.fixtures import bench_run, succeeded_count, worker_process
from redcron.config import WORKER_PREFETCH_PER_SLOT, WORKER_THREADS

NAME = "redcron"


def missing() -> str | None:
    return None


def describe(procs: int = 1) -> dict[str, str]:
    from importlib.metadata import version

    how = (
        "one worker process"
        if procs == 1
        else f"redcron worker --procs {procs} ({procs} worker processes, a supervisor)"
    )
    each = "" if procs == 1 else " each"
    return {
        "version": version("redcron"),
        "config": f"{how}, threads pool, {WORKER_THREADS} slots{each}, prefetch "
        f"{WORKER_PREFETCH_PER_SLOT} per slot (the defaults), logging at INFO (its line per "
        "attempt, into a file) as `redcron worker` does; retries=0",
        "guarantee": "at least once: fenced leases (a lease expires and is re-leased; a late "
        "report from the old holder is refused), acknowledged on completion; every attempt "
        "and outcome kept in the task's history",
    }


class _Redcron:
    has_bulk = True

    def __init__(self, url: str, prefix: str, app: Any, procs: int = 1) -> None:
        self.url, self.ns, self.app, self.procs = url, prefix, app, procs

    def enqueue(self, kind: str, count: int, bulk: bool) -> float:
        task = self.app.tasks[f"bench.{kind}"]
        t0 = time.perf_counter()
        if bulk:
            for i in range(0, count, 1_000):
                task.enqueue_many([()] * min(1_000, count - i))
        else:
            for _ in range(count):
                task.enqueue()
        return time.perf_counter() - t0

    #: the command finished() reads with (taken out of the commandstats figure)
    finished_cmd = "hget"

    def finished(self) -> int:
        """Tasks that succeeded so far (the shards' outcome counters): the drain
        of ``--body noop`` is timed on these, not on FIFO markers (tasks leased
        in the same millisecond need not start in enqueue order)."""
        return succeeded_count(self.app)

    def worker(self) -> AbstractContextManager[Any]:
        return worker_process(self.url, self.ns, None, "threads", None, self.procs)

    def latency(self, samples: int, blpop: Blpop) -> list[float]:
        task = self.app.tasks["bench.now"]
        task.enqueue().result(timeout=60)  # warm: connected, scripts loaded
        out: list[float] = []
        for _ in range(samples):
            time.sleep(0.005)  # let the worker go idle (blocked on its wake list)
            t0 = time.time()
            started = task.enqueue().result(timeout=60)
            out.append((started - t0) * 1000)
        return out


@contextmanager
def session(url: str, ns: str, procs: int = 1) -> Iterator[_Redcron]:
    """redcron under a prefix of its own (``ns`` is ignored: bench_run makes
    the prefix and deletes its keys after), with ``procs`` worker processes."""
    with bench_run(url, kind="rccmp") as run:
        yield _Redcron(run.url, run.prefix, run.app, procs)
