"""Dramatiq 2 on its Redis broker: one worker process with 32 worker threads
(``dramatiq.Worker``, as ``dramatiq --processes 1 --threads 32`` runs it),
the default middleware, max_retries 0, no results middleware."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.peers import PEER_SLOTS
from bench.peers._proc import missing_python, version
from bench.peers._python_peer import PythonPeer

NAME = "dramatiq"


def missing() -> str | None:
    return missing_python("dramatiq", "dramatiq")


def describe() -> dict[str, str]:
    return {
        "version": f"dramatiq {version('dramatiq')}",
        "config": f"one worker process, {PEER_SLOTS} worker threads, RedisBroker (its own "
        "namespace), default middleware, max_retries 0",
        "guarantee": "at least once: acknowledged after the task ran (a dead worker's "
        "unacked messages are requeued once its heartbeat is 60 s old); no lease fencing; "
        "no result or history kept (no Results middleware)",
    }


def make_broker(url: str, ns: str) -> tuple[Any, dict[str, Any]]:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    from bench.peers._bodies import SYNC

    broker = RedisBroker(url=url, namespace=ns)
    dramatiq.set_broker(broker)
    actors = {
        kind: dramatiq.actor(fn, actor_name=f"bench_{kind}", max_retries=0, broker=broker)
        for kind, fn in SYNC.items()
    }
    return broker, actors


def run_worker() -> None:
    """The worker process's main: runs until SIGTERM or SIGINT."""
    import os
    import signal
    import threading

    from dramatiq import Worker

    broker, _ = make_broker(os.environ["RCBENCH_URL"], os.environ["RCBENCH_NS"])
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    worker = Worker(broker, worker_threads=PEER_SLOTS)
    worker.start()
    stop.wait()
    worker.stop()
    broker.close()


class _Dramatiq(PythonPeer):
    module = __name__
    has_bulk = False  # group() and pipelines still enqueue one message at a time

    def __init__(self, url: str, ns: str) -> None:
        self.url, self.ns = url, ns
        self.broker, self.actors = make_broker(url, ns)

    def enqueue(self, kind: str, count: int, bulk: bool) -> float:
        send = self.actors[kind].send
        t0 = time.perf_counter()
        for _ in range(count):
            send()
        return time.perf_counter() - t0


@contextmanager
def session(url: str, ns: str) -> Iterator[_Dramatiq]:
    peer = _Dramatiq(url, ns)
    try:
        yield peer
    finally:
        peer.broker.close()
