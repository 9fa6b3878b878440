"""``redcron tenants token ...``, ``redcron admin token ...`` and ``redcron
workers token ...``: API tokens for the REST API and the dashboard (docs/api.md,
Authentication).

``create`` prints the token once, as the last word of its last line; it is
stored only as a hash, so it cannot be shown again (revoke and create anew).
Admin and tenant tokens have a ``--role``: ``operator`` or ``viewer`` (reads
only).  Creating and revoking a token is recorded in the action record
(``redcron audit list``) with the token's id, never its secret.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click

from redcron.cli.audit import audited, record_cli
from redcron.cli.common import (
    F,
    app_option,
    build_app,
    echo_listing,
    iso_ms,
    redis_option,
    split_csv,
    table,
)
from redcron.model import TokenInfo
from redcron.store import OPERATOR, ROLES, VIEWER, TokenStore


def _store(app_path: str | None, redis_url: str | None) -> TokenStore:
    return TokenStore(build_app(app_path, redis_url).broker)


def _created(store: TokenStore, info: TokenInfo) -> None:
    detail = f"kind={info.kind}" + (f" role={info.role}" if info.role else "")
    record_cli(store.broker, "token.create", info.tenant, [info.id], detail)


def role_option(default: str) -> Callable[[F], F]:
    return click.option(
        "--role",
        type=click.Choice(ROLES),
        default=default,
        show_default=True,
        help="operator: may change state within the token's scope; viewer: reads only.",
    )


def tokens_table(found: Sequence[TokenInfo]) -> str:
    rows = [
        (
            t.id,
            t.kind,
            t.role,
            t.tenant or "",
            ",".join(t.queues),
            ",".join(t.tenants),
            iso_ms(t.created_at),
        )
        for t in found
    ]
    return table(("id", "kind", "role", "tenant", "queues", "tenants", "created"), rows)


def _revoke(token_id: str, kind: str, app_path: str | None, redis_url: str | None) -> None:
    store = _store(app_path, redis_url)
    if store.get(token_id).kind != kind:
        raise click.UsageError(f"token {token_id} is not a {kind} token")
    info = store.revoke(token_id)
    record_cli(store.broker, "token.revoke", info.tenant, [token_id], f"kind={kind}")
    click.echo(f"revoked {kind} token {token_id}")


@click.group("token")
def tenant_token() -> None:
    """API tokens that see and change one tenant only."""


@tenant_token.command("create")
@click.argument("tenant")
@role_option(OPERATOR)
@app_option
@redis_option
@audited("token.create")
def tenant_create(tenant: str, role: str, app_path: str | None, redis_url: str | None) -> None:
    """Create a token for TENANT; the token is printed once, last."""
    store = _store(app_path, redis_url)
    info, token = store.create_tenant(tenant, role)
    _created(store, info)
    click.echo(f"created {role} token {info.id} for tenant {tenant} (shown once; store it now)")
    click.echo(f"token: {token}")


@tenant_token.command("list")
@click.argument("tenant", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def tenant_list(
    tenant: str | None, as_json: bool, app_path: str | None, redis_url: str | None
) -> None:
    """Tenant tokens (of TENANT if given): id, role, tenant, created; never the secret."""
    found = _store(app_path, redis_url).list("tenant", tenant)
    echo_listing(found, as_json, "no tenant tokens", lambda: tokens_table(found))


@tenant_token.command("revoke")
@click.argument("token_id")
@app_option
@redis_option
@audited("token.revoke")
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
@audited("token.create")
def worker_create(
    queues: str, tenants: str | None, app_path: str | None, redis_url: str | None
) -> None:
    """Create a worker token; the token is printed once, last."""
    store = _store(app_path, redis_url)
    info, token = store.create_worker(split_csv(queues), split_csv(tenants))
    _created(store, info)
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
@audited("token.revoke")
def worker_revoke(token_id: str, app_path: str | None, redis_url: str | None) -> None:
    """Revoke the worker token TOKEN_ID (the id `list` shows)."""
    _revoke(token_id, "worker", app_path, redis_url)


@click.group("token")
def admin_token() -> None:
    """Extra admin tokens: every tenant, as a viewer (reads only) or an operator."""


@admin_token.command("create")
@role_option(VIEWER)
@app_option
@redis_option
@audited("token.create")
def admin_create(role: str, app_path: str | None, redis_url: str | None) -> None:
    """Create an extra admin token (a viewer unless --role operator); printed once, last."""
    store = _store(app_path, redis_url)
    info, token = store.create_admin(role)
    _created(store, info)
    click.echo(f"created {role} admin token {info.id} (shown once; store it now)")
    click.echo(f"token: {token}")


@admin_token.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def admin_list(as_json: bool, app_path: str | None, redis_url: str | None) -> None:
    """Extra admin tokens: id, role, created; never the secret."""
    found = _store(app_path, redis_url).list("admin")
    echo_listing(found, as_json, "no admin tokens", lambda: tokens_table(found))


@admin_token.command("revoke")
@click.argument("token_id")
@app_option
@redis_option
@audited("token.revoke")
def admin_revoke(token_id: str, app_path: str | None, redis_url: str | None) -> None:
    """Revoke the extra admin token TOKEN_ID (the id `list` shows)."""
    _revoke(token_id, "admin", app_path, redis_url)
