"""Celery 5 on its Redis transport: one worker process, the solo pool (one task
at a time in the worker's own thread), prefetch multiplier 4 (Celery's
default, so 4 messages reserved), acks before the task runs (``acks_late``
off, the default), results ignored; gossip, mingle and heartbeat off (the
usual advice on Redis; they add broadcast traffic)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.peers._proc import missing_python, version
from bench.peers._python_peer import PythonPeer

NAME = "celery"
PREFETCH_MULTIPLIER = 4


def missing() -> str | None:
    return missing_python("celery", "celery")


def describe() -> dict[str, str]:
    return {
        "version": f"celery {version('celery')}, kombu {version('kombu')}",
        "config": f"one worker process, --pool solo, worker_prefetch_multiplier "
        f"{PREFETCH_MULTIPLIER} (the default), task_acks_late off (the default), "
        "task_ignore_result, --without-gossip --without-mingle --without-heartbeat",
        "guarantee": "at most once once started: acknowledged when the worker takes the "
        "task, before it runs (a reserved but unstarted message comes back after the "
        "visibility timeout, 1 h); no lease fencing; no result or history kept",
    }


def make_app(url: str, ns: str) -> Any:
    from celery import Celery

    from bench.peers._bodies import SYNC

    app = Celery("rcbench", broker=url)
    app.conf.update(
        broker_transport_options={"global_keyprefix": f"{ns}:"},
        broker_connection_retry_on_startup=True,
        task_default_queue=ns,
        task_ignore_result=True,
        worker_prefetch_multiplier=PREFETCH_MULTIPLIER,
        worker_hijack_root_logger=False,
    )
    for kind, fn in SYNC.items():
        app.task(name=f"bench.{kind}")(fn)
    return app


def run_worker() -> None:
    """The worker process's main (RCBENCH_URL, RCBENCH_NS from the environment)."""
    import os

    ns = os.environ["RCBENCH_NS"]
    app = make_app(os.environ["RCBENCH_URL"], ns)
    app.worker_main(
        ["worker", "--pool=solo", "--concurrency=1", "-Q", ns, "--loglevel=WARNING",
         "--without-gossip", "--without-mingle", "--without-heartbeat"]
    )  # fmt: skip


class _Celery(PythonPeer):
    module = __name__
    has_bulk = False  # a group or chunks still publishes one message per task

    def __init__(self, url: str, ns: str) -> None:
        self.url, self.ns = url, ns
        self.app = make_app(url, ns)

    def enqueue(self, kind: str, count: int, bulk: bool) -> float:
        name = f"bench.{kind}"
        send = self.app.send_task
        t0 = time.perf_counter()
        for _ in range(count):
            send(name, queue=self.ns)
        return time.perf_counter() - t0


@contextmanager
def session(url: str, ns: str) -> Iterator[_Celery]:
    peer = _Celery(url, ns)
    try:
        yield peer
    finally:
        peer.app.close()
