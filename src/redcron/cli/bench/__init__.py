"""``redcron bench``: side-by-side figures on this machine (not timed tests)."""

from __future__ import annotations

import click

from redcron.cli.bench.faces import faces
from redcron.cli.bench.fairness import fairness
from redcron.cli.bench.idle import beat_idle
from redcron.cli.bench.latency import latency
from redcron.cli.bench.leases import DEFAULT_PER_WORKER, LeaseBenchOptions, lease_bench
from redcron.cli.bench.schedule import schedule
from redcron.cli.bench.soak import soak
from redcron.cli.bench.throughput import throughput
from redcron.cli.bench.trigger import trigger
from redcron.cli.common import concurrency_option, pool_option, prefetch_option
from redcron.config import WORKER_PREFETCH_PER_SLOT, WORKER_THREADS
from redcron.model import serialize

#: options the benchmarks share (each use adds a click.Option of its own)
_redis_option = click.option(
    "--redis", "redis_url", default=None, metavar="URL", help="Use this Redis."
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


@click.group()
def bench() -> None:
    """Benchmarks: throughput and latency against a real Redis; schedule (pure).

    Without --redis a fresh embedded redis-server (no persistence) is started
    for the run, so figures are not polluted by other data.
    """


def _emit(result: dict[str, object], as_json: bool) -> None:
    if as_json:
        click.echo(serialize.dumps(result, indent=None))  # the one strict serializer
        return
    width = max(len(k) for k in result)
    for key, value in result.items():
        click.echo(f"{key.ljust(width)}  {value}")


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
    type=click.Choice(["noop", "incr"]),
    default="noop",
    show_default=True,
    help="Task body: nothing, or one Redis INCR on the executing thread's own "
    "connection (as the peers were measured).",
)
@_redis_option
@_json_option
def throughput_cmd(
    tasks: int,
    concurrency: int | None,
    prefetch: int | None,
    pool: str,
    body: str,
    redis_url: str | None,
    as_json: bool,
) -> None:
    """Enqueue TASKS with enqueue_many, then one worker process drains them
    (at the worker's default settings unless told otherwise)."""

    if tasks < 1:
        raise click.BadParameter("must be >= 1", param_hint="--tasks")
    _emit(throughput(tasks, concurrency, pool, body, redis_url, prefetch), as_json)


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
@_redis_option
@_json_option
def fairness_cmd(backfill: int, redis_url: str | None, as_json: bool) -> None:
    """Weighted shares, Jain index, small-tenant wait behind a backfill, lease cost."""

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
              help="Tenants (one job and one queued task each); repeat for each size.")  # fmt: skip
@_redis_option
@_json_option
def faces_cmd(sizes: tuple[int, ...], redis_url: str | None, as_json: bool) -> None:
    """The overview, tenants and jobs pages, GET /v1/jobs, GET /v1/runs and
    /metrics at each size: median time and reply size, and whether the largest
    size stays within 3x of the smallest (and /v1/jobs, /metrics under 1 MB)."""

    _emit(faces(sizes, redis_url), as_json)


@bench.command("leases")
@click.option("--leases", default=150_000, show_default=True, type=click.IntRange(min=1),
              help="Live leases held by the simulated workers.")  # fmt: skip
@click.option("--heartbeat-s", default=10.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between one worker's heartbeats.")  # fmt: skip
@click.option("--ttl", "ttl_s", default=None, type=click.FloatRange(min=0.1),
              help="TTL each heartbeat sets (s)  [default: 1.5 x --heartbeat-s]")  # fmt: skip
@click.option("--seconds", default=20.0, show_default=True, type=click.FloatRange(min=1),
              help="Measured window, every worker alive.")  # fmt: skip
@click.option("--per-worker", default=DEFAULT_PER_WORKER, show_default=True,
              type=click.IntRange(1, 256),
              help="Leases per simulated worker (a default worker's).")  # fmt: skip
@click.option("--kill", "kill_fraction", default=0.1, show_default=True,
              type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Fraction of the workers killed after the window.")  # fmt: skip
@click.option("--tenants", default=100, show_default=True, type=click.IntRange(min=1),
              help="Tenants the tasks are spread over.")  # fmt: skip
@click.option("--cluster", is_flag=True,
              help="12 shards on a local 3-master Redis Cluster (or on --redis).")  # fmt: skip
@_redis_option
@_json_option
def leases_cmd(
    leases: int,
    heartbeat_s: float,
    ttl_s: float | None,
    seconds: float,
    per_worker: int,
    kill_fraction: float,
    tenants: int,
    cluster: bool,
    redis_url: str | None,
    as_json: bool,
) -> None:
    """Redis CPU of LEASES live leases heartbeating every HEARTBEAT-S seconds and
    of the reaper, and how late a killed worker's leases are reaped; the targets
    of issue 18 marked met or not."""

    opts = LeaseBenchOptions(
        leases, heartbeat_s, ttl_s, seconds, per_worker, kill_fraction, tenants
    )
    try:
        opts.check()
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    _emit(lease_bench(opts, redis_url, cluster), as_json)
