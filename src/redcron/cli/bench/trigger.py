"""``redcron bench trigger``: how late the runs of many cron jobs due in the
same second are created, and what the beat costs in the burst and idle."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from redcron.cli.bench.fixtures import beat_process, bench_run, idle_jobs, p99, proc_cpu_s
from redcron.keys import jobidx_parse, jobidx_range, run_id
from redcron.model.jobs import JobSpec, Task
from redcron.schedule.timeutil import to_ms


def trigger(
    jobs: int, due_same_second: int, redis_url: str | None, idle_s: float = 10.0
) -> dict[str, Any]:
    """``jobs`` cron schedules registered, ``due_same_second`` of them due in the
    same second: how late are their runs created, and what does the beat cost?"""
    if not 0 < due_same_second <= jobs:
        raise ValueError("need 0 < due_same_second <= jobs")
    with bench_run(redis_url) as run:
        bapp = run.app
        store = bapp.jobs
        # far-future schedules for the rest: registered, never due in the run
        idle = idle_jobs(jobs - due_same_second)
        t0 = time.perf_counter()
        store.put_many(idle)
        # the due ones: a 6-field cron for one second, far enough ahead to
        # register them all and start the beat first
        now = store.server_now()
        setup_s = time.perf_counter() - t0
        lead = max(15.0, 3 + due_same_second / 1500)
        target = (now + timedelta(seconds=lead)).replace(microsecond=0)
        expr = f"{target.second} {target.minute} {target.hour} * * *"
        hot = [
            JobSpec(
                name=f"hot{i}", tenant=f"t{i % 100}", cron=expr, tasks={"t": Task("bench.noop")}
            )
            for i in range(due_same_second)
        ]
        store.put_many(hot)
        setup_s = time.perf_counter() - t0
        if store.server_now() >= target:
            raise RuntimeError("registration took longer than the lead time; use fewer jobs")
        client = bapp.broker.client
        stats = bapp.broker.keys.counters(0)
        with beat_process(run.url, run.prefix) as proc:
            time.sleep(1.0)  # started and idle before the burst
            cpu0 = proc_cpu_s(proc.pid)
            deadline = time.monotonic() + lead + 120
            while int(client.hget(stats, "fires") or 0) < due_same_second:
                if time.monotonic() > deadline:
                    raise TimeoutError("the beat did not fire every due job in time")
                time.sleep(0.05)
            cpu_burst = proc_cpu_s(proc.pid) - cpu0
            # idle cost: every schedule registered, nothing due
            cpu1 = proc_cpu_s(proc.pid)
            time.sleep(idle_s)
            cpu_idle = proc_cpu_s(proc.pid) - cpu1
        target_ms = to_ms(target)
        pipe = client.pipeline(transaction=False)
        for i in range(due_same_second):
            pipe.zrangebylex(
                bapp.broker.keys.jobidx(0), *jobidx_range(f"t{i % 100}", f"hot{i}"), start=0, num=1
            )
        found = [jobidx_parse(m[0].decode()) for m in pipe.execute() if m]
        job_ids = [job[2] for job in found if job]
        pipe = client.pipeline(transaction=False)
        for jid in job_ids:
            pipe.hget(bapp.broker.keys.run(0, run_id(jid, target_ms)), "created")
        created = sorted(int(c) for c in pipe.execute() if c)
        lags = [c - target_ms for c in created]
        span_s = max(1e-3, (created[-1] - created[0]) / 1000) if created else 0.0
        return {
            "jobs": jobs,
            "due_same_second": due_same_second,
            "runs": len(created),
            "runs_per_s": round(len(created) / span_s) if created else 0,
            "lag_p50_ms": lags[len(lags) // 2] if lags else None,
            "lag_p99_ms": p99(lags) if lags else None,
            "lag_max_ms": lags[-1] if lags else None,
            "beat_cpu_s_burst": round(cpu_burst, 3),
            "beat_idle_cpu_pct": round(100 * cpu_idle / idle_s, 2),
            "setup_s": round(setup_s, 1),
        }
