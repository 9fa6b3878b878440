"""``redcron bench``: side-by-side figures on this machine (not timed tests)."""

from __future__ import annotations

from typing import Any

import click

from redcron.cli.bench.design import COMMANDS
from redcron.cli.bench.faces import faces
from redcron.cli.bench.fairness import fairness
from redcron.cli.bench.idle import beat_idle
from redcron.cli.bench.latency import latency
from redcron.cli.bench.options import emit as _emit
from redcron.cli.bench.options import json_option as _json_option
from redcron.cli.bench.options import redis_option as _redis_option
from redcron.cli.bench.schedule import schedule
from redcron.cli.bench.shard_weights import fairness_cluster
from redcron.cli.bench.soak import soak
from redcron.cli.bench.throughput import throughput, throughput_otel
from redcron.cli.bench.throughput import versus as compare_bodies
from redcron.cli.bench.trigger import trigger
from redcron.cli.common import concurrency_option, pool_option, prefetch_option
from redcron.cli.worker_procs import MAX_PROCS
from redcron.config import WORKER_PREFETCH_PER_SLOT, WORKER_THREADS

#: the task bodies of ``bench throughput`` (``bench.<body>`` in fixtures.register)
BODIES = ["noop", "incr", "async_noop", "async_incr"]


@click.group()
def bench() -> None:
    """Benchmarks: throughput and latency against a real Redis; schedule (pure).

    Without --redis a fresh embedded redis-server (no persistence) is started
    for the run, so figures are not polluted by other data.
    """


@bench.command("throughput")
@click.option("--tasks", default=20_000, show_default=True, help="Tasks to enqueue and drain.")
@concurrency_option(
    None,
    "Worker slots.",
    show=f"the worker's: {WORKER_THREADS} threads; one per core with --pool processes",
)
@prefetch_option(
    "Leases held beyond the slots.",
    show=f"the worker's: {WORKER_PREFETCH_PER_SLOT} x concurrency",
)
@pool_option()
@click.option(
    "--body",
    type=click.Choice(BODIES),
    default="noop",
    show_default=True,
    help="Task body: nothing, or one Redis INCR on the executing thread's own "
    "connection (as the peers were measured); async_noop, async_incr: the same as "
    "async def tasks, on the worker's event loop (the INCR through redis.asyncio).",
)
@click.option("--versus", type=click.Choice(BODIES), default=None,
              help="A second body measured in the same run: rounds of the two "
              "alternated, the median of each (--rounds).")  # fmt: skip
@click.option("--rounds", type=click.IntRange(1, 99), default=3, show_default=True,
              help="With --versus or --otel: rounds of each side, alternating.")  # fmt: skip
@click.option("--cluster", is_flag=True,
              help="On a fresh local Redis Cluster of 3 masters (not with --redis).")  # fmt: skip
@click.option("--shards", type=click.IntRange(min=1), default=None,
              help="Shards of the deployment, tasks spread over tenants on every one "
              "[default: 12 with --cluster, else 1].")  # fmt: skip
@click.option("--procs", type=click.IntRange(1, MAX_PROCS), default=1, show_default=True,
              help="Worker processes (redcron worker --procs), each with these slots.")  # fmt: skip
@click.option("--otel", type=click.Choice(["memory"]), default=None,
              help="The cost of tracing: each figure with OpenTelemetry off and on (the "
              "SDK, spans kept in memory), side by side, --rounds of each alternating; "
              "their medians.")  # fmt: skip
@_redis_option
@_json_option
def throughput_cmd(
    tasks: int,
    concurrency: int | None,
    prefetch: int | None,
    pool: str,
    body: str,
    versus: str | None,
    rounds: int,
    cluster: bool,
    shards: int | None,
    procs: int,
    otel: str | None,
    redis_url: str | None,
    as_json: bool,
) -> None:
    """Enqueue TASKS with enqueue_many, then one worker process drains them
    (at the worker's default settings unless told otherwise), or --procs N of
    them; with the CPU Redis, the workers and the machine used over the drain."""

    if tasks < 1:
        raise click.BadParameter("must be >= 1", param_hint="--tasks")
    if cluster and redis_url:
        raise click.BadParameter(
            "--cluster starts its own cluster; give a cluster's redis+cluster:// URL "
            "to --redis instead",
            param_hint="--cluster",
        )
    on_cluster = cluster or "+cluster" in (redis_url or "")
    if {body, versus} & {"incr", "async_incr"} and on_cluster:
        raise click.BadParameter(
            "the incr bodies connect to one server; use --body noop on a cluster",
            param_hint="--body",
        )
    if otel and versus:
        raise click.BadParameter("one comparison a run: --otel or --versus", param_hint="--otel")
    if otel and (on_cluster or shards or procs > 1):
        raise click.BadParameter(
            "compares one worker on one server: not with --cluster, --shards or --procs",
            param_hint="--otel",
        )
    if otel:
        _emit(
            throughput_otel(tasks, concurrency, pool, body, redis_url, prefetch, otel, rounds),
            as_json,
        )
        return
    if cluster and shards is None:
        shards = 12
    masters = 3 if cluster else 0

    def run(one: str) -> dict[str, Any]:
        return throughput(
            tasks, concurrency, pool, one, redis_url, prefetch, masters, shards, procs
        )

    if versus is None:
        _emit(run(body), as_json)
    else:
        _emit(compare_bodies([body, versus], rounds, run), as_json)


@bench.command("latency")
@click.option("--samples", default=200, show_default=True, help="Tasks, one at a time.")
@_redis_option
@_json_option
def latency_cmd(samples: int, redis_url: str | None, as_json: bool) -> None:
    """Enqueue → task start with an idle worker (p50/p99 in ms)."""

    if samples < 1:
        raise click.BadParameter("must be >= 1", param_hint="--samples")
    _emit(latency(samples, redis_url), as_json)


@bench.command("trigger")
@click.option("--jobs", default=100_000, show_default=True, help="Schedules registered.")
@click.option(
    "--due-same-second", default=10_000, show_default=True, help="Of which due in one second."
)
@click.option("--idle-seconds", default=10.0, show_default=True, help="Idle CPU window.")
@_redis_option
@_json_option
def trigger_cmd(
    jobs: int, due_same_second: int, idle_seconds: float, redis_url: str | None, as_json: bool
) -> None:
    """Fire lag of DUE-SAME-SECOND jobs among JOBS registered schedules, and beat CPU."""

    if not 0 < due_same_second <= jobs:
        raise click.BadParameter("need 0 < --due-same-second <= --jobs")
    _emit(trigger(jobs, due_same_second, redis_url, idle_seconds), as_json)


@bench.command("beat-idle")
@click.option("--jobs", default=100_000, show_default=True, help="Schedules registered, none due.")
@click.option("--seconds", default=5.0, show_default=True, help="Idle window measured.")
@_redis_option
@_json_option
def beat_idle_cmd(jobs: int, seconds: float, redis_url: str | None, as_json: bool) -> None:
    """CPU share of one beat process with JOBS schedules registered and nothing due."""

    if jobs < 1 or seconds <= 0:
        raise click.BadParameter("need --jobs >= 1 and --seconds > 0")
    _emit(beat_idle(jobs, seconds, redis_url), as_json)


@bench.command("fairness")
@click.option("--backfill", default=50_000, show_default=True, help="Backfill tenant's tasks.")
@click.option("--cluster", is_flag=True,
              help="Weighted tenants on different shards of a local 3-master cluster "
              "(12 shards), against the same weights on one shard; with --redis, "
              "that cluster.")  # fmt: skip
@click.option("--tasks-per-weight", default=1_000, show_default=True,
              type=click.IntRange(min=10),
              help="With --cluster: tasks per unit of weight.")  # fmt: skip
@_redis_option
@_json_option
def fairness_cmd(
    backfill: int, cluster: bool, tasks_per_weight: int, redis_url: str | None, as_json: bool
) -> None:
    """Weighted shares, Jain index, small-tenant wait behind a backfill, lease cost;
    with --cluster, weighted shares across shards."""

    if cluster:
        _emit(fairness_cluster(redis_url, tasks_per_weight), as_json)
        return
    _emit(fairness(redis_url, backfill), as_json)


@bench.command("schedule")
@click.option("--calls", default=2_000, show_default=True, help="next_fire calls per case.")
@_json_option
def schedule_cmd(calls: int, as_json: bool) -> None:
    """Microseconds per next_fire call: cron in UTC and in a DST zone, near a fall-back.

    Pure computation: no Redis is started or used.
    """

    if calls < 1:
        raise click.BadParameter("must be >= 1", param_hint="--calls")
    _emit(schedule(calls), as_json)


@bench.command("soak")
@click.option("--minutes", default=10, show_default=True, type=click.IntRange(min=1),
              help="Minutes to run (one memory sample each).")  # fmt: skip
@click.option("--runs-per-minute", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Runs fired a minute (two-task DAGs).")  # fmt: skip
@click.option("--retention", "retention_s", default=120, show_default=True,
              type=click.IntRange(min=10), help="Seconds each job keeps its runs.")  # fmt: skip
@_redis_option
@_json_option
def soak_cmd(
    minutes: int, runs_per_minute: int, retention_s: int, redis_url: str | None, as_json: bool
) -> None:
    """Memory each minute with retention on: flat after the first retention
    period?  And bytes per retained finished instance (a line a minute on stderr)."""

    _emit(soak(minutes, runs_per_minute, retention_s, redis_url), as_json)


@bench.command("faces")
@click.option("--tenants", "sizes", multiple=True, type=click.IntRange(min=1),
              default=(10, 10_000), show_default=True,
              help="Tenants (one job, one queued, one delayed and one dead task each; "
                   "a worker per 5 tenants); repeat for each size.")  # fmt: skip
@_redis_option
@_json_option
def faces_cmd(sizes: tuple[int, ...], redis_url: str | None, as_json: bool) -> None:
    """The overview, tenants, jobs, DLQ and workers pages, GET /v1/jobs, /v1/runs,
    /v1/dlq, /v1/workers and /metrics at each size: median time and reply size,
    and whether the largest size stays within 3x of the smallest (and /v1/jobs,
    /metrics under 1 MB)."""

    _emit(faces(sizes, redis_url), as_json)


for _command in COMMANDS:
    bench.add_command(_command)
