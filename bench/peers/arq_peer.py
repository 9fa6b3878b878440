"""arq 0.28 (asyncio): one worker process, max_jobs 32 coroutines on one event
loop, its default poll delay (0.5 s: an idle worker looks for jobs twice a
second, and takes at most queue_read_limit = 5 x max_jobs = 160 jobs a poll:
so at its defaults it drains at most 320 jobs a second), results kept as arq
keeps them (1 h), max_tries 5."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.peers import PEER_SLOTS
from bench.peers._proc import missing_python, version
from bench.peers._python_peer import PythonPeer

NAME = "arq"

#: arq 0.28 declares redis-py < 6, so the bench extra leaves it out (it would
#: downgrade the project's redis-py 8); it runs on redis-py 8 installed so
INSTALL = "pip install --no-deps 'arq>=0.28,<0.29'; it declares redis-py < 6 but runs on 8"


def missing() -> str | None:
    return missing_python("arq", "arq", INSTALL)


def describe() -> dict[str, str]:
    return {
        "version": f"arq {version('arq')}",
        "config": f"one worker process, max_jobs {PEER_SLOTS}, poll_delay 0.5 s and "
        f"queue_read_limit {max(PEER_SLOTS * 5, 100)} (5 x max_jobs; the defaults: at most that "
        "many jobs taken per poll), job bodies on an asyncio client of the worker's loop",
        "guarantee": "at least once: a job stays queued while in progress (an in-progress "
        "key with a timeout) and is run again if its worker dies, up to max_tries 5; no "
        "fencing; result kept 1 h (keep_result default)",
    }


def run_worker() -> None:
    """The worker process's main (arq stops on SIGTERM)."""
    import logging
    import os

    from arq.connections import RedisSettings
    from arq.worker import Worker, func

    from bench.peers._bodies import aincr, anoop, anow

    logging.basicConfig(level=logging.WARNING)
    Worker(
        functions=[func(aincr, name="incr"), func(anoop, name="noop"), func(anow, name="now")],
        redis_settings=RedisSettings.from_dsn(os.environ["RCBENCH_URL"]),
        queue_name=os.environ["RCBENCH_NS"],
        max_jobs=PEER_SLOTS,
        log_results=False,
    ).run()


class _Arq(PythonPeer):
    module = __name__
    has_bulk = False  # enqueue_job is one job per call

    def __init__(self, url: str, ns: str) -> None:
        from arq.connections import RedisSettings, create_pool

        self.url, self.ns = url, ns
        self.loop = asyncio.new_event_loop()
        self.pool = self.loop.run_until_complete(create_pool(RedisSettings.from_dsn(url)))
        self._ids = itertools.count()  # job ids under the namespace: deletable after

    def enqueue(self, kind: str, count: int, bulk: bool) -> float:
        async def run() -> float:
            enqueue, ns, ids = self.pool.enqueue_job, self.ns, self._ids
            t0 = time.perf_counter()
            for _ in range(count):
                await enqueue(kind, _job_id=f"{ns}-{next(ids)}", _queue_name=ns)
            return time.perf_counter() - t0

        return self.loop.run_until_complete(run())

    def close(self) -> None:
        self.loop.run_until_complete(self.pool.aclose())
        self.loop.close()


@contextmanager
def session(url: str, ns: str) -> Iterator[_Arq]:
    peer = _Arq(url, ns)
    try:
        yield peer
    finally:
        peer.close()
