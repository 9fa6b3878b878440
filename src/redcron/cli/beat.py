"""``redcron beat``: own shards of the deployment and turn fire times into runs."""

from __future__ import annotations

import click

from redcron.beat.beat import Beat
from redcron.cli.common import (
    FiniteFloatRange,
    app_option,
    build_app,
    durability_option,
    logging_options,
    redis_option,
    setup_logging,
)


@click.command()
@app_option
@redis_option
@durability_option
@click.option(
    "--shard-ttl",
    type=FiniteFloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Lifetime of a shard lease without renewal (a dead beat's shards move after it).",
)
@click.option(
    "--catchup-window",
    type=FiniteFloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Fires overdue by less than this are all fired; older ones follow each job's "
    "catch-up policy. Must be longer than --shard-ttl.",
)
@click.option("--name", default=None, help="Beat id (unique per process) [default: host:pid:rand].")
@logging_options
def beat(
    app_path: str | None,
    redis_url: str | None,
    durability: str | None,
    shard_ttl: float,
    catchup_window: float,
    name: str | None,
    loglevel: str,
    log_format: str,
) -> None:
    """Run a beat until SIGTERM/SIGINT (then release its shards).

    Declared ``@app.cron`` jobs are upserted on start (unchanged ones are left alone).
    Run several for failover: they share the shards.
    """
    setup_logging(loglevel, log_format)
    app = build_app(app_path, redis_url, durability)
    Beat(app, name=name, shard_ttl=shard_ttl, catchup_window=catchup_window).run()
