"""``redcron bench``: side-by-side figures on this machine (not timed tests)."""

from __future__ import annotations

import click

from redcron.cli.bench.compare import compare, parse_systems
from redcron.cli.bench.compare_stats import table as compare_table
from redcron.cli.bench.faces import faces
from redcron.cli.bench.fairness import fairness
from redcron.cli.bench.idle import beat_idle
from redcron.cli.bench.latency import latency
from redcron.cli.bench.leases import DEFAULT_PER_WORKER, LeaseBenchOptions, lease_bench
from redcron.cli.bench.midnight import default_workers, midnight
from redcron.cli.bench.peers import SYSTEMS
from redcron.cli.bench.scale import parse_counts, scale, table
from redcron.cli.bench.schedule import schedule
from redcron.cli.bench.shard_weights import fairness_cluster
from redcron.cli.bench.soak import soak
from redcron.cli.bench.throughput import throughput
from redcron.cli.bench.trigger import trigger
from redcron.cli.common import concurrency_option, pool_option, prefetch_option
from redcron.config import WORKER_PREFETCH_PER_SLOT, WORKER_THREADS
from redcron.model import serialize
from redcron.urls import is_cluster_url

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
@click.option("--cluster", is_flag=True,
              help="On a fresh local Redis Cluster of 3 masters (not with --redis).")  # fmt: skip
@click.option("--shards", type=click.IntRange(min=1), default=None,
              help="Shards of the deployment, tasks spread over tenants on every one "
              "[default: 12 with --cluster, else 1].")  # fmt: skip
@_redis_option
@_json_option
def throughput_cmd(
    tasks: int,
    concurrency: int | None,
    prefetch: int | None,
    pool: str,
    body: str,
    cluster: bool,
    shards: int | None,
    redis_url: str | None,
    as_json: bool,
) -> None:
    """Enqueue TASKS with enqueue_many, then one worker process drains them
    (at the worker's default settings unless told otherwise)."""

    if tasks < 1:
        raise click.BadParameter("must be >= 1", param_hint="--tasks")
    if cluster and redis_url:
        raise click.BadParameter(
            "--cluster starts its own cluster; give a cluster's redis+cluster:// URL "
            "to --redis instead",
            param_hint="--cluster",
        )
    on_cluster = cluster or "+cluster" in (redis_url or "")
    if body == "incr" and on_cluster:
        raise click.BadParameter(
            "the incr body connects to one server; use --body noop on a cluster",
            param_hint="--body",
        )
    if cluster and shards is None:
        shards = 12
    masters = 3 if cluster else 0
    _emit(throughput(tasks, concurrency, pool, body, redis_url, prefetch, masters, shards), as_json)


@bench.command("scale")
@click.option("--tasks", default=20_000, show_default=True, type=click.IntRange(min=10),
              help="Tasks drained in each cell.")  # fmt: skip
@click.option("--shards", "shard_list", default="1,4,12", show_default=True,
              help="Shard counts, comma-separated.")  # fmt: skip
@click.option("--workers", "worker_list", default="1,2,4", show_default=True,
              help="Worker processes, comma-separated.")  # fmt: skip
@click.option("--single", is_flag=True,
              help="Add S=1 on one redis-server for each worker count.")  # fmt: skip
@pool_option("Where each worker process runs its tasks.")
@click.option("--redis", "redis_url", default=None, metavar="URL",
              help="Use this Redis or cluster instead of a local 3-master cluster.")  # fmt: skip
@_json_option
def scale_cmd(
    tasks: int,
    shard_list: str,
    worker_list: str,
    single: bool,
    pool: str,
    redis_url: str | None,
    as_json: bool,
) -> None:
    """Drain rate with each shard count over a local 3-master cluster and each
    number of worker processes (default slots), and the CPU of the workers,
    each master and this process over the steady part of the drain."""

    if single and redis_url:
        raise click.BadParameter(
            "--single starts its own redis-server beside the cluster; leave out --redis, "
            "or run again with --redis pointing at one server",
            param_hint="--single",
        )
    shard_counts = parse_counts(shard_list, "--shards")
    worker_counts = parse_counts(worker_list, "--workers")
    result = scale(tasks, shard_counts, worker_counts, redis_url, single, pool)
    if as_json:
        click.echo(serialize.dumps(result, indent=None))
    else:
        click.echo(table(result))


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


@bench.command("midnight")
@click.option("--schedules", default=1_000_000, show_default=True, type=int,
              help="Cron schedules registered (the rest once a year).")  # fmt: skip
@click.option("--tenants", default=10_000, show_default=True, type=int,
              help="Tenants the schedules are spread over (round robin).")  # fmt: skip
@click.option("--due", default=100_000, show_default=True, type=int,
              help="Of the schedules, due in the same second.")  # fmt: skip
@click.option("--workers", default=None, type=int,
              help=f"Worker processes [default: cores - 1, here {default_workers()}].")  # fmt: skip
@click.option("--cluster", is_flag=True, help="Start a local Redis Cluster for the run.")
@click.option("--masters", default=3, show_default=True, type=int,
              help="Masters of the --cluster.")  # fmt: skip
@click.option("--shards", default=None, type=int,
              help="Shards [default: 12 on a cluster, 1 on one server].")  # fmt: skip
@_redis_option
@_json_option
def midnight_cmd(
    schedules: int,
    tenants: int,
    due: int,
    workers: int | None,
    cluster: bool,
    masters: int,
    shards: int | None,
    redis_url: str | None,
    as_json: bool,
) -> None:
    """DUE of SCHEDULES cron schedules over TENANTS tenants due in the same second:
    start delay (p50/p99/max), fires and starts per second, Jain index of starts
    per tenant, dropped fires, Redis memory and CPU, set-up time; the design's
    targets marked met or not.  Progress on stderr."""

    _check_midnight(schedules, tenants, due, workers, cluster, masters, shards, redis_url)
    on_cluster = cluster or bool(redis_url and is_cluster_url(redis_url))
    if shards is None:
        shards = 12 if on_cluster else 1
    result = midnight(
        schedules, tenants, due, workers, redis_url, masters if cluster else 0, shards
    )
    _emit(result, as_json)


def _check_midnight(
    schedules: int,
    tenants: int,
    due: int,
    workers: int | None,
    cluster: bool,
    masters: int,
    shards: int | None,
    redis_url: str | None,
) -> None:
    """The midnight options' checks, each error naming its option."""
    if tenants < 1:
        raise click.BadParameter("must be >= 1", param_hint="--tenants")
    if due < tenants:
        raise click.BadParameter(
            f"must be >= --tenants ({tenants}): every tenant gets a due schedule",
            param_hint="--due",
        )
    if schedules < due:
        raise click.BadParameter(f"must be >= --due ({due})", param_hint="--schedules")
    if workers is not None and workers < 1:
        raise click.BadParameter("must be >= 1", param_hint="--workers")
    if shards is not None and shards < 1:
        raise click.BadParameter("must be >= 1", param_hint="--shards")
    if cluster and redis_url:
        raise click.BadParameter(
            "--cluster starts a local cluster; give either --cluster or --redis",
            param_hint="--cluster",
        )
    if cluster and masters < 1:
        raise click.BadParameter("must be >= 1", param_hint="--masters")


@bench.command("compare")
@click.option("--systems", "system_list", default=",".join(SYSTEMS), show_default=True,
              help="Systems to run, comma-separated.")  # fmt: skip
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1),
              help="Rounds; the systems alternate within each (medians reported).")  # fmt: skip
@click.option("--tasks", default=20_000, show_default=True, type=click.IntRange(min=10),
              help="Tasks enqueued, then drained by one worker process, each round.")  # fmt: skip
@click.option("--samples", default=100, show_default=True, type=click.IntRange(min=1),
              help="Idle enqueue-to-start latency samples, per system and round.")  # fmt: skip
@click.option(
    "--body",
    type=click.Choice(["incr", "noop"]),
    default="incr",
    show_default=True,
    help="Task body: one Redis INCR on the executing thread's own connection, or nothing.",
)
@_redis_option
@_json_option
def compare_cmd(
    system_list: str,
    rounds: int,
    tasks: int,
    samples: int,
    body: str,
    redis_url: str | None,
    as_json: bool,
) -> None:
    """redcron side by side with Celery, Dramatiq, Huey, RQ, arq and BullMQ on one
    Redis: enqueue rates, drain rate of one worker process, idle latency, Redis
    and worker CPU per task, and each ratio redcron/peer.

    The Python peers come from the bench extra (pip install -e '.[bench]');
    BullMQ runs when node and npm are on PATH (installed on first use into
    ~/.cache/redcron/bench-node).  A peer that is missing is skipped with a note.
    """

    if redis_url and "+cluster" in redis_url:
        raise click.BadParameter("the peers need one redis-server, not a cluster",
                                 param_hint="--redis")  # fmt: skip
    try:
        systems = parse_systems(system_list)
    except ValueError as exc:
        raise click.BadParameter(str(exc).removeprefix("--systems: "),
                                 param_hint="--systems") from None  # fmt: skip
    result = compare(systems, rounds, tasks, samples, body, redis_url)
    if as_json:
        click.echo(serialize.dumps(result, indent=None))
    else:
        click.echo(compare_table(result))
