"""The ``redcron`` click group: logging setup and the command families.

Each family's module is imported when its command runs, not before
(:class:`~redcron.cli.group.LazyGroup`): ``redcron --help`` and ``redcron
--version`` load neither the App nor Redis, Flask or the benchmarks.
"""

from __future__ import annotations

import click

from redcron.cli.group import LOG_LEVELS, Lazy, LazyGroup
from redcron.config import find_redis_url, redis_url_notices

#: name -> where the command is, and the summary ``redcron --help`` lists
COMMANDS = {
    "admin": Lazy(
        "redcron.cli.admin:admin", "The deployment admin's extra API and dashboard tokens."
    ),
    "audit": Lazy(
        "redcron.cli.audit:audit",
        "Who did what: state-changing actions through the API, the dashboard and the CLI.",
    ),
    "beat": Lazy(
        "redcron.cli.beat:beat", "Run a beat until SIGTERM/SIGINT (then release its shards)."
    ),
    "bench": Lazy(
        "redcron.cli.bench:bench",
        "Benchmarks: throughput and latency against a real Redis; schedule (pure).",
    ),
    "channels": Lazy(
        "redcron.cli.channels:channels",
        "Notification channels: webhooks (signed JSON) and Slack incoming webhooks.",
    ),
    "chaos": Lazy(
        "redcron.cli.chaos:chaos",
        "Run one reproducible chaos scenario and check the invariants after it.",
    ),
    "cluster": Lazy(
        "redcron.cli.cluster:cluster", "Redis Cluster operations on the deployment's shards."
    ),
    "dashboard": Lazy(
        "redcron.cli.dashboard:dashboard",
        "Serve the dashboard (/), the REST API (/v1) and /metrics with waitress.",
    ),
    "dlq": Lazy(
        "redcron.cli.dlq:dlq",
        "List, replay and discard dead tasks (retries exhausted or permanent failures).",
    ),
    "doctor": Lazy(
        "redcron.cli.doctor:doctor",
        "Recount the indexes from the instances, runs and jobs; report each finding.",
    ),
    "inspect": Lazy(
        "redcron.cli.tasks:inspect_cmd",
        "Ready / in-flight / delayed / DLQ counts per tenant and per (tenant, queue), queues no "
        "live worker serves, ready work of tasks no live worker registered (unrunnable: the "
        "workers leave it ready), and lifetime counters.",
    ),
    "jobs": Lazy(
        "redcron.cli.jobs:jobs", "Declare, list, pause, trigger and delete scheduled jobs."
    ),
    "notifier": Lazy(
        "redcron.cli.notifier:notifier",
        "Run the notifier until SIGTERM/SIGINT: events -> channels, signed, retried.",
    ),
    "runs": Lazy("redcron.cli.runs:runs", "List, show, watch, cancel and retry runs of jobs."),
    "task": Lazy("redcron.cli.tasks:task", "List task instances; look at or cancel one."),
    "tenants": Lazy(
        "redcron.cli.tenants:tenants",
        "Per-tenant weight, concurrency cap, rate limit and admission bound.",
    ),
    "up": Lazy(
        "redcron.cli.up:up",
        "Run Redis (embedded unless --redis), beat, worker, notifier and dashboard, until Ctrl-C.",
    ),
    "worker": Lazy(
        "redcron.cli.worker:worker",
        "Run a worker until SIGTERM/SIGINT (then drain gracefully); with --procs N, N of them "
        "under one supervisor.",
    ),
    "workers": Lazy(
        "redcron.cli.workers:workers",
        "See the workers that are running (each publishes itself while it lives).",
    ),
}


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the version, and the Redis a command run here would use and why."""
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        mine = version("redcron")
    except PackageNotFoundError:  # run from a source tree that was never installed
        mine = "unknown (not installed)"
    click.echo(f"redcron {mine}")
    click.echo(f"redis: {find_redis_url().describe()}")
    ctx.exit()


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
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
    # here, not at the top: the command about to run loads it anyway, --help does not
    from redcron.cli.common import say_on_stderr, setup_logging

    setup_logging(loglevel)
    # which Redis a command found, when nobody named one: one line on stderr
    ctx.with_resource(redis_url_notices(say_on_stderr))


if __name__ == "__main__":
    main(prog_name="redcron")
