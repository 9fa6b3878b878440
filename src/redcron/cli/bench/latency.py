"""``redcron bench latency``: enqueue to task start with an idle worker."""

from __future__ import annotations

import statistics
import time
from typing import Any

from redcron.cli.bench.fixtures import bench_run, p99, worker_process


def latency(samples: int, redis_url: str | None) -> dict[str, Any]:
    """Enqueue → task start with an idle worker, one task at a time."""
    with bench_run(redis_url) as run:
        bapp = run.app
        task = bapp.tasks["bench.now"]
        with worker_process(run.url, run.prefix, None, "threads", None):
            task.enqueue().result(timeout=30)  # warm up: worker connected, scripts loaded
            lat: list[float] = []
            for _ in range(samples):
                time.sleep(0.005)  # let the worker go idle (blocked on its wake list)
                t0 = time.time()
                started = task.enqueue().result(timeout=30)
                lat.append((started - t0) * 1000)
        lat.sort()
        return {
            "samples": samples,
            "p50_ms": round(statistics.median(lat), 3),
            "p99_ms": round(p99(lat), 3),
            "max_ms": round(lat[-1], 3),
        }
