"""``redcron channels add|list|remove|test|log``: where notifications go
(docs/operations.md, Notifications).

``add`` prints a webhook's signing secret once, as the last word of its last
line; it is stored sealed and never shown again (remove and add anew).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import click

from redcron.cli.audit import audited, record_cli
from redcron.cli.common import (
    app_option,
    build_app,
    echo_json,
    echo_listing,
    fail,
    iso_ms,
    redis_option,
    split_csv,
    table,
)
from redcron.model.channels import EVENT_TYPES, KINDS, ChannelInfo, Delivery
from redcron.store import ChannelStore


def _store(app_path: str | None, redis_url: str | None) -> ChannelStore:
    return ChannelStore(build_app(app_path, redis_url).broker)


def channels_table(found: Sequence[ChannelInfo]) -> str:
    rows = [
        (
            c.id,
            c.kind,
            c.name,
            c.tenant or "(admin)",
            c.url,
            ",".join(c.events),
            iso_ms(c.created_at),
        )
        for c in found
    ]
    return table(("id", "kind", "name", "tenant", "url", "events", "created"), rows)


def deliveries_table(found: Sequence[Delivery]) -> str:
    rows = [
        (iso_ms(d.at), d.delivery, d.type, d.outcome, d.status or "", d.attempt, d.error)
        for d in found
    ]
    return table(("at", "delivery", "type", "outcome", "status", "attempt", "error"), rows)


@click.group()
def channels() -> None:
    """Notification channels: webhooks (signed JSON) and Slack incoming webhooks."""


@channels.command("add")
@click.option(
    "--tenant",
    default=None,
    help="The tenant whose events it takes [default: the admin's: every tenant's].",
)
@click.option("--kind", type=click.Choice(KINDS), default="webhook", show_default=True)
@click.option(
    "--url",
    required=True,
    help="The receiver (http/https, a host the admin allowed: REDCRON_NOTIFY_ALLOW_HOSTS).",
)
@click.option(
    "--events",
    metavar="T1,T2",
    default=None,
    help=f"Event types [default: all: {','.join(EVENT_TYPES)}].",
)
@click.option("--name", default=None, help="A label for listings.")
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=None,
    help="Seconds a request may take [default: 5].",
)
@app_option
@redis_option
@audited("channel.add")
def add(
    tenant: str | None,
    kind: str,
    url: str,
    events: str | None,
    name: str | None,
    timeout_s: float | None,
    app_path: str | None,
    redis_url: str | None,
) -> None:
    """Add a channel; a webhook's signing secret is printed once, last."""
    store = _store(app_path, redis_url)
    info, secret = store.add(tenant, kind, url, split_csv(events) or None, name, timeout_s)
    record_cli(store.broker, "channel.add", info.tenant, [info.id], f"kind={info.kind}")
    click.echo(f"added {info.kind} channel {info.id} for {info.tenant or 'every tenant (admin)'}")
    if secret is not None:
        click.echo("signing secret (shown once; store it now):")
        click.echo(f"secret: {secret}")


@channels.command("list")
@click.option("--tenant", default=None, help="Only this tenant's channels.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def list_cmd(
    tenant: str | None, as_json: bool, app_path: str | None, redis_url: str | None
) -> None:
    """Channels: id, kind, tenant, URL (without path or query), events; never the secret."""
    found = _store(app_path, redis_url).list(tenant)
    echo_listing(found, as_json, "no channels", lambda: channels_table(found))


@channels.command("remove")
@click.argument("channel_id")
@app_option
@redis_option
@audited("channel.remove")
def remove(channel_id: str, app_path: str | None, redis_url: str | None) -> None:
    """Remove channel CHANNEL_ID with what it still had to send."""
    store = _store(app_path, redis_url)
    info = store.remove(channel_id)
    record_cli(store.broker, "channel.remove", info.tenant, [info.id])
    click.echo(f"removed {info.kind} channel {info.id}")


@channels.command("test")
@click.argument("channel_id")
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0.0,
    help="Seconds to wait for the notifier's outcome [default: do not wait].",
)
@app_option
@redis_option
@audited("channel.test")
def test(channel_id: str, wait: float, app_path: str | None, redis_url: str | None) -> None:
    """Queue a test message on CHANNEL_ID for the notifier to send."""
    store = _store(app_path, redis_url)
    delivery = store.send_test(channel_id)
    record_cli(store.broker, "channel.test", store.get(channel_id).tenant, [channel_id])
    click.echo(f"queued test delivery {delivery}")
    deadline = time.monotonic() + wait
    while wait > 0:
        for d in store.deliveries(channel_id, 20):
            if d.delivery == delivery:
                click.echo(f"{d.outcome} (status {d.status or '-'}) {d.error}".rstrip())
                if d.outcome != "delivered":
                    fail("the test message was not delivered (the notifier retries it)")
                return
        if time.monotonic() > deadline:
            fail("no outcome yet: is `redcron notifier` running?")
        time.sleep(0.2)


@channels.command("log")
@click.argument("channel_id")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def log_cmd(
    channel_id: str, limit: int, as_json: bool, app_path: str | None, redis_url: str | None
) -> None:
    """The delivery log of CHANNEL_ID, newest first (bounded)."""
    store = _store(app_path, redis_url)
    store.get(channel_id)
    found = store.deliveries(channel_id, limit)
    if as_json:
        echo_json(found)
        return
    echo_listing(found, False, "no deliveries yet", lambda: deliveries_table(found))
