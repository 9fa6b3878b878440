"""RQ 2: one ``SimpleWorker`` process (jobs run in the worker process, one at
a time; RQ's default ``Worker`` forks a child per job, some tens of jobs a
second), ``Queue.enqueue`` and ``Queue.enqueue_many``, results and job hashes
kept as RQ keeps them (500 s)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.peers._proc import missing_python, version
from bench.peers._python_peer import PythonPeer

NAME = "rq"

#: the bodies as RQ finds them (a dotted path the worker imports)
BODIES = "bench.peers._bodies"


def missing() -> str | None:
    return missing_python("rq", "rq")


def describe() -> dict[str, str]:
    return {
        "version": f"rq {version('rq')}",
        "config": "one SimpleWorker process (no fork per job; RQ's default Worker forks "
        "one per job), one job at a time, the scheduler off",
        "guarantee": "at most once: a job taken by a worker that dies is moved to the "
        "failed registry when the started registry is cleaned, not run again; no fencing; "
        "job hash and result kept 500 s (result_ttl default)",
    }


def _queue(url: str, ns: str) -> Any:
    from redis import Redis
    from rq import Queue

    return Queue(ns, connection=Redis.from_url(url))


def run_worker() -> None:
    """The worker process's main (RQ stops on SIGTERM)."""
    import os

    from rq import SimpleWorker

    ns = os.environ["RCBENCH_NS"]
    queue = _queue(os.environ["RCBENCH_URL"], ns)
    worker = SimpleWorker([queue], connection=queue.connection, name=f"{ns}-worker")
    worker.work(with_scheduler=False, logging_level="WARNING")


class _Rq(PythonPeer):
    module = __name__
    has_bulk = True  # Queue.enqueue_many: one pipeline per batch

    def __init__(self, url: str, ns: str) -> None:
        self.url, self.ns = url, ns
        self.queue = _queue(url, ns)
        self._ids = itertools.count()  # job ids under the namespace: deletable after

    def enqueue(self, kind: str, count: int, bulk: bool) -> float:
        from rq import Queue

        func = f"{BODIES}.{kind}"
        ns, ids, q = self.ns, self._ids, self.queue
        t0 = time.perf_counter()
        if bulk:
            for i in range(0, count, 1_000):
                q.enqueue_many(
                    [
                        Queue.prepare_data(func, job_id=f"{ns}-{next(ids)}")
                        for _ in range(min(1_000, count - i))
                    ]
                )
        else:
            for _ in range(count):
                q.enqueue(func, job_id=f"{ns}-{next(ids)}")
        return time.perf_counter() - t0


@contextmanager
def session(url: str, ns: str) -> Iterator[_Rq]:
    peer = _Rq(url, ns)
    try:
        yield peer
    finally:
        peer.queue.delete(delete_jobs=False)  # also off the rq:queues set, outside the ns
        peer.queue.connection.close()
