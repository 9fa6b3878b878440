"""The ``redcron bench`` commands at the design's scale (issue 18, 19): scale
(shards x worker processes), leases (the lease envelope) and midnight (the
burst end to end).  The peers side by side are the checkout's
``python -m bench.compare`` (issue 31: not in the wheel)."""

from __future__ import annotations

import click

from redcron.cli.bench.leases import DEFAULT_PER_WORKER, LeaseBenchOptions, lease_bench
from redcron.cli.bench.midnight import default_workers, midnight
from redcron.cli.bench.options import emit as _emit
from redcron.cli.bench.options import json_option as _json_option
from redcron.cli.bench.options import redis_option as _redis_option
from redcron.cli.bench.scale import parse_counts, scale, table
from redcron.cli.common import pool_option
from redcron.model import serialize
from redcron.urls import is_cluster_url


@click.command("scale")
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


@click.command("leases")
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


@click.command("midnight")
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


#: the commands here, added to the ``bench`` group
COMMANDS = (scale_cmd, leases_cmd, midnight_cmd)
