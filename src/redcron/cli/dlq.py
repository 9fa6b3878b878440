"""``redcron dlq list|replay``: the dead-letter queue."""

from __future__ import annotations

from collections.abc import Sequence

import click

from redcron.broker import Broker
from redcron.cli.common import (
    app_option,
    build_app,
    echo_listing,
    iso_ms,
    one_line,
    redis_option,
    table,
)
from redcron.model import DlqEntry

#: entries read per tenant per pass (``dlq_list`` pages by count)
PAGE = 500


@click.group()
def dlq() -> None:
    """List and replay dead tasks (retries exhausted or permanent failures)."""


@dlq.command("list")
@click.option("--tenant", default=None, help="Only this tenant.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Entries per tenant.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@app_option
@redis_option
def list_cmd(
    tenant: str | None, limit: int, as_json: bool, app_path: str | None, redis_url: str | None
) -> None:
    """List dead tasks, oldest first."""
    entries = build_app(app_path, redis_url).broker.dlq_list(tenant, count=limit)
    empty = "the DLQ is empty" + (f" for tenant {tenant}" if tenant else "")
    echo_listing(entries, as_json, empty, lambda: dlq_table(entries))


def dlq_table(entries: Sequence[DlqEntry]) -> str:
    rows = [
        (
            e.task_id,
            e.tenant,
            e.name,
            e.queue,
            e.attempts,
            e.outcome,
            iso_ms(e.dead_at),
            one_line(e.error or ""),
        )
        for e in entries
    ]
    return table(("id", "tenant", "task", "queue", "attempts", "outcome", "at", "error"), rows)


@dlq.command()
@click.argument("task_ids", nargs=-1)
@click.option("--all", "replay_all", is_flag=True, help="Replay every dead task (of --tenant).")
@click.option("--tenant", default=None, help="With --all: only this tenant.")
@app_option
@redis_option
def replay(
    task_ids: tuple[str, ...],
    replay_all: bool,
    tenant: str | None,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """Make dead tasks ready again, with a fresh retry budget."""
    if bool(task_ids) == replay_all:
        raise click.UsageError("give task ids, or --all (not both)")
    if tenant and not replay_all:
        raise click.UsageError("--tenant only applies with --all")
    broker = build_app(app_path, redis_url).broker
    n = replay_every(broker, tenant) if replay_all else broker.dlq_replay(list(task_ids))
    click.echo(f"replayed {n} task{'' if n == 1 else 's'}")
    if not replay_all and n < len(task_ids):
        click.echo(f"{len(task_ids) - n} of the given ids were not dead (left alone)", err=True)


def replay_every(broker: Broker, tenant: str | None) -> int:
    """Replay page after page until the DLQ (of ``tenant``) is empty."""
    total = 0
    while True:
        ids = [e.task_id for e in broker.dlq_list(tenant, count=PAGE) if e.task_id]
        if not ids:
            return total
        n = broker.dlq_replay(ids)
        total += n
        if n == 0:  # entries that are not dead any more: stop rather than spin
            return total
