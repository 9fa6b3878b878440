"""``redcron bench throughput``: enqueue rates, the drain rate of one worker
process (or of ``--procs N`` under one supervisor), and the machine's
yardstick (bare INCRs) measured in the same run.

Figures come from the Redis server clock where possible (drain rate from the
first lease to the last completion recorded in the instance hashes), so the
client's own overhead does not flatter or hurt the worker.  Over the drain
(from the first task seen done to the last), the CPU of Redis, of the worker
processes and of the whole machine, in cores: which of them saturates.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis

from redcron import tracing
from redcron.app import App
from redcron.cli.bench.fixtures import (
    bench_run,
    enqueue_spread,
    machine_busy_s,
    redis_cpu_s,
    redis_for_bench,
    spread_tenants,
    succeeded_count,
    tree_cpu_s,
    wait_all_done,
    worker_process,
)
from redcron.config import WORKER_PREFETCH_PER_SLOT, default_concurrency
from redcron.keys import shard_of_id

#: tenants per shard the tasks of a run with several shards are spread over
TENANTS_PER_SHARD = 4


def throughput(
    tasks: int,
    concurrency: int | None,
    pool: str,
    body: str,
    redis_url: str | None,
    prefetch: int | None = None,
    masters: int = 0,
    shards: int | None = None,
    procs: int = 1,
    otel: str = "",
) -> dict[str, Any]:
    """Enqueue ``tasks`` with enqueue_many, then one worker process drains them
    (``concurrency``, ``prefetch`` None: the worker's defaults), or ``procs``
    of them under a ``redcron worker --procs`` supervisor; with
    ``masters``, on a fresh local cluster of that many masters, and with
    ``shards`` > 1 the tasks spread over tenants on every shard.  The
    yardstick (bare INCRs on one connection per thread) needs one server:
    None on a cluster.  ``otel`` (``memory``): traced, the enqueues here and
    the attempts in the worker (``REDCRON_OTEL``), spans kept in memory."""
    slots = default_concurrency(pool) if concurrency is None else concurrency
    provider = tracing.build_provider(otel) if otel else None
    worker_env = {"REDCRON_OTEL": otel}
    with bench_run(redis_url, masters=masters, shards=shards) as run, tracing.use(provider):
        bapp = run.app
        task = bapp.tasks[f"bench.{body}"]
        n_shards = bapp.broker.shards
        tenants = spread_tenants(n_shards, TENANTS_PER_SHARD) if n_shards > 1 else ["default"]
        # a tenth (at most 2,000) one at a time, the rest in batches; the
        # worker drains them all
        singles = min(2_000, max(1, tasks // 10))
        t0 = time.perf_counter()
        ids = [task.enqueue(_tenant=tenants[i % len(tenants)]).id for i in range(singles)]
        single_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ids += enqueue_spread(bapp, f"bench.{body}", tasks - singles, tenants)
        many_s = time.perf_counter() - t0
        with worker_process(run.url, run.prefix, slots, pool, prefetch, procs, worker_env) as proc:
            cpu = DrainCpu(bapp, proc.pid)
            wait_all_done(bapp, ids)
            cpu.done(len(ids))
        first, last, done = drain_span(bapp, ids)
        drain_s = max(1e-9, (last - first) / 1000)
        drain_per_s = done / drain_s
        reference = (
            None
            if "+cluster" in run.url
            else reference_incr(run.url, run.prefix, max(5_000, min(tasks, 20_000)))
        )
        return {
            "tasks": tasks,
            "shards": n_shards,
            "masters": masters or None,
            "workers": procs,
            "pool": pool,
            "concurrency": slots,
            "prefetch": WORKER_PREFETCH_PER_SLOT * slots if prefetch is None else prefetch,
            "body": body,
            "otel": otel or None,
            "enqueue_per_s": round((tasks - singles) / many_s) if tasks > singles else None,
            "enqueue_single_per_s": round(singles / single_s),
            "drain_per_s": round(drain_per_s),
            "drain_s": round(drain_s, 3),
            "measured_tasks": done,
            "reference_incr_per_s": round(reference) if reference else None,
            "drain_vs_reference": round(drain_per_s / reference, 2) if reference else None,
            **cpu.figures(),
        }


#: the figures :func:`throughput_otel` compares, traced against not
OTEL_FIGURES = ("enqueue_single_per_s", "enqueue_per_s", "drain_per_s")


def throughput_otel(
    tasks: int,
    concurrency: int | None,
    pool: str,
    body: str,
    redis_url: str | None,
    prefetch: int | None = None,
    otel: str = "memory",
    rounds: int = 3,
) -> dict[str, Any]:
    """The cost of tracing (docs/observability.md): :func:`throughput` with
    tracing off and on (``otel``: the SDK with an in-memory exporter), side by
    side on one Redis, ``rounds`` of each, alternating (off first in odd
    rounds, on first in even ones, so a drift of the machine weighs on both);
    the median of each figure, and on / off."""
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    with redis_for_bench(redis_url) as url:
        for i in range(rounds):
            for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
                runs[mode].append(
                    throughput(tasks, concurrency, pool, body, url, prefetch,
                               otel=otel if mode == "on" else "")
                )  # fmt: skip
    medians = {
        mode: {f: statistics.median(r[f] for r in got if r[f] is not None) for f in OTEL_FIGURES}
        for mode, got in runs.items()
    }
    first = runs["off"][0]
    return {
        "tasks": tasks,
        "rounds": rounds,
        "pool": pool,
        "concurrency": first["concurrency"],
        "prefetch": first["prefetch"],
        "body": body,
        "otel": otel,
        "off": medians["off"],
        "on": medians["on"],
        "on_vs_off": {
            f: round(medians["on"][f] / medians["off"][f], 3) if medians["off"][f] else None
            for f in OTEL_FIGURES
        },
        "drain_per_s_rounds": {mode: [r["drain_per_s"] for r in got] for mode, got in runs.items()},
    }


#: the figures :func:`versus` takes the median of, per body
COMPARED = ("drain_per_s", "worker_cpu_us_per_task", "redis_cpu_us_per_task")


def versus(
    bodies: Sequence[str], rounds: int, run: Callable[[str], dict[str, Any]]
) -> dict[str, Any]:
    """The bodies side by side: ``rounds`` rounds of each, alternated (``a b a b
    a b``, so a machine that gets busier or quieter during the run weighs on
    both alike), each a whole ``run(body)`` (its own Redis when none is given);
    per body the median of :data:`COMPARED`, and each round's figures."""
    per: dict[str, list[dict[str, Any]]] = {b: [] for b in bodies}
    for _ in range(rounds):
        for body in bodies:
            per[body].append(run(body))
    first = per[bodies[0]][0]
    out: dict[str, Any] = {
        k: first[k] for k in ("tasks", "pool", "concurrency", "prefetch", "workers")
    }
    out["rounds"] = rounds
    for body in bodies:
        for key in COMPARED:
            values = [r[key] for r in per[body] if r.get(key) is not None]
            out[f"{body}_{key}"] = statistics.median(values) if values else None
        out[f"{body}_rounds_drain_per_s"] = [r["drain_per_s"] for r in per[body]]
    a, b = bodies[0], bodies[-1]
    if out[f"{a}_drain_per_s"]:
        out[f"{b}_vs_{a}"] = round(out[f"{b}_drain_per_s"] / out[f"{a}_drain_per_s"], 2)
    return out


class DrainCpu:
    """CPU of Redis (every master), of the worker processes (a supervisor and its
    children) and of the whole machine over a drain: from the first task seen
    done (start-up is not a task's) to :meth:`done`."""

    def __init__(self, bapp: App, worker_pid: int, poll_s: float = 0.01) -> None:
        self.bapp, self.pid = bapp, worker_pid
        while not succeeded_count(bapp):
            time.sleep(poll_s)
        self.first = succeeded_count(bapp)
        self.start = self._sample()
        self.end = self.start
        self.tasks = 0

    def _sample(self) -> tuple[float, float, float, float]:
        redis_s = sum(redis_cpu_s(self.bapp))
        return time.monotonic(), redis_s, tree_cpu_s(self.pid), machine_busy_s()

    def done(self, total: int) -> None:
        self.end = self._sample()
        self.tasks = max(1, total - self.first)

    def figures(self) -> dict[str, Any]:
        """Cores each used (1.0 is one core busy: Redis's ceiling, its commands
        run on one thread) and microseconds of CPU per task."""
        wall = max(1e-9, self.end[0] - self.start[0])
        redis_s, worker_s, machine_s = (
            b - a for a, b in zip(self.start[1:], self.end[1:], strict=True)
        )
        return {
            "redis_cpu_cores": round(redis_s / wall, 2),
            "worker_cpu_cores": round(worker_s / wall, 2),
            "machine_busy_cores": round(machine_s / wall, 2),
            "machine_cores": os.cpu_count(),
            "redis_cpu_us_per_task": round(redis_s * 1e6 / self.tasks, 1),
            "worker_cpu_us_per_task": round(worker_s * 1e6 / self.tasks, 1),
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


def drain_span(bapp: App, ids: list[str]) -> tuple[int, int, int]:
    """Server-clock span (ms) from the first lease to the last completion of
    ``ids``, and how many of them have both."""
    client = bapp.broker.client
    keys = bapp.broker.keys
    pipe = client.pipeline(transaction=False)
    for iid in ids:
        pipe.hmget(keys.ti(shard_of_id(iid), iid), "a:1:l", "leased", "ended")
    first, last, n = 2**62, 0, 0
    for a_leased, last_leased, ended in pipe.execute():
        # the first attempt's lease: a:1:l once it ended other than by success
        leased = a_leased or last_leased
        if leased and ended:
            first = min(first, int(leased))
            last = max(last, int(ended))
            n += 1
    return first, last, n
