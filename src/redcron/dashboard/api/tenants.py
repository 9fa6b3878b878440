"""``/v1/tenants``: every tenant a page at a time (admin tokens); ``/v1/tenants/{t}``:
settings with live figures, changing settings, the DLQ (list, replay, discard)."""

from __future__ import annotations

import flask

from redcron.dashboard.api import actions, auth
from redcron.dashboard.api.common import (
    ApiError,
    body,
    only,
    redcron_app,
    reply,
)
from redcron.dashboard.api.dlq import CURSOR as DLQ_CURSOR
from redcron.dashboard.api.dlq import LINKS as DLQ_LINKS
from redcron.dashboard.api.dlq import PAGE as DLQ_PAGE
from redcron.dashboard.api.dlq import dlq_cursor
from redcron.dashboard.api.operation import Operation, Routes, link, paged
from redcron.dashboard.api.params import DLQ_LIMIT, EMPTY_BODY, LIMIT, NAME_PART, CursorParam
from redcron.dashboard.api.record_schema import ref
from redcron.dashboard.api.tasks import TASK_LINKS
from redcron.engine import DlqVerb
from redcron.errors import NotFound
from redcron.model import validation
from redcron.model.tenants import SETTINGS_FIELDS
from redcron.store import page_tenants

bp = Routes("tenants", __name__)

#: the query of GET /v1/tenants (and LIMIT): a page's cursor is its last tenant
CURSOR = CursorParam("tenants", (NAME_PART,), "tenant")

_TENANT = {"tenant": "$response.body#/tenant"}
#: what a client can do next with the tenant a reply holds
TENANT_LINKS = {
    "GetTenant": link("get_tenant", _TENANT),
    "SetTenant": link("set_tenant", _TENANT),
    "TenantDlq": link("list_tenant_dlq", _TENANT),
}


@bp.get(
    "/tenants",
    doc=Operation(
        "list_tenants",
        "Tenants by name with their settings and live figures, a page at a time (admin "
        "tokens; a tenant token: 403)",
        paged("tenants", ref("TenantStatus")),
        query=(LIMIT, CURSOR),
        links={"GetTenant": link("get_tenant", {"tenant": "$response.body#/tenants/0/tenant"})},
    ),
)
def list_tenants() -> flask.Response:
    """Tenants by name with their settings and live figures, a page at a time
    (as ``redcron tenants list``); an admin token's read (tenant tokens: 403)."""
    auth.admin_reads("listing tenants")
    limit = LIMIT.read()
    key = CURSOR.read()
    app = redcron_app()
    names = page_tenants(app.broker, key[0] if key else None, limit)
    nxt = names.next_cursor
    return reply(
        {
            "tenants": app.tenants.rows(names.items),
            "next_cursor": CURSOR.encode(nxt) if nxt else None,
        }
    )


@bp.get(
    "/tenants/<tenant>",
    doc=Operation(
        "get_tenant",
        "A tenant's settings and live figures",
        ref("TenantStatus"),
        errors=("400", "404"),
        links=TENANT_LINKS,
    ),
)
def get_tenant(tenant: str) -> flask.Response:
    auth.tenant_path(tenant)
    return reply(redcron_app().tenants.show(tenant))


@bp.put(
    "/tenants/<tenant>",
    doc=Operation(
        "set_tenant",
        "Change some settings (admin only)",
        ref("TenantStatus"),
        errors=("404",),
        body=ref("TenantSettings"),
        links=TENANT_LINKS,
    ),
)
def set_tenant(tenant: str) -> flask.Response:
    """Change the given settings (the others keep their values): admin only,
    since a tenant raising its own weight or caps would defeat them."""
    auth.tenant_path(tenant)
    auth.admin_only("changing tenant settings")
    data = body()
    only(data, frozenset(SETTINGS_FIELDS))
    actions.note(detail=" ".join(f"{k}={v}" for k, v in sorted(data.items())))
    tenants = redcron_app().tenants
    tenants.set(tenant, **data)
    return reply(tenants.show(tenant))


@bp.get(
    "/tenants/<tenant>/dlq",
    doc=Operation(
        "list_tenant_dlq",
        "Dead tasks of a tenant, oldest first, a page at a time",
        DLQ_PAGE,
        errors=("404",),
        query=(DLQ_LIMIT, DLQ_CURSOR),
        links=DLQ_LINKS,
    ),
)
def list_dlq(tenant: str) -> flask.Response:
    validation.name("tenant", tenant)
    auth.tenant_path(tenant)
    limit = DLQ_LIMIT.read()
    found = redcron_app().broker.dlq.page(tenant, dlq_cursor(), limit)
    nxt = found.next_cursor
    return reply(
        {"entries": found.entries, "next_cursor": DLQ_CURSOR.encode(*nxt) if nxt else None}
    )


@bp.post(
    "/tenants/<tenant>/dlq/<path:task_id>/replay",  # run tasks: <run>/<task>
    doc=Operation(
        "replay_dead",
        "Replay one dead task",
        ref("Task"),
        errors=("404", "409"),
        body=EMPTY_BODY,
        body_required=False,
        links=TASK_LINKS,
    ),
)
def replay_dlq(tenant: str, task_id: str) -> flask.Response:
    """Put one dead task back on its queue with a fresh retry budget."""
    return _dlq_action(tenant, task_id, "replay")


@bp.post(
    "/tenants/<tenant>/dlq/<path:task_id>/discard",
    doc=Operation(
        "discard_dead",
        "Discard one dead task for good (it ends cancelled)",
        ref("Task"),
        errors=("404", "409"),
        body=EMPTY_BODY,
        body_required=False,
    ),
)
def discard_dlq(tenant: str, task_id: str) -> flask.Response:
    """Take one dead task out of the DLQ for good: it ends ``cancelled`` with the
    error "discarded from the DLQ"."""
    return _dlq_action(tenant, task_id, "discard")


def _dlq_action(tenant: str, task_id: str, what: DlqVerb) -> flask.Response:
    """One dead task of ``tenant``: 404 when it is another tenant's (or unknown),
    409 when it is not in the DLQ; otherwise the task after ``what`` (the
    script checks the tenant and the state in the same call)."""
    auth.tenant_path(tenant)
    only(body(required=False), set())
    validation.name("tenant", tenant)
    broker = redcron_app().broker
    if not broker.dlq.act(what, [task_id], tenant=tenant):
        task = broker.inspection.task_info(task_id)  # why not: 404 or 409
        if task.tenant != tenant:
            raise NotFound(f"no task {task_id} in the DLQ of tenant {tenant!r}")
        raise ApiError(409, "conflict", f"task {task_id} is {task.state}, not in the DLQ")
    return reply(broker.inspection.task_info(task_id))
