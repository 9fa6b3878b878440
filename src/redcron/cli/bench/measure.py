"""Benchmarks behind ``redcron bench``: throughput and latency, on a real Redis
(and ``schedule``: the pure fire-time arithmetic, no Redis).

Figures come from the Redis server clock where possible (drain rate from the
first lease to the last completion recorded in the instance hashes), so the
client's own overhead does not flatter or hurt the worker.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import redis

from redcron.app import App
from redcron.clock import ulid
from redcron.config import WORKER_PREFETCH_PER_SLOT, default_concurrency
from redcron.embedded import EmbeddedRedis
from redcron.keys import run_id
from redcron.model.jobs import JobSpec, Task
from redcron.model.states import TaskState
from redcron.schedule.timeutil import to_ms
from redcron.schedule.triggers import make_trigger, next_fire

#: the state field as the pipeline returns it (bytes), compared in a hot loop
_SUCCEEDED = TaskState.SUCCEEDED.encode()


def register(app: App) -> App:
    """Register the benchmark tasks on ``app`` (producer and worker alike)."""

    @app.task(name="bench.noop", retries=0)
    def noop() -> None:
        return None

    local = threading.local()

    @app.task(name="bench.incr", retries=0)
    def incr() -> None:
        # The body peer queues are compared on: one INCR on the executing thread's
        # own connection (per thread, per process), as a task with its own client
        # would do, not on the worker's shared pool.
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = redis.Redis.from_url(
                app.settings.redis_url, single_connection_client=True
            )
        client.incr(f"{app.settings.prefix}:bench:counter")

    @app.task(name="bench.now", retries=0)
    def now() -> float:
        return time.time()

    return app


#: how a benchmark worker process (and its processes pool) loads its App
BENCH_APP = "redcron.cli.bench.measure:bench_app()"


def bench_app() -> App:
    """The App of a benchmark worker process (:data:`BENCH_APP`), from the
    REDCRON_REDIS_URL and REDCRON_PREFIX the benchmark gives it: read when
    called, never at import (``redcron --help`` imports this module)."""
    return register(App())


@contextmanager
def redis_for_bench(url: str | None) -> Iterator[str]:
    """The given Redis, or a fresh embedded one (no persistence cost) for the run."""
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="redcron-bench-") as tmp:
        server = EmbeddedRedis(tmp, appendonly=False)
        server.start()
        try:
            yield server.url
        finally:
            server.stop()


@contextmanager
def worker_process(
    url: str, prefix: str, concurrency: int | None, pool: str, prefetch: int | None = 0
) -> Iterator[subprocess.Popen[bytes]]:
    with _python_process(
        url,
        prefix,
        "from redcron.worker import Worker;"
        f"Worker(app, concurrency={concurrency}, pool={pool!r}, grace=2, prefetch={prefetch},"
        f"app_path={BENCH_APP!r}).run()",
    ) as proc:
        yield proc


@contextmanager
def _python_process(url: str, prefix: str, code: str) -> Iterator[subprocess.Popen[bytes]]:
    """A child Python running ``code`` with the benchmark app imported as ``app``;
    terminated (then killed) on exit."""
    env = dict(os.environ, REDCRON_REDIS_URL=url, REDCRON_PREFIX=prefix)
    head = "import logging; logging.basicConfig(level=logging.WARNING);"
    head += "from redcron.cli.bench.measure import bench_app; app = bench_app();"
    proc = subprocess.Popen([sys.executable, "-c", head + code], env=env)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _bench_app(url: str, prefix: str) -> App:
    return register(App(url, prefix=prefix))


def _cleanup(bapp: App) -> None:
    client = bapp.broker.client
    batch: list[bytes] = []
    for key in client.scan_iter(match=f"{bapp.settings.prefix}:*", count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            client.unlink(*batch)
            batch = []
    if batch:
        client.unlink(*batch)


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
    prefix = f"rcbench{ulid()[-6:].lower()}"
    with redis_for_bench(redis_url) as url:
        bapp = _bench_app(url, prefix)
        try:
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
            with worker_process(url, prefix, slots, pool, prefetch):
                _wait_all_done(bapp, ids)
            first, last, done = _span(bapp, ids)
            drain_s = max(1e-9, (last - first) / 1000)
            drain_per_s = done / drain_s
            reference = reference_incr(url, prefix, max(5_000, min(tasks, 20_000)))
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
        finally:
            _cleanup(bapp)
            bapp.close()


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


def _wait_all_done(bapp: App, ids: list[str]) -> None:
    """Wait until every task succeeded, looking at a small window of the oldest
    unfinished ones at a time: a poll of every pending id (thousands of HGETs
    in one pipeline, ten times a second) would take CPU from the worker and
    Redis being measured on a 2-core machine."""
    client = bapp.broker.client
    keys = bapp.broker.keys
    deadline = time.monotonic() + 600
    pending = list(ids)
    window = 256
    while pending:
        head = pending[:window]
        pipe = client.pipeline(transaction=False)
        for iid in head:
            pipe.hget(keys.ti(0, iid), "state")
        states = pipe.execute()
        left = [i for i, s in zip(head, states, strict=True) if s != _SUCCEEDED]
        pending = left + pending[window:]
        if left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} tasks not done after 600 s")
            time.sleep(0.05)


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


def latency(samples: int, redis_url: str | None) -> dict[str, Any]:
    """Enqueue → task start with an idle worker, one task at a time."""
    prefix = f"rcbench{ulid()[-6:].lower()}"
    with redis_for_bench(redis_url) as url:
        bapp = _bench_app(url, prefix)
        try:
            task = bapp.tasks["bench.now"]
            with worker_process(url, prefix, None, "threads", None):
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
                "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 3),
                "max_ms": round(lat[-1], 3),
            }
        finally:
            _cleanup(bapp)
            bapp.close()


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


@contextmanager
def beat_process(url: str, prefix: str) -> Iterator[subprocess.Popen[bytes]]:
    code = "from redcron.beat.beat import Beat; Beat(app, apply_declared=False).run()"
    with _python_process(url, prefix, code) as proc:
        yield proc


def trigger(
    jobs: int, due_same_second: int, redis_url: str | None, idle_s: float = 10.0
) -> dict[str, Any]:
    """``jobs`` cron schedules registered, ``due_same_second`` of them due in the
    same second: how late are their runs created, and what does the beat cost?"""
    if not 0 < due_same_second <= jobs:
        raise ValueError("need 0 < due_same_second <= jobs")
    prefix = f"rcbench{ulid()[-6:].lower()}"
    with redis_for_bench(redis_url) as url:
        bapp = _bench_app(url, prefix)
        try:
            store = bapp.jobs
            # far-future schedules for the rest: registered, never due in the run
            idle = [
                JobSpec(
                    name=f"idle{i}",
                    tenant=f"t{i % 100}",
                    cron="0 0 1 1 *",
                    tasks={"t": Task("bench.noop")},
                )
                for i in range(jobs - due_same_second)
            ]
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
            stats = bapp.broker.keys.stats(0)
            with beat_process(url, prefix) as proc:
                time.sleep(1.0)  # started and idle before the burst
                cpu0 = _proc_cpu_s(proc.pid)
                deadline = time.monotonic() + lead + 120
                while int(client.hget(stats, "fires") or 0) < due_same_second:
                    if time.monotonic() > deadline:
                        raise TimeoutError("the beat did not fire every due job in time")
                    time.sleep(0.05)
                cpu_burst = _proc_cpu_s(proc.pid) - cpu0
                # idle cost: every schedule registered, nothing due
                cpu1 = _proc_cpu_s(proc.pid)
                time.sleep(idle_s)
                cpu_idle = _proc_cpu_s(proc.pid) - cpu1
            target_ms = to_ms(target)
            pipe = client.pipeline(transaction=False)
            for i in range(due_same_second):
                pipe.hget(bapp.broker.keys.jobs(0, f"t{i % 100}"), f"hot{i}")
            job_ids = [j.decode() for j in pipe.execute()]
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
                "lag_p99_ms": lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else None,
                "lag_max_ms": lags[-1] if lags else None,
                "beat_cpu_s_burst": round(cpu_burst, 3),
                "beat_idle_cpu_pct": round(100 * cpu_idle / idle_s, 2),
                "setup_s": round(setup_s, 1),
            }
        finally:
            _cleanup(bapp)
            bapp.close()


def _lease_times(bapp: App, ids_by_tenant: dict[str, list[str]]) -> list[tuple[int, str]]:
    """(first lease ms, tenant) of every task, in lease order."""
    client = bapp.broker.client
    keys = bapp.broker.keys
    out: list[tuple[int, str]] = []
    for tenant, ids in ids_by_tenant.items():
        pipe = client.pipeline(transaction=False)
        for iid in ids:
            pipe.hget(keys.ti(int(iid.split("-", 1)[0]), iid), "a:1:leased")
        out += [(int(ms), tenant) for ms in pipe.execute() if ms]
    out.sort()
    return out


def _evalsha_us(bapp: App) -> tuple[int, int]:
    stats = bapp.broker.client.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def fairness(redis_url: str | None, backfill: int = 50_000) -> dict[str, Any]:
    """The backfill scenario with a real worker process: weighted shares, equal
    shares, how long small tenants wait behind a backfill, and lease cost with
    many idle tenants."""
    prefix = f"rcbench{ulid()[-6:].lower()}"
    with redis_for_bench(redis_url) as url:
        bapp = _bench_app(url, prefix)
        try:
            noop = bapp.tasks["bench.noop"]
            # -- weighted and equal shares, all backlogged ------------------------
            weights = {"w1": 1, "w2": 2, "w4": 4, **{f"eq{i}": 1 for i in range(10)}}
            for tenant, weight in weights.items():
                bapp.tenants.set(tenant, weight=weight)
            ids: dict[str, list[str]] = {}
            for tenant, weight in weights.items():
                ids[tenant] = [
                    h.id for h in noop.enqueue_many([()] * (1_000 * weight), _tenant=tenant)
                ]
            with worker_process(url, prefix, 16, "threads", 16):
                _wait_all_done(bapp, [i for v in ids.values() for i in v])
            leases = _lease_times(bapp, ids)
            last = {t: max(ms for ms, tt in leases if tt == t) for t in weights}
            window_end = min(last.values())
            counts = {t: 0 for t in weights}
            for ms, t in leases:
                if ms < window_end:
                    counts[t] += 1
            total = sum(counts.values()) or 1
            total_w = sum(weights.values())
            share_error = max(abs(counts[t] / total - w / total_w) for t, w in weights.items())
            eq = [counts[f"eq{i}"] for i in range(10)]
            jain = sum(eq) ** 2 / (len(eq) * sum(x * x for x in eq)) if any(eq) else 0.0

            # -- a backfill, then 100 small tenants arrive --------------------------
            big = [h.id for h in noop.enqueue_many([()] * backfill, _tenant="backfill")]
            small: dict[str, list[str]] = {}
            with worker_process(url, prefix, 16, "threads", 16):
                client = bapp.broker.client
                key = bapp.broker.keys.tleases(0, "backfill")
                while not client.zcard(key):  # the backfill is being drained
                    time.sleep(0.01)
                time.sleep(0.5)
                for i in range(100):
                    small[f"s{i}"] = [h.id for h in noop.enqueue_many([()] * 20, _tenant=f"s{i}")]
                _wait_all_done(bapp, big + [i for v in small.values() for i in v])
            waits = []
            client = bapp.broker.client
            for ids_t in small.values():
                pipe = client.pipeline(transaction=False)
                for iid in ids_t:
                    pipe.hmget(bapp.broker.keys.ti(0, iid), "created", "a:1:leased")
                rows = [(int(c), int(lz)) for c, lz in pipe.execute()]
                created = min(c for c, _ in rows)
                waits.append(min(lz for _, lz in rows) - created)
            waits.sort()
            big_leases = _lease_times(bapp, {"backfill": big})
            span = max(1, big_leases[-1][0] - big_leases[0][0]) / 1000

            # -- lease cost: 10 vs 10,000 idle tenants (alternated, median of 3) ------
            def set_idle(n: int) -> None:
                pipe = client.pipeline(transaction=False)
                for i in range(10_000):
                    if i < n:
                        pipe.hset(bapp.broker.keys.tenant(0, f"idle{i}"), "weight", 1)
                        pipe.sadd(bapp.broker.keys.tenants(0), f"idle{i}")
                    else:
                        pipe.delete(bapp.broker.keys.tenant(0, f"idle{i}"))
                        pipe.srem(bapp.broker.keys.tenants(0), f"idle{i}")
                pipe.execute()

            def lease_cost(idle: int) -> float:
                set_idle(idle)
                noop.enqueue_many([()] * 4_000, _tenant="busy")
                # let Redis finish rehashing its keyspace after the bulk change,
                # so the measurement sees steady state
                held = []
                for _ in range(50):
                    held += bapp.broker.leases.lease(0, "bench", 16, 60_000, ["default"])
                time.sleep(0.5)
                c0, u0 = _evalsha_us(bapp)
                for _ in range(200):
                    held += bapp.broker.leases.lease(0, "bench", 16, 60_000, ["default"])
                c1, u1 = _evalsha_us(bapp)
                # end the leases, so every round starts from the same state
                for i in range(0, len(held), 200):
                    bapp.broker.leases.complete(
                        0, "bench", [(x.iid, x.epoch, b"\xc0") for x in held[i : i + 200]]
                    )
                return (u1 - u0) / max(1, c1 - c0)

            costs: dict[int, list[float]] = {10: [], 10_000: []}
            for _ in range(3):
                for idle in (10_000, 10):
                    costs[idle].append(lease_cost(idle))
            cost_10 = statistics.median(costs[10])
            cost_10k = statistics.median(costs[10_000])
            return {
                "share_error_pct": round(100 * share_error, 2),
                "shares": {t: round(counts[t] / total, 4) for t in ("w1", "w2", "w4")},
                "jain_index": round(jain, 4),
                "small_tenant_wait_p50_ms": waits[len(waits) // 2],
                "small_tenant_wait_p99_ms": waits[min(len(waits) - 1, int(len(waits) * 0.99))],
                "backfill_throughput_per_s": round(len(big_leases) / span),
                "lease_us_10_idle_tenants": round(cost_10, 1),
                "lease_us_10k_idle_tenants": round(cost_10k, 1),
            }
        finally:
            _cleanup(bapp)
            bapp.close()


def schedule(calls: int = 2_000) -> dict[str, Any]:
    """Microseconds per ``next_fire`` call (pure computation, no Redis): the one
    bisect jump of a quiet stretch, in UTC and in a DST zone, and the window scan
    within 3 h before a fall-back, where wall order is not instant order."""
    base = datetime(2026, 6, 10, 12, 0, 7, tzinfo=UTC)
    quiet = [base + timedelta(seconds=37 * i) for i in range(calls)]
    fall_back = datetime(2026, 10, 24, 23, tzinfo=UTC)  # Berlin falls back at 01:00 UTC
    near = [fall_back + timedelta(seconds=7 * (i % 1_500)) for i in range(calls)]
    cases = {
        "every_5min_utc": ("*/5 * * * *", "UTC", quiet),
        "every_5min_berlin": ("*/5 * * * *", "Europe/Berlin", quiet),
        "daily_0200_utc": ("0 2 * * *", "UTC", quiet),
        "daily_0200_berlin": ("0 2 * * *", "Europe/Berlin", quiet),
        "every_5min_berlin_near_fall_back": ("*/5 * * * *", "Europe/Berlin", near),
    }
    out: dict[str, Any] = {"calls": calls}
    for name, (expr, tz, afters) in cases.items():
        trigger = make_trigger(cron=expr, tz=tz)
        started = time.perf_counter()
        for after in afters:
            next_fire(trigger, after)
        out[f"{name}_us"] = round((time.perf_counter() - started) / len(afters) * 1e6, 2)
    return out
