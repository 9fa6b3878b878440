"""Huey 3 on Redis (RedisHuey, blocking reads): one consumer process with 32
thread workers, periodic tasks off, retries 0, results as Huey keeps them
(only non-None return values: none here)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.peers import PEER_SLOTS
from bench.peers._proc import missing_python, version
from bench.peers._python_peer import PythonPeer

NAME = "huey"


def missing() -> str | None:
    return missing_python("huey", "huey")


def describe() -> dict[str, str]:
    return {
        "version": f"huey {version('huey')}",
        "config": f"one consumer process, {PEER_SLOTS} thread workers (-k thread -w "
        f"{PEER_SLOTS}), RedisHuey blocking, periodic off, retries 0",
        "guarantee": "at most once: a task is popped off its list when a worker takes it "
        "and is lost if the consumer dies while it runs; no acknowledgement, no fencing; "
        "no history (a result only for a non-None return value)",
    }


def make_huey(url: str, ns: str) -> tuple[Any, dict[str, Any]]:
    from huey import RedisHuey

    from bench.peers._bodies import SYNC

    huey = RedisHuey(name=ns, url=url)
    tasks = {kind: huey.task(name=f"bench.{kind}")(fn) for kind, fn in SYNC.items()}
    return huey, tasks


def run_worker() -> None:
    """The consumer process's main (Huey stops on SIGTERM)."""
    import logging
    import os

    logging.basicConfig(level=logging.WARNING)
    huey, _ = make_huey(os.environ["RCBENCH_URL"], os.environ["RCBENCH_NS"])
    huey.create_consumer(workers=PEER_SLOTS, worker_type="thread", periodic=False).run()


class _Huey(PythonPeer):
    module = __name__
    has_bulk = False  # Huey enqueues one task per call

    def __init__(self, url: str, ns: str) -> None:
        self.url, self.ns = url, ns
        self.huey, self.tasks = make_huey(url, ns)

    def enqueue(self, kind: str, count: int, bulk: bool) -> float:
        task = self.tasks[kind]
        t0 = time.perf_counter()
        for _ in range(count):
            task()
        return time.perf_counter() - t0


@contextmanager
def session(url: str, ns: str) -> Iterator[_Huey]:
    yield _Huey(url, ns)
