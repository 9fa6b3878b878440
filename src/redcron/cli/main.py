"""The ``redcron`` click group: logging setup and the command families."""

from __future__ import annotations

import click

from redcron.cli import jobs, runs
from redcron.cli.admin import admin
from redcron.cli.audit import audit
from redcron.cli.beat import beat
from redcron.cli.bench import bench
from redcron.cli.channels import channels
from redcron.cli.chaos import chaos
from redcron.cli.common import LOG_LEVELS, RedcronGroup, setup_logging
from redcron.cli.dashboard import dashboard
from redcron.cli.dlq import dlq
from redcron.cli.doctor import doctor
from redcron.cli.notifier import notifier
from redcron.cli.tasks import inspect_cmd, task
from redcron.cli.tenants import tenants
from redcron.cli.up import up
from redcron.cli.worker import worker
from redcron.cli.workers import workers


@click.group(cls=RedcronGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--loglevel",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="warning",
    show_default=True,
    envvar="REDCRON_LOGLEVEL",
    help="Logging level for admin commands (worker and up take their own).",
)
def main(loglevel: str) -> None:
    """redcron: a Redis task queue with fenced leases."""
    setup_logging(loglevel)


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

if __name__ == "__main__":
    main(prog_name="redcron")
