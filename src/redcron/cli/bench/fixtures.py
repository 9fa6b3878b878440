"""What the benchmarks of ``redcron bench`` share: the benchmark App and its
tasks, the Redis a run uses (given, or a fresh embedded one) with a key prefix
of its own (deleted after), the schedules that are never due, the worker and
beat processes it starts, waiting for tasks to finish, a process's CPU time and
the one p99 rule every figure uses.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
import redis.asyncio

from redcron.app import App
from redcron.clock import ulid
from redcron.embedded import EmbeddedRedis
from redcron.embedded_cluster import EmbeddedCluster
from redcron.keys import COUNTER_ATTEMPTS, shard_of, shard_of_id
from redcron.model.jobs import JobSpec, Task
from redcron.model.states import TaskState

#: the state field as the pipeline returns it (bytes), compared in a hot loop
_SUCCEEDED = TaskState.SUCCEEDED.encode()

_T = TypeVar("_T")

#: the async incr body's connections at most: a connection for each coroutine
#: a worker may run at once
ASYNC_INCR_CONNECTIONS = 4_096


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

    @app.task(name="bench.async_noop", retries=0)
    async def async_noop() -> None:
        return None

    loop_client: dict[str, redis.asyncio.Redis] = {}

    @app.task(name="bench.async_incr", retries=0)
    async def async_incr() -> None:
        # The incr body as an async def task on the worker's event loop: one INCR
        # through one redis.asyncio client for the loop (one loop per process),
        # whose pool gives each coroutine awaiting at once a connection of its own,
        # as each thread has one: not capped at the pool's default of 100, which
        # fails the 101st coroutine at once at -c 256 (MaxConnectionsError).
        client = loop_client.get("client")
        if client is None:
            client = loop_client["client"] = redis.asyncio.Redis.from_url(
                app.settings.redis_url, max_connections=ASYNC_INCR_CONNECTIONS
            )
        await client.incr(f"{app.settings.prefix}:bench:counter")

    @app.task(name="bench.now", retries=0)
    def now() -> float:
        return time.time()

    return app


#: how a benchmark worker process (and its processes pool) loads its App:
#: "redcron.cli.bench.fixtures:bench_app()", built from this module's name so
#: that it follows the module if it moves
BENCH_APP = f"{__name__}:bench_app()"


def bench_app() -> App:
    """The App of a benchmark worker process (:data:`BENCH_APP`), from the
    REDCRON_REDIS_URL and REDCRON_PREFIX the benchmark gives it: read when
    called, never at import (``redcron --help`` imports this module)."""
    return register(App())


@contextmanager
def redis_for_bench(url: str | None, masters: int = 0) -> Iterator[str]:
    """The given Redis; else a fresh embedded one (no persistence cost) for the
    run, or with ``masters`` a fresh local Redis Cluster of that many masters."""
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory(prefix="redcron-bench-") as tmp:
        if masters:
            with EmbeddedCluster(tmp, masters=masters, die_with_parent=True) as cluster:
                yield cluster.url
            return
        server = EmbeddedRedis(tmp, appendonly=False, die_with_parent=True)
        server.start()
        try:
            yield server.url
        finally:
            server.stop()


@dataclass(frozen=True)
class BenchRun:
    """One benchmark's Redis, its key prefix and the App the benchmark drives."""

    url: str
    prefix: str
    app: App


@contextmanager
def bench_run(
    redis_url: str | None, kind: str = "rcbench", masters: int = 0, shards: int | None = None
) -> Iterator[BenchRun]:
    """A fresh prefix (``kind`` and six random characters) on :func:`redis_for_bench`
    (a local cluster of ``masters`` when asked) and the benchmark App on it with
    ``shards`` shards; on exit every key under the prefix is deleted and the App
    closed."""
    prefix = f"{kind}{ulid()[-6:].lower()}"
    with redis_for_bench(redis_url, masters) as url:
        bapp = register(App(url, prefix=prefix, shards=shards))
        try:
            yield BenchRun(url, prefix, bapp)
        finally:
            _cleanup(bapp)
            bapp.close()


@contextmanager
def worker_process(
    url: str,
    prefix: str,
    concurrency: int | None,
    pool: str,
    prefetch: int | None = 0,
    procs: int = 1,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A benchmark worker process, logging as ``redcron worker`` does (INFO, the
    CLI's format: the line per attempt included) into a file of its own; what it
    logged above INFO is copied to stderr once it stops.  With ``procs`` > 1,
    ``redcron worker --procs`` (its supervisor is the process yielded: count its
    children's CPU with :func:`tree_cpu_s`).  ``env``: added to its environment
    (``REDCRON_OTEL``)."""
    if procs > 1:
        argv = ["-A", BENCH_APP, "--procs", str(procs), "--pool", pool, "--grace", "2"]
        argv += ["-c", str(concurrency)] if concurrency is not None else []
        argv += ["--prefetch", str(prefetch)] if prefetch is not None else []
        argv = ["worker", *argv, "--loglevel", "info"]
        code = f"from redcron.cli.main import main; main({argv!r})"
    else:
        code = (
            "from redcron.worker import Worker;"
            f"Worker(app, concurrency={concurrency}, pool={pool!r}, grace=2, prefetch={prefetch},"
            f"app_path={BENCH_APP!r}).run()"
        )
    with tempfile.TemporaryFile() as logfile:
        try:
            with _python_process(
                url, prefix, code, "info", logfile, app=procs == 1, env=env
            ) as proc:
                yield proc
        finally:
            logfile.seek(0)
            for line in logfile:
                if b" INFO " not in line[:40]:
                    sys.stderr.write(line.decode(errors="replace"))


@contextmanager
def beat_process(url: str, prefix: str) -> Iterator[subprocess.Popen[bytes]]:
    code = "from redcron.beat.beat import Beat; Beat(app, apply_declared=False).run()"
    with _python_process(url, prefix, code) as proc:
        yield proc


@contextmanager
def _python_process(
    url: str,
    prefix: str,
    code: str,
    level: str = "warning",
    stderr: Any = None,
    app: bool = True,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A child Python running ``code``, logging at ``level`` as the CLI does (to
    ``stderr``: a file, default ours), with the benchmark app imported as ``app``
    first (``app=False``: ``code`` is a whole command line of its own, which sets
    up its logging itself); terminated (then killed) on exit."""
    env = dict(os.environ, **(env or {}), REDCRON_REDIS_URL=url, REDCRON_PREFIX=prefix)
    head = ""
    if app:
        head = f"from redcron.cli.common import setup_logging; setup_logging({level!r});"
        head += f"from {__name__} import bench_app; app = bench_app();"
    proc = subprocess.Popen([sys.executable, "-c", head + code], env=env, stderr=stderr)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _cleanup(bapp: App) -> None:
    unlink_matching(bapp.broker.client, f"{bapp.settings.prefix}:*")


def unlink_matching(client: Any, pattern: str) -> None:
    """UNLINK every key matching ``pattern`` (a SCAN, a thousand at a time)."""
    batch: list[bytes] = []
    for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            client.unlink(*batch)
            batch = []
    if batch:
        client.unlink(*batch)


def idle_jobs(count: int, tenants: int = 100) -> list[JobSpec]:
    """``count`` schedules spread over ``tenants`` tenants (``t0``, ``t1``, ...),
    due once a year (1 January, midnight): registered, never due during a run."""
    return [
        JobSpec(
            name=f"idle{i}",
            tenant=f"t{i % tenants}",
            cron="0 0 1 1 *",
            tasks={"t": Task("bench.noop")},
        )
        for i in range(count)
    ]


def spread_tenants(shards: int, per_shard: int) -> list[str]:
    """Tenant names ``t<i>``, the first ``per_shard`` that land on each of
    ``shards`` shards (:func:`redcron.keys.shard_of`): work spread over them
    loads every shard alike, whatever the hash does with few names."""
    names: list[str] = []
    room = [per_shard] * shards
    i = 0
    while len(names) < shards * per_shard:
        name = f"t{i}"
        shard = shard_of(name, shards)
        if room[shard]:
            room[shard] -= 1
            names.append(name)
        i += 1
    return names


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` counts that differ by at most one (larger first)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def enqueue_spread(bapp: App, task_name: str, tasks: int, tenants: Sequence[str]) -> list[str]:
    """Enqueue ``tasks`` of ``task_name`` split evenly over ``tenants``, with
    enqueue_many in batches of 1,000; returns their ids."""
    task = bapp.tasks[task_name]
    ids: list[str] = []
    for tenant, count in zip(tenants, split_evenly(tasks, len(tenants)), strict=True):
        for i in range(0, count, 1_000):
            batch = task.enqueue_many([()] * min(1_000, count - i), _tenant=tenant)
            ids += [h.id for h in batch]
    return ids


def succeeded_count(bapp: App) -> int:
    """Attempts that succeeded so far, every shard (the shards' outcome counters:
    one small read per shard, cheap enough to poll during a drain)."""
    client, keys = bapp.broker.client, bapp.broker.keys
    pipe = client.pipeline(transaction=False)
    for shard in range(bapp.broker.shards):
        pipe.hget(keys.counters(shard), f"{COUNTER_ATTEMPTS}*|succeeded")
    return sum(int(n or 0) for n in pipe.execute())


def redis_cpu_s(bapp: App) -> list[float]:
    """User + system CPU seconds of the server, or of each master of a cluster
    (``INFO cpu``)."""
    return [info_cpu_s(info) for info in bapp.broker.server_info("cpu")]


def info_cpu_s(info: Mapping[str, Any]) -> float:
    """User + system CPU seconds in one ``INFO cpu`` reply."""
    return float(info.get("used_cpu_sys", 0)) + float(info.get("used_cpu_user", 0))


def wait_all_done(bapp: App, ids: list[str], timeout_s: float = 600) -> None:
    """Wait until every task succeeded, looking at a small window of the oldest
    unfinished ones at a time: a poll of every pending id (thousands of HGETs
    in one pipeline, ten times a second) would take CPU from the worker and
    Redis being measured on a 2-core machine.  Raises TimeoutError after
    ``timeout_s``."""
    client = bapp.broker.client
    keys = bapp.broker.keys
    deadline = time.monotonic() + timeout_s
    pending = list(ids)
    window = 256
    while pending:
        head = pending[:window]
        pipe = client.pipeline(transaction=False)
        for iid in head:
            pipe.hget(keys.ti(shard_of_id(iid), iid), "state")
        states = pipe.execute()
        left = [i for i, s in zip(head, states, strict=True) if s != _SUCCEEDED]
        pending = left + pending[window:]
        if left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} tasks not done after {timeout_s:g} s")
            time.sleep(0.05)


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and of its live descendants (Linux
    /proc): a supervisor and its worker processes."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    tree, frontier = [pid], [pid]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier]
        tree += frontier
    total = 0.0
    for p in tree:
        try:
            total += proc_cpu_s(p)
        except (OSError, IndexError, ValueError):
            continue
    return total


def machine_busy_s() -> float:
    """CPU seconds every core of the machine has spent busy since boot (Linux
    /proc/stat: all but idle and iowait), whoever ran: what a benchmark's own
    processes did not use of it went to others sharing the machine."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # guest time is inside user already
    return busy / os.sysconf("SC_CLK_TCK")


def percentile(ordered: Sequence[_T], q: float) -> _T:
    """The ``q`` quantile (0 <= q <= 1) of a sorted, non-empty sequence: the
    value at index ``int(len * q)``, the largest when that runs past the end
    (``q`` 0.5 of 4 values is the third)."""
    if not ordered:
        raise ValueError("percentile of an empty sequence")
    if not 0 <= q <= 1:
        raise ValueError(f"q={q}: a quantile is between 0 and 1")
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def p99(ordered: Sequence[_T]) -> _T:
    """The 99th percentile of a sorted, non-empty sequence (nearest rank, the
    largest for fewer than 100 values)."""
    return percentile(ordered, 0.99)


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index of ``values``: (sum x)^2 / (n * sum x^2), 1 when
    all are equal, 1/n when one holds everything; 1 for all zeros (nobody got
    more than anybody) and for no values at all."""
    square_sum = sum(x * x for x in values)
    if not values or square_sum == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * square_sum)


def redis_used_memory(bapp: App) -> int:
    """``used_memory`` in bytes, summed over the masters of a cluster."""
    return sum(int(info["used_memory"]) for info in bapp.broker.server_info("memory"))
