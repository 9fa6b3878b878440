"""``redcron bench scale``: how the drain rate grows with shards and worker
processes on a local Redis Cluster, and which process is on CPU.

Each cell (shards ``S``, worker processes ``N``) enqueues the tasks over
tenants spread evenly across the shards, starts ``N`` worker processes and
lets them drain the backlog.  The rate and every process's CPU are taken over
the steady part of the drain (from 10% to 90% of the tasks done), so worker
start-up and the last stragglers count in neither (a run too small for that
window is measured over the whole drain, and says so); the CPU shares say where
the machine saturates: the worker processes (summed), each Redis master
(``INFO cpu``) and this process (which only polls a counter per shard), and
how busy the whole machine was (``/proc/stat``: on a shared machine the
difference is other people's work).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import click

from redcron.app import App
from redcron.cli.bench.fixtures import (
    bench_run,
    enqueue_spread,
    machine_busy_s,
    proc_cpu_s,
    redis_cpu_s,
    redis_for_bench,
    spread_tenants,
    succeeded_count,
    wait_all_done,
    worker_process,
)
from redcron.cli.bench.throughput import drain_span
from redcron.config import default_concurrency

#: masters of the local cluster a run starts
MASTERS = 3
#: tenants per shard the tasks are spread over
TENANTS_PER_SHARD = 4
#: the steady window of a drain: from this fraction of the tasks done to the next
WINDOW = (0.1, 0.9)


@dataclass(frozen=True)
class Sample:
    """Every process's CPU seconds, and the tasks done, at one moment."""

    wall: float
    done: int
    workers: float
    masters: tuple[float, ...]
    bench: float
    #: every core's busy seconds, whoever ran (see machine_busy_s)
    machine: float = 0.0


def cores(before: Sample, after: Sample) -> dict[str, Any]:
    """The window between two samples: its length, tasks/s, and CPU seconds and
    cores (CPU seconds per second) of each process kind."""
    wall = max(1e-9, after.wall - before.wall)
    masters = [b - a for a, b in zip(before.masters, after.masters, strict=True)]
    cpu = {
        "workers": after.workers - before.workers,
        "redis": sum(masters),
        "bench": after.bench - before.bench,
    }
    return {
        "window_s": round(wall, 3),
        "window_tasks": after.done - before.done,
        "tasks_per_s": round((after.done - before.done) / wall),
        "cpu_s": {k: round(v, 3) for k, v in cpu.items()},
        "redis_cpu_s_per_master": [round(v, 3) for v in masters],
        "cores": {k: round(v / wall, 2) for k, v in cpu.items()},
        "cores_total": round(sum(cpu.values()) / wall, 2),
        "machine_cores": round((after.machine - before.machine) / wall, 2),
    }


def _sample(bapp: App, pids: Sequence[int], done: int) -> Sample:
    return Sample(
        time.perf_counter(),
        done,
        sum(proc_cpu_s(pid) for pid in pids),
        tuple(redis_cpu_s(bapp)),
        time.process_time(),
        machine_busy_s(),
    )


def cell(
    url: str, servers: str, shards: int, workers: int, tasks: int, pool: str
) -> dict[str, Any]:
    """One drain: ``tasks`` over ``shards`` shards on ``url``, ``workers`` worker
    processes at their default slots; the steady window's figures."""
    with bench_run(url, "rcscale", shards=shards) as run:
        bapp = run.app
        tenants = spread_tenants(shards, TENANTS_PER_SHARD)
        ids = enqueue_spread(bapp, "bench.noop", tasks, tenants)
        lo, hi = (max(1, int(tasks * f)) for f in WINDOW)
        with ExitStack() as stack:
            procs = [
                stack.enter_context(worker_process(run.url, run.prefix, None, pool, None))
                for _ in range(workers)
            ]
            pids = [p.pid for p in procs]
            # a run too small for the steady window falls back to the whole drain
            origin = _sample(bapp, pids, succeeded_count(bapp))
            first: Sample | None = None
            while True:
                done = succeeded_count(bapp)
                if first is None and done >= lo:
                    first = _sample(bapp, pids, done)
                if done >= hi:
                    last = _sample(bapp, pids, done)
                    break
                if any(p.poll() is not None for p in procs):
                    raise RuntimeError("a worker process exited during the drain; see its stderr")
                time.sleep(0.05)
            wait_all_done(bapp, ids)
        start, end, measured = drain_span(bapp, ids)
        row: dict[str, Any] = {
            "servers": servers,
            "shards": shards,
            "workers": workers,
            "slots_per_worker": default_concurrency(pool),
            "tasks": tasks,
            "drained": measured,
            "drain_per_s": round(measured / max(1e-9, (end - start) / 1000)),
        }
        steady = first is not None and first.done < last.done
        row["window"] = "steady" if steady else "whole drain"
        row.update(cores(first if first is not None and steady else origin, last))
        return row


def scale(
    tasks: int,
    shard_counts: Sequence[int],
    worker_counts: Sequence[int],
    redis_url: str | None = None,
    single: bool = False,
    pool: str = "threads",
) -> dict[str, Any]:
    """Every (shards, workers) cell on one local cluster of :data:`MASTERS`
    masters (or the Redis at ``redis_url``), and with ``single`` S = 1 on one
    redis-server for each worker count; progress on stderr."""
    rows: list[dict[str, Any]] = []
    plan = [("cluster", s, w) for s in shard_counts for w in worker_counts]
    if single:
        plan += [("single", 1, w) for w in worker_counts]
    for kind in ("cluster", "single"):
        todo = [(s, w) for k, s, w in plan if k == kind]
        if not todo:
            continue
        masters = MASTERS if kind == "cluster" else 0
        servers = "given" if redis_url else (f"{MASTERS} masters" if masters else "single")
        with redis_for_bench(redis_url, masters) as url:
            for shards, workers in todo:
                row = cell(url, servers, shards, workers, tasks, pool)
                rows.append(row)
                print(
                    f"scale: {servers}, S={shards}, {workers} worker(s): "
                    f"{row['tasks_per_s']:,} tasks/s, cores {row['cores']}",
                    file=sys.stderr,
                    flush=True,
                )
    return {"tasks": tasks, "masters": None if redis_url else MASTERS, "rows": rows}


#: the text table's columns: (heading, how a row shows it)
_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("servers", lambda r: r["servers"]),
    ("S", lambda r: r["shards"]),
    ("workers", lambda r: r["workers"]),
    ("tasks/s", lambda r: f"{r['tasks_per_s']:,}"),
    ("worker cores", lambda r: f"{r['cores']['workers']:.2f}"),
    ("redis cores", lambda r: f"{r['cores']['redis']:.2f}"),
    (
        "per master",
        lambda r: "/".join(f"{v / r['window_s']:.2f}" for v in r["redis_cpu_s_per_master"]),
    ),
    ("bench cores", lambda r: f"{r['cores']['bench']:.2f}"),
    ("total cores", lambda r: f"{r['cores_total']:.2f}"),
    ("machine busy", lambda r: f"{r['machine_cores']:.2f}"),
)


def table(result: dict[str, Any]) -> str:
    """The rows as a text table, one line per cell."""
    cells = [[head for head, _ in _COLUMNS]]
    cells += [[str(show(row)) for _, show in _COLUMNS] for row in result["rows"]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_COLUMNS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    return "\n".join(lines)


def parse_counts(value: str, option: str) -> list[int]:
    """``"1,4,12"`` as [1, 4, 12]; anything else names the option and the form."""
    try:
        counts = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or any(n < 1 for n in counts):
        raise click.BadParameter(
            f"expected positive whole numbers separated by commas (e.g. 1,4,12), got {value!r}",
            param_hint=option,
        )
    return counts
