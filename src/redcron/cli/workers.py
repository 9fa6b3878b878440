"""``redcron workers list``: the live workers, from the worker registry."""

from __future__ import annotations

from collections.abc import Sequence

import click

from redcron.broker import WorkerRegistry
from redcron.cli.common import app_option, build_app, echo_listing, iso_ms, redis_option, table
from redcron.cli.tokens import worker_token
from redcron.model import WorkerInfo


@click.group()
def workers() -> None:
    """See the workers that are running (each publishes itself while it lives)."""


@workers.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def list_cmd(as_json: bool, app_path: str | None, redis_url: str | None) -> None:
    """List live workers: host, pid, queues, tenants, slots, running, last heartbeat.

    HTTP workers (``/v1/worker``) show too: their host is the client's address,
    with the id of the token they lease with."""
    found = WorkerRegistry(build_app(app_path, redis_url).broker).list()
    empty = "no live workers (none running, or none heartbeated within a few lease TTLs)"
    echo_listing(found, as_json, empty, lambda: workers_table(found))


def workers_table(found: Sequence[WorkerInfo]) -> str:
    rows = [
        (
            w.id,
            w.host if w.via == "redis" else f"{w.host} ({w.via}, token {w.token})",
            w.pid or "-",
            ",".join(w.queues),
            ",".join(w.tenants) or "(all)",
            f"{w.running}/{w.slots}",
            iso_ms(w.heartbeat_at),
            w.version,
            len(w.tasks),
        )
        for w in found
    ]
    headers = ("worker", "host", "pid", "queues", "tenants", "running", "heartbeat", "version")
    return table((*headers, "tasks"), rows)


workers.add_command(worker_token)
