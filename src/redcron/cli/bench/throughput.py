"""``redcron bench throughput``: enqueue rates, the drain rate of one worker
process, and the machine's yardstick (bare INCRs) measured in the same run.

Figures come from the Redis server clock where possible (drain rate from the
first lease to the last completion recorded in the instance hashes), so the
client's own overhead does not flatter or hurt the worker.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from redcron.app import App
from redcron.cli.bench.fixtures import bench_run, wait_all_done, worker_process
from redcron.config import WORKER_PREFETCH_PER_SLOT, default_concurrency


def throughput(
    tasks: int,
    concurrency: int | None,
    pool: str,
    body: str,
    redis_url: str | None,
    prefetch: int | None = None,
) -> dict[str, Any]:
    """Enqueue ``tasks`` with enqueue_many, then one worker process drains them
    (``concurrency``, ``prefetch`` None: the worker's defaults)."""
    slots = default_concurrency(pool) if concurrency is None else concurrency
    with bench_run(redis_url) as run:
        bapp = run.app
        task = bapp.tasks[f"bench.{body}"]
        # a tenth (at most 2,000) one at a time, the rest in batches; the
        # worker drains them all
        singles = min(2_000, max(1, tasks // 10))
        t0 = time.perf_counter()
        handles = [task.enqueue() for _ in range(singles)]
        single_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i in range(0, tasks - singles, 1_000):
            handles += task.enqueue_many([()] * min(1_000, tasks - singles - i))
        many_s = time.perf_counter() - t0
        ids = [h.id for h in handles]
        with worker_process(run.url, run.prefix, slots, pool, prefetch):
            wait_all_done(bapp, ids)
        first, last, done = _span(bapp, ids)
        drain_s = max(1e-9, (last - first) / 1000)
        drain_per_s = done / drain_s
        reference = reference_incr(run.url, run.prefix, max(5_000, min(tasks, 20_000)))
        return {
            "tasks": tasks,
            "workers": 1,
            "pool": pool,
            "concurrency": slots,
            "prefetch": WORKER_PREFETCH_PER_SLOT * slots if prefetch is None else prefetch,
            "body": body,
            "enqueue_per_s": round((tasks - singles) / many_s) if tasks > singles else None,
            "enqueue_single_per_s": round(singles / single_s),
            "drain_per_s": round(drain_per_s),
            "drain_s": round(drain_s, 3),
            "measured_tasks": done,
            "reference_incr_per_s": round(reference),
            "drain_vs_reference": round(drain_per_s / reference, 2),
        }


def reference_incr(url: str, prefix: str, n: int, threads: int = 8) -> float:
    """The machine's yardstick, measured in the same run: ``n`` INCRs from
    ``threads`` Python threads, each on its own connection (the incr body
    without the task queue around it).  Drain rates divided by this compare
    across machines of different speed; the figures peers publish come
    from faster ones."""
    key = f"{prefix}:bench:reference"
    per = max(1, n // threads)
    ready = threading.Barrier(threads + 1)

    def run() -> None:
        client = redis.Redis.from_url(url, single_connection_client=True)
        try:
            client.ping()
            ready.wait()
            for _ in range(per):
                client.incr(key)
        finally:
            client.close()

    pool = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
    for t in pool:
        t.start()
    ready.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    return per * threads / max(1e-9, time.perf_counter() - t0)


def _span(bapp: App, ids: list[str]) -> tuple[int, int, int]:
    """Server-clock span from the first lease to the last completion."""
    client = bapp.broker.client
    keys = bapp.broker.keys
    pipe = client.pipeline(transaction=False)
    for iid in ids:
        pipe.hmget(keys.ti(0, iid), "a:1:leased", "ended")
    first, last, n = 2**62, 0, 0
    for leased, ended in pipe.execute():
        if leased and ended:
            first = min(first, int(leased))
            last = max(last, int(ended))
            n += 1
    return first, last, n
