"""``redcron dlq list|replay|discard``: the dead-letter queue."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import click

from redcron.cli.audit import audited, record_cli
from redcron.cli.common import (
    app_option,
    build_app,
    echo_listing,
    iso_ms,
    one_line,
    redis_option,
    table,
)
from redcron.engine import Broker, DlqStore
from redcron.errors import RedcronError
from redcron.model import DlqEntry

#: entries read per tenant per pass (``dlq_list`` pages by count)
PAGE = 500


@click.group()
def dlq() -> None:
    """List, replay and discard dead tasks (retries exhausted or permanent failures)."""


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
    entries = build_app(app_path, redis_url).broker.dlq.list(tenant, count=limit)
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
@audited("dlq.replay")
def replay(
    task_ids: tuple[str, ...],
    replay_all: bool,
    tenant: str | None,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """Make dead tasks ready again, with a fresh retry budget."""
    _each(DlqStore.replay, "dlq.replay", task_ids, replay_all, tenant, app_path, redis_url)


@dlq.command()
@click.argument("task_ids", nargs=-1)
@click.option("--all", "discard_all", is_flag=True, help="Discard every dead task (of --tenant).")
@click.option("--tenant", default=None, help="With --all: only this tenant.")
@app_option
@redis_option
@audited("dlq.discard")
def discard(
    task_ids: tuple[str, ...],
    discard_all: bool,
    tenant: str | None,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """Take dead tasks out of the DLQ for good: they end cancelled, with the error
    "discarded from the DLQ" (a run's task counts as cancelled in its run)."""
    _each(DlqStore.discard, "dlq.discard", task_ids, discard_all, tenant, app_path, redis_url)


#: a broker DLQ operation over ids: how many it acted on
DlqAction = Callable[[DlqStore, Sequence[str]], int]


def _each(
    action: DlqAction,
    name: str,
    task_ids: tuple[str, ...],
    every: bool,
    tenant: str | None,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    if bool(task_ids) == every:
        raise click.UsageError("give task ids, or --all (not both)")
    if tenant and not every:
        raise click.UsageError("--tenant only applies with --all")
    broker = build_app(app_path, redis_url).broker
    done = "replayed" if name == "dlq.replay" else "discarded"
    if every:
        n, by_tenant = act_on_every(broker, tenant, action)
    else:
        by_tenant = tenants_of(broker, task_ids)
        n = action(broker.dlq, list(task_ids))
    # one record per tenant, in its own stream, as the DLQ page's bulk click is
    for owner, ids in by_tenant.items():
        record_cli(broker, name, owner, ids, f"{done} {n} of {sum(map(len, by_tenant.values()))}")
    click.echo(f"{done} {n} task{'' if n == 1 else 's'}")
    if not every and n < len(task_ids):
        click.echo(
            f"{len(task_ids) - n} of the given ids were not in the DLQ "
            "(not dead, or unknown): left alone",
            err=True,
        )


def tenants_of(broker: Broker, task_ids: Sequence[str]) -> dict[str | None, list[str]]:
    """The given ids by their task's tenant (None: no such task) for the record."""
    out: dict[str | None, list[str]] = defaultdict(list)
    for task_id in task_ids:
        try:
            out[broker.inspection.task_info(task_id).tenant].append(task_id)
        except (RedcronError, ValueError):  # an id that names no task: recorded as given
            out[None].append(task_id)
    return dict(out)


def act_on_every(
    broker: Broker, tenant: str | None, action: DlqAction
) -> tuple[int, dict[str | None, list[str]]]:
    """Apply ``action`` page after page until the DLQ (of ``tenant``) is empty:
    how many it acted on, and the ids it was given by tenant."""
    total = 0
    given: dict[str | None, list[str]] = defaultdict(list)
    while True:
        entries = [e for e in broker.dlq.list(tenant, count=PAGE) if e.task_id]
        if not entries:
            return total, dict(given)
        for e in entries:
            given[e.tenant].append(e.task_id)
        n = action(broker.dlq, [e.task_id for e in entries])
        total += n
        if n == 0:  # entries that are not dead any more: stop rather than spin
            return total, dict(given)
