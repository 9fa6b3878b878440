"""``/audit``: who did what, newest first (the action record of
:mod:`redcron.store.actions`): a tenant sees its own tenant's actions, the
admin every action, or one tenant's (``?tenant=``); a page at a time
(``?after=<entry id>``)."""

from __future__ import annotations

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.ui import render
from redcron.dashboard.ui.render import Reply
from redcron.model import validation
from redcron.store import ActionLog, valid_action_cursor

bp = flask.Blueprint("audit", __name__)


@bp.get("/audit")
def index() -> Reply:
    only = auth.scope()
    tenant = only or flask.request.args.get("tenant") or None
    if tenant is not None:
        validation.name("tenant", tenant)
    after = render.after_cursor()
    if after is not None and not valid_action_cursor(after):
        after = None  # a hand-edited link: the first page
    found = ActionLog(redcron_app().broker).page(tenant, render.PER_PAGE, after)
    return render.page(
        "audit.html",
        title="Audit",
        actions=render.Keyed(found.actions, found.next_cursor, None),
        tenant=tenant or "",
        scoped=only is not None,
    )
