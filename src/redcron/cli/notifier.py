"""``redcron notifier``: send notifications (docs/architecture.md, "The notifier")."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click

from redcron.cli.common import app_option, build_app, logging_options, redis_option, setup_logging
from redcron.notify import Notifier


@click.command()
@app_option
@redis_option
@click.option(
    "--dashboard-url",
    default=None,
    metavar="URL",
    help="The dashboard's base URL for the links messages carry [env: REDCRON_DASHBOARD_URL].",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1, max=256),
    default=8,
    show_default=True,
    help="Channels sent to at once (each channel gets at most one).",
)
@click.option(
    "--tenant-threads",
    type=click.IntRange(min=1, max=256),
    default=None,
    help="Threads one tenant's channels (or the admin's) may hold at once, so one "
    "tenant's slow receivers leave the rest to others [default: a quarter of --threads].",
)
@click.option(
    "--name", default=None, help="Consumer name (unique per process) [default: host:pid:rand]."
)
@logging_options
def notifier(
    app_path: str | None,
    redis_url: str | None,
    dashboard_url: str | None,
    threads: int,
    tenant_threads: int | None,
    name: str | None,
    loglevel: str,
    log_format: str,
) -> None:
    """Run the notifier until SIGTERM/SIGINT: events -> channels, signed, retried.

    Run several for failover: they share the events through a consumer group.
    Hosts a channel may name: REDCRON_NOTIFY_ALLOW_HOSTS.
    """
    setup_logging(loglevel, log_format)
    app = build_app(app_path, redis_url)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    Notifier(
        app, name=name, base_url=dashboard_url, threads=threads, tenant_threads=tenant_threads
    ).run(stop)
