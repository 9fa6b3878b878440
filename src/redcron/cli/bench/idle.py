"""``redcron bench beat-idle``: what a beat costs while nothing is due.

A figure, not a test: CPU shares depend on the machine and on what else runs
there, so the suite does not assert one (it used to: ``test_beat.py`` asked
for under 5% of a core, which a loaded CI box can miss for no fault of ours).
"""

from __future__ import annotations

import time
from typing import Any

from redcron.cli.bench.fixtures import beat_process, bench_run, idle_jobs, proc_cpu_s


def beat_idle(jobs: int, seconds: float, redis_url: str | None) -> dict[str, Any]:
    """``jobs`` cron schedules registered, none due for months: the CPU share of
    one beat process over ``seconds`` once it has started and claimed its shards."""
    with bench_run(redis_url) as run:
        bapp = run.app
        t0 = time.perf_counter()
        bapp.jobs.put_many(idle_jobs(jobs))
        setup_s = time.perf_counter() - t0
        with beat_process(run.url, run.prefix) as proc:
            time.sleep(1.0)  # started, shards claimed, first ticks done
            cpu0, wall0 = proc_cpu_s(proc.pid), time.monotonic()
            time.sleep(seconds)
            cpu = proc_cpu_s(proc.pid) - cpu0
            wall = time.monotonic() - wall0
        return {
            "jobs": jobs,
            "seconds": round(wall, 1),
            "beat_idle_cpu_pct": round(100 * cpu / wall, 2),
            "setup_s": round(setup_s, 1),
        }
