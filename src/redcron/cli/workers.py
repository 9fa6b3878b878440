"""``redcron workers list``: the live workers, from the worker registry."""

from __future__ import annotations

from collections.abc import Sequence

import click

from redcron.cli.common import app_option, build_app, echo_listing, iso_ms, redis_option, table
from redcron.cli.tokens import worker_token
from redcron.engine import WorkerRegistry
from redcron.model import WorkerInfo


@click.group()
def workers() -> None:
    """See the workers that are running (each publishes itself while it lives)."""


@workers.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def list_cmd(as_json: bool, app_path: str | None, redis_url: str | None) -> None:
    """List live workers: host, pid, queues, tenants, slots, running, last heartbeat;
    the processes of one `redcron worker --procs N` together, under their supervisor.

    HTTP workers (``/v1/worker``) show too: their host is the client's address,
    with the id of the token they lease with."""
    found = WorkerRegistry(build_app(app_path, redis_url).broker).list()
    empty = "no live workers (none running, or none heartbeated within a few lease TTLs)"
    echo_listing(found, as_json, empty, lambda: workers_table(found))


def workers_table(found: Sequence[WorkerInfo]) -> str:
    """One row per worker; the processes of a ``redcron worker --procs N``
    supervisor under a row of its own (their sums), indented."""
    rows: list[tuple[object, ...]] = []
    for supervisor, members in grouped(found):
        if supervisor:
            first = members[0]
            beats = [w.heartbeat_at for w in members if w.heartbeat_at is not None]
            rows.append(
                (
                    f"{supervisor} ({len(members)} procs)",
                    first.host,
                    "-",
                    ",".join(first.queues),
                    ",".join(first.tenants) or "(all)",
                    f"{sum(w.running for w in members)}/{sum(w.slots for w in members)}",
                    iso_ms(max(beats)) if beats else "",
                    first.version,
                    len(first.tasks),
                )
            )
        indent = "  " if supervisor else ""
        rows += [_row(w, indent) for w in members]
    headers = ("worker", "host", "pid", "queues", "tenants", "running", "heartbeat", "version")
    return table((*headers, "tasks"), rows)


def grouped(found: Sequence[WorkerInfo]) -> list[tuple[str, list[WorkerInfo]]]:
    """``found`` as (supervisor id, its processes by id), in order of the group's
    first id; a worker on its own is a group of one with supervisor ""."""
    groups: dict[tuple[str, str], list[WorkerInfo]] = {}
    for w in sorted(found, key=lambda w: w.id):
        groups.setdefault((w.supervisor, w.supervisor or w.id), []).append(w)
    return [(sup, members) for (sup, _key), members in groups.items()]


def _row(w: WorkerInfo, indent: str) -> tuple[object, ...]:
    return (
        f"{indent}{w.id}",
        w.host if w.via == "redis" else f"{w.host} ({w.via}, token {w.token})",
        w.pid or "-",
        ",".join(w.queues),
        ",".join(w.tenants) or "(all)",
        f"{w.running}/{w.slots}",
        iso_ms(w.heartbeat_at),
        w.version,
        len(w.tasks),
    )


workers.add_command(worker_token)
