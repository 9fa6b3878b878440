"""``GET /v1/dlq``: dead tasks across tenants (the admin's view; a tenant token
sees its own only), a page at a time in (tenant, entry) order.  Replay and
discard stay on ``/v1/tenants/{t}/dlq/...``."""

from __future__ import annotations

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app, reply
from redcron.dashboard.api.operation import Operation, Routes, link, paged
from redcron.dashboard.api.params import ENTRY_ID, LIMIT, NAME_PART, TENANT, CursorParam, TextParam
from redcron.dashboard.api.record_schema import ref

bp = Routes("dlq", __name__)

#: the query of the DLQ lists (and LIMIT, TENANT)
#: (tenant, DLQ entry id) of the last entry; an empty entry id: past that tenant
CURSOR = CursorParam("dlq", (NAME_PART, f"(?:{ENTRY_ID})?"), "tenant:entry id")
NAME = TextParam("name", "Only dead tasks of this task name")

#: a page of a DLQ list (this one's and a tenant's)
PAGE = paged("entries", ref("DlqEntry"))
_DEAD = {"tenant": "$response.body#/entries/0/tenant",
         "task_id": "$response.body#/entries/0/task_id"}  # fmt: skip
#: what a client can do with a page's first entry
LINKS = {"ReplayDead": link("replay_dead", _DEAD), "DiscardDead": link("discard_dead", _DEAD)}


def dlq_cursor() -> tuple[str, str] | None:
    """The request's ``cursor``: (tenant, entry id) of the last entry of a page
    (an empty entry id: past that tenant); 400 naming ``cursor`` otherwise."""
    key = CURSOR.read()
    return None if key is None else (key[0], key[1])


@bp.get(
    "/dlq",
    doc=Operation(
        "list_dlq",
        "Dead tasks of every tenant (a tenant token: its own) by tenant, oldest first, a "
        "page at a time",
        PAGE,
        query=(TENANT, NAME, LIMIT, CURSOR),
        links=LINKS,
    ),
)
def list_dlq() -> flask.Response:
    """Dead tasks of every tenant (``tenant``: of one; ``name``: of one task
    name), ``limit`` a page (default 50), following ``cursor``."""
    tenant = TENANT.read()
    name = NAME.read()
    limit = LIMIT.read()
    after = dlq_cursor()
    if tenant is not None and not auth.may_see(tenant):
        return reply({"entries": [], "next_cursor": None})
    found = redcron_app().broker.dlq.page(tenant or auth.scope(), after, limit, name)
    # the read holds only the scope's entries: a guard, never a filter
    shown = [e for e in found.entries if auth.may_see(e.tenant)]
    nxt = found.next_cursor
    return reply({"entries": shown, "next_cursor": CURSOR.encode(*nxt) if nxt else None})
