"""The ``redcron`` click group: logging setup and the command families."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import click

from redcron.cli import jobs, runs
from redcron.cli.admin import admin
from redcron.cli.audit import audit
from redcron.cli.beat import beat
from redcron.cli.bench import bench
from redcron.cli.channels import channels
from redcron.cli.chaos import chaos
from redcron.cli.cluster import cluster
from redcron.cli.common import LOG_LEVELS, RedcronGroup, say_on_stderr, setup_logging
from redcron.cli.dashboard import dashboard
from redcron.cli.dlq import dlq
from redcron.cli.doctor import doctor
from redcron.cli.notifier import notifier
from redcron.cli.tasks import inspect_cmd, task
from redcron.cli.tenants import tenants
from redcron.cli.up import up
from redcron.cli.worker import worker
from redcron.cli.workers import workers
from redcron.config import find_redis_url, redis_url_notices


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the version, and the Redis a command run here would use and why."""
    if not value or ctx.resilient_parsing:
        return
    try:
        mine = version("redcron")
    except PackageNotFoundError:  # run from a source tree that was never installed
        mine = "unknown (not installed)"
    click.echo(f"redcron {mine}")
    click.echo(f"redis: {find_redis_url().describe()}")
    ctx.exit()


@click.group(cls=RedcronGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version and the Redis URL commands here would use (and why), then exit.",
)
@click.option(
    "--loglevel",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="warning",
    show_default=True,
    envvar="REDCRON_LOGLEVEL",
    help="Logging level for admin commands (worker and up take their own).",
)
@click.pass_context
def main(ctx: click.Context, loglevel: str) -> None:
    """redcron: a Redis task queue with fenced leases."""
    setup_logging(loglevel)
    # which Redis a command found, when nobody named one: one line on stderr
    ctx.with_resource(redis_url_notices(say_on_stderr))


main.add_command(worker)
main.add_command(beat)
main.add_command(up)
main.add_command(dashboard)
main.add_command(task)
main.add_command(inspect_cmd)
main.add_command(dlq)
main.add_command(bench)
main.add_command(jobs.jobs)
main.add_command(runs.runs)
main.add_command(tenants)
main.add_command(workers)
main.add_command(doctor)
main.add_command(chaos)
main.add_command(admin)
main.add_command(audit)
main.add_command(channels)
main.add_command(notifier)
main.add_command(cluster)

if __name__ == "__main__":
    main(prog_name="redcron")
