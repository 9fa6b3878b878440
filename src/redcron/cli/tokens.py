"""``redcron tenants token ...`` and ``redcron workers token ...``: API tokens
for the REST API (docs/api.md, Authentication).

``create`` prints the token once, as the last word of its last line; it is
stored only as a hash, so it cannot be shown again (revoke and create anew).
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from redcron.broker import TokenStore
from redcron.cli.common import (
    app_option,
    build_app,
    echo_listing,
    iso_ms,
    redis_option,
    split_csv,
    table,
)
from redcron.model import TokenInfo


def _store(app_path: str | None, redis_url: str | None) -> TokenStore:
    return TokenStore(build_app(app_path, redis_url).broker)


def tokens_table(found: Sequence[TokenInfo]) -> str:
    rows = [
        (
            t.id,
            t.kind,
            t.tenant or "",
            ",".join(t.queues),
            ",".join(t.tenants),
            iso_ms(t.created_at),
        )
        for t in found
    ]
    return table(("id", "kind", "tenant", "queues", "tenants", "created"), rows)


def _revoke(token_id: str, kind: str, app_path: str | None, redis_url: str | None) -> None:
    store = _store(app_path, redis_url)
    if store.get(token_id).kind != kind:
        raise click.UsageError(f"token {token_id} is not a {kind} token")
    store.revoke(token_id)
    click.echo(f"revoked {kind} token {token_id}")


@click.group("token")
def tenant_token() -> None:
    """API tokens that see and change one tenant only."""


@tenant_token.command("create")
@click.argument("tenant")
@app_option
@redis_option
def tenant_create(tenant: str, app_path: str | None, redis_url: str | None) -> None:
    """Create a token for TENANT; the token is printed once, last."""
    info, token = _store(app_path, redis_url).create_tenant(tenant)
    click.echo(f"created token {info.id} for tenant {tenant} (shown once; store it now)")
    click.echo(f"token: {token}")


@tenant_token.command("list")
@click.argument("tenant", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def tenant_list(
    tenant: str | None, as_json: bool, app_path: str | None, redis_url: str | None
) -> None:
    """Tenant tokens (of TENANT if given): id, tenant, created; never the secret."""
    found = _store(app_path, redis_url).list("tenant", tenant)
    echo_listing(found, as_json, "no tenant tokens", lambda: tokens_table(found))


@tenant_token.command("revoke")
@click.argument("token_id")
@app_option
@redis_option
def tenant_revoke(token_id: str, app_path: str | None, redis_url: str | None) -> None:
    """Revoke the tenant token TOKEN_ID (the id `list` shows)."""
    _revoke(token_id, "tenant", app_path, redis_url)


@click.group("token")
def worker_token() -> None:
    """API tokens for the worker routes (/v1/worker/...), limited to queues and tenants."""


@worker_token.command("create")
@click.option("--queues", required=True, metavar="Q1,Q2", help="Queues the worker may lease from.")
@click.option("--tenants", metavar="A,B", help="Tenants it may serve (default: all).")
@app_option
@redis_option
def worker_create(
    queues: str, tenants: str | None, app_path: str | None, redis_url: str | None
) -> None:
    """Create a worker token; the token is printed once, last."""
    info, token = _store(app_path, redis_url).create_worker(split_csv(queues), split_csv(tenants))
    scope = f"queues {','.join(info.queues)}, tenants {','.join(info.tenants) or '(all)'}"
    click.echo(f"created worker token {info.id} for {scope} (shown once; store it now)")
    click.echo(f"token: {token}")


@worker_token.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def worker_list(as_json: bool, app_path: str | None, redis_url: str | None) -> None:
    """Worker tokens: id, queues, tenants, created; never the secret."""
    found = _store(app_path, redis_url).list("worker")
    echo_listing(found, as_json, "no worker tokens", lambda: tokens_table(found))


@worker_token.command("revoke")
@click.argument("token_id")
@app_option
@redis_option
def worker_revoke(token_id: str, app_path: str | None, redis_url: str | None) -> None:
    """Revoke the worker token TOKEN_ID (the id `list` shows)."""
    _revoke(token_id, "worker", app_path, redis_url)
