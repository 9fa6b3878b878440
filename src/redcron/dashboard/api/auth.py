"""Who a request is (``flask.g.identity``) and what it may see.

:func:`redcron.dashboard.api.authenticate` turns the bearer token into an
:class:`Identity`; routes fetch jobs, runs and tasks through :func:`job`,
:func:`run` and :func:`task`, which answer 404 for another tenant's record
exactly as for a missing one, so a tenant token learns nothing about other
tenants.  Tokens are never logged or echoed.

An admin or tenant identity has a role: ``operator`` (what its scope allows) or
``viewer`` (reads only: a request that would change state is a 403 before any
route runs, :func:`refuse_viewer`).  The helpers note the tenant a request acts
on for the action record (:mod:`redcron.dashboard.api.actions`).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

import flask

from redcron.dashboard.api.common import ApiError, bad, error_response, redcron_app
from redcron.errors import NotFound
from redcron.model import JobRecord, RunRecord, TaskRecord, TokenInfo
from redcron.store import OPERATOR, VIEWER, TokenStore, digest

#: Flask config key: SHA-256 (hex) of the admin token, or None for no admin token
ADMIN_DIGEST = "REDCRON_ADMIN_TOKEN_SHA256"
#: the routes the worker protocol serves; only worker (and admin) tokens reach them
WORKER_PREFIX = "/v1/worker/"
#: the one route anyone may read: the API's description
PUBLIC = frozenset({("GET", "/v1/openapi.json"), ("HEAD", "/v1/openapi.json")})
#: the methods a viewer may use: they change nothing
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: ``flask.g`` key: the tenant a request acted on (for the action record)
NOTED_TENANT = "redcron_action_tenant"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who sent the request.

    ``kind``: ``admin`` (everything), ``tenant`` (only ``tenant``'s jobs,
    runs, tasks and DLQ) or ``worker`` (only the worker routes, for
    ``queues`` and ``tenants``; None = any).  ``token_id`` is None for the
    configured admin token, set for a stored one (an extra admin token, a tenant
    or a worker token).  ``role``: ``operator`` or ``viewer`` (reads only).
    """

    kind: str
    tenant: str | None = None
    queues: tuple[str, ...] | None = None
    tenants: tuple[str, ...] | None = None
    token_id: str | None = None
    role: str = OPERATOR

    @property
    def may_change(self) -> bool:
        """Whether this identity may change state at all (an operator)."""
        return self.role == OPERATOR


ADMIN = Identity("admin")


def identify(token: str) -> Identity | None:
    """The identity behind a presented token, or None if it is no live token."""
    admin = flask.current_app.config.get(ADMIN_DIGEST)
    if admin and hmac.compare_digest(admin, digest(token)):
        return ADMIN
    info = TokenStore(redcron_app().broker).verify(token)
    if info is None:
        return None
    return from_token(info)


def from_token(info: TokenInfo) -> Identity | None:
    """The identity a stored token's record stands for (None: it stands for none)."""
    if info.kind == "admin":
        return Identity("admin", token_id=info.id, role=info.role)
    if info.kind == "tenant":
        if not info.tenant:
            # a tenant token whose tenant field is gone (edited by hand) would have
            # scope() None: every tenant's data.  It is no live token.
            return None
        return Identity("tenant", tenant=info.tenant, token_id=info.id, role=info.role)
    if info.kind == "worker":
        return Identity(
            "worker", queues=info.queues, tenants=info.tenants or None, token_id=info.id
        )
    return None


def error(status: int, code: str, message: str) -> flask.Response:
    response = error_response(status, code, message)
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="redcron"'
    return response


def bearer(header: str) -> str | None:
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def current() -> Identity:
    who: Identity = flask.g.identity
    return who


def scope() -> str | None:
    """The only tenant the request may touch, or None (admin: any)."""
    return current().tenant if current().kind == "tenant" else None


def may_see(tenant: str | None) -> bool:
    only = scope()
    return only is None or tenant == only


def note_tenant(tenant: str | None) -> None:
    """The tenant this request acts on, for its action record (the first noted wins)."""
    if tenant:
        flask.g.setdefault(NOTED_TENANT, tenant)


def refuse_viewer() -> str | None:
    """Why this request is refused (a viewer asking to change state), or None."""
    who = current()
    if who.may_change or flask.request.method in READ_METHODS:
        return None
    return (
        f"this {who.kind} token is a {VIEWER}: it may only read; changing state "
        f"needs an {OPERATOR} token"
    )


def tenant_path(tenant: str) -> None:
    """A ``/tenants/{t}`` route: another tenant is a 404."""
    if not may_see(tenant):
        raise NotFound(f"no tenant {tenant!r}")
    note_tenant(tenant)


def tenant_field(data: dict[str, object], field: str = "tenant") -> None:
    """A body's tenant: a tenant token's own tenant when absent, a 400 when another."""
    only = scope()
    if only is None:
        return
    given = data.get(field)
    if given is None:
        data[field] = only
    elif given != only:
        bad(field, f"this token may only use tenant {only!r}")


def admin_only(what: str) -> None:
    if current().kind != "admin" or not current().may_change:
        raise ApiError(403, "forbidden", f"{what} needs an admin token with the operator role")


def admin_reads(what: str) -> None:
    """A read only an admin token (operator or viewer) may make: tenant tokens get 403."""
    if current().kind != "admin":
        raise ApiError(403, "forbidden", f"{what} needs an admin token")


def job(job_id: str) -> JobRecord:
    record = redcron_app().jobs.get_by_id(job_id)
    if not may_see(record.tenant):
        raise NotFound(f"no job {job_id}")
    note_tenant(record.tenant)
    return record


def run(run_id: str) -> RunRecord:
    record = redcron_app().jobs.run(run_id)
    if not may_see(record.tenant):
        raise NotFound(f"no run {run_id} (never existed, or expired after its retention)")
    note_tenant(record.tenant)
    return record


def task(task_id: str) -> TaskRecord:
    record = redcron_app().broker.inspection.task_info(task_id)
    if not may_see(record.tenant):
        raise NotFound(f"no task {task_id} (never existed, or expired after its retention)")
    note_tenant(record.tenant)
    return record
