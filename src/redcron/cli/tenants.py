"""``redcron tenants set|show|list|reset``: per-tenant dispatch settings
(weights, caps, rates, admission: docs/architecture.md, Fair dispatch) and
the grant of command tasks (docs/operations.md, Trust boundaries)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from redcron.cli.audit import audited, record_cli
from redcron.cli.common import (
    app_option,
    build_app,
    echo_json,
    echo_listing,
    redis_option,
    table,
)
from redcron.cli.tokens import tenant_token
from redcron.keys import PRIORITIES
from redcron.model import TenantStatus
from redcron.model.tenants import TenantSettings, format_rate
from redcron.store import TenantStore


def _store(app_path: str | None, redis_url: str | None) -> TenantStore:
    return TenantStore(build_app(app_path, redis_url).broker)


def _limit(n: int) -> str:
    return str(n) if n else "-"


def _pct(share: float) -> str:
    return f"{share * 100:.1f}%"


def render_settings(tenant: str, s: Mapping[str, Any]) -> list[str]:
    burst = f" (burst {s['effective_burst']})" if s["rate"] else ""
    fields = [
        ("weight", f"{s['weight']:g}"),
        ("max in-flight", s["max_in_flight"] or "no cap"),
        ("rate", format_rate(s["rate"]) + burst),
        ("max queued", s["max_queued"] or "unlimited"),
        ("max priority", s["max_priority"]),
        ("jitter", f"{s['jitter_s']:g}s"),
        ("commands", "granted" if s["allow_commands"] else "not granted"),
    ]
    return [f"tenant {tenant}"] + [f"  {k:<14} {v}" for k, v in fields]


@click.group()
def tenants() -> None:
    """Per-tenant weight, concurrency cap, rate limit and admission bound."""


@tenants.command("set")
@click.argument("tenant")
@click.option("--weight", type=float, help="Share of dispatch relative to others (default 1).")
@click.option("--max-in-flight", type=int, help="Most tasks running at once (0 = no cap).")
@click.option("--rate", metavar="N[/s|/m|/h]", help="Tasks started per second (0 = unlimited).")
@click.option("--burst", type=int, help="Token bucket size (0 = one second of --rate).")
@click.option("--max-queued", type=int, help="Most queued tasks before submits are rejected.")
@click.option(
    "--max-priority", type=click.Choice(PRIORITIES), help="Highest priority the tenant may use."
)
@click.option("--jitter", "jitter_s", type=float, metavar="SECONDS",
              help="Default jitter for the tenant's scheduled fires.")  # fmt: skip
@click.option(
    "--allow-commands/--no-allow-commands",
    default=None,
    help="Grant (or revoke) command and container tasks: arbitrary programs on a worker. "
    "A revoke applies to queued work too: it is dead-lettered, not run.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@app_option
@redis_option
@audited("tenant.settings")
def set_cmd(
    tenant: str,
    as_json: bool,
    app_path: str | None,
    redis_url: str | None,
    **options: Any,
) -> None:
    """Change a tenant's settings live; unnamed settings keep their values."""
    changes = {k: v for k, v in options.items() if v is not None}
    if not changes:
        raise click.UsageError(
            "nothing to set; give at least one option (see --help), "
            "or use `redcron tenants show` to see the settings"
        )
    store = _store(app_path, redis_url)
    settings = store.set(tenant, **changes)
    detail = " ".join(f"{k}={v}" for k, v in sorted(changes.items()))
    record_cli(store.broker, "tenant.settings", tenant, (), detail)
    if as_json:
        echo_json({"tenant": tenant, **settings.as_dict()})
    else:
        click.echo("\n".join(render_settings(tenant, settings.as_dict())))


@tenants.command()
@click.argument("tenant")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@app_option
@redis_option
def show(tenant: str, as_json: bool, app_path: str | None, redis_url: str | None) -> None:
    """A tenant's settings with live in-flight, queued and dispatch share."""
    row = _store(app_path, redis_url).show(tenant)
    if as_json:
        echo_json(row)
        return
    out = render_settings(tenant, row.settings.as_dict())
    out[0] += f"  (shard {row.shard})"
    out += [
        f"  {'in-flight':<14} {row.in_flight}",
        f"  {'queued':<14} {row.queued}",
        f"  {'share 1 min':<14} {_pct(row.share_last_minute)} "
        f"({row.dispatched_last_minute} dispatched)",
    ]
    click.echo("\n".join(out))


@tenants.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@app_option
@redis_option
def list_cmd(as_json: bool, app_path: str | None, redis_url: str | None) -> None:
    """Every tenant: settings, in-flight, queued, share of dispatch in the last minute."""
    rows = _store(app_path, redis_url).list()
    echo_listing(
        rows, as_json, "no tenants yet (nothing was enqueued or set)", lambda: tenants_table(rows)
    )


def tenants_table(rows: Sequence[TenantStatus]) -> str:
    headers = (
        "tenant", "weight", "cap", "rate", "max queued", "commands", "in-flight", "queued",
        "share 1m",
    )  # fmt: skip
    return table(
        headers,
        [
            (
                r.tenant,
                f"{r.settings.weight:g}",
                _limit(r.settings.max_in_flight),
                format_rate(r.settings.rate) if r.settings.rate else "-",
                _limit(r.settings.max_queued),
                "granted" if r.settings.allow_commands else "-",
                r.in_flight,
                r.queued,
                _pct(r.share_last_minute),
            )
            for r in rows
        ],
    )


@tenants.command()
@click.argument("tenant")
@app_option
@redis_option
@audited("tenant.reset")
def reset(tenant: str, app_path: str | None, redis_url: str | None) -> None:
    """Put a tenant's settings back to the defaults (dispatch state is kept)."""
    store = _store(app_path, redis_url)
    granted = store.get(tenant).allow_commands
    store.reset(tenant)
    # a reset withdraws the grant of command tasks too: say so in the record
    detail = "defaults" + (", allow_commands=False (was granted)" if granted else "")
    record_cli(store.broker, "tenant.reset", tenant, (), detail)
    defaults = TenantSettings().as_dict()
    click.echo(f"reset {tenant} to defaults")
    click.echo("\n".join(render_settings(tenant, defaults)[1:]))


tenants.add_command(tenant_token)
