"""``GET /v1/audit``: who did what, newest first (the action record,
:mod:`redcron.store.actions`; not the chaos checker's attempt audit).

A tenant token reads its own tenant's actions only (naming another tenant
answers an empty page); the admin reads every action (or one tenant's with
``tenant``).  Viewers may read it: it is a read.
"""

from __future__ import annotations

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app, reply
from redcron.dashboard.api.operation import Operation, Routes, paged
from redcron.dashboard.api.params import ENTRY_ID, LIMIT, TENANT, CursorParam
from redcron.dashboard.api.record_schema import ref
from redcron.store import ActionLog

bp = Routes("audit", __name__)

#: a page's cursor: the last entry's stream id
CURSOR = CursorParam("audit", (ENTRY_ID,), "entry id")


@bp.get(
    "/audit",
    doc=Operation(
        "list_actions",
        "Who did what, newest first: every state-changing request (a tenant token: its "
        "own tenant's)",
        paged("actions", ref("Action")),
        query=(TENANT, LIMIT, CURSOR),
    ),
)
def list_actions() -> flask.Response:
    tenant = TENANT.read()
    limit = LIMIT.read()
    key = CURSOR.read()
    if tenant is not None and not auth.may_see(tenant):
        return reply({"actions": [], "next_cursor": None})
    before = str(key[0]) if key is not None else None
    found = ActionLog(redcron_app().broker).page(tenant or auth.scope(), limit, before)
    nxt = found.next_cursor
    return reply({"actions": found.actions, "next_cursor": CURSOR.encode(nxt) if nxt else None})
