"""``/dlq``: dead-lettered tasks, filtered by tenant and task name, each with
its error and log tail; replay or discard one, the selected, or all shown."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flask

from redcron.broker import DlqStore
from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.ui import render
from redcron.dashboard.ui.render import Reply
from redcron.model import DlqEntry, validation

bp = flask.Blueprint("dlq", __name__)

#: entries read per tenant when a filter needs more than the page
SCAN_LIMIT = 10_000


def entries(tenant: str | None, name: str | None, count: int) -> list[DlqEntry]:
    """Dead tasks the viewer may see, oldest first, matching the filter."""
    if tenant is not None and not auth.may_see(tenant):
        return []
    found = redcron_app().broker.dlq.list(tenant or auth.scope(), count)
    return [e for e in found if auth.may_see(e.tenant) and (name is None or e.name == name)]


def _filter() -> tuple[str | None, str | None]:
    source = flask.request.form if flask.request.method == "POST" else flask.request.args
    tenant = source.get("tenant") or None
    if tenant is not None:
        validation.name("tenant", tenant)
    return tenant, source.get("name") or None


@bp.get("/dlq")
def index() -> Reply:
    tenant, name = _filter()
    count = SCAN_LIMIT if name else min(render.wanted(), SCAN_LIMIT)
    found = entries(tenant, name, count)
    return render.page(
        "dlq.html",
        title="Dead-letter queue",
        entries=render.paginate(found, exact=name is not None or len(found) < count),
        tenant=tenant or "",
        name=name or "",
        scoped=auth.scope() is not None,
    )


@bp.post("/dlq/replay")
def replay() -> Reply:
    return _act(DlqStore.replay, "replayed", "back on their queues with a fresh retry budget")


@bp.post("/dlq/discard")
def discard() -> Reply:
    return _act(DlqStore.discard, "discarded", "ended cancelled")


def _act(action: Callable[[DlqStore, Sequence[str]], int], verb: str, what: str) -> Reply:
    """Apply ``action`` to the chosen entries: a row's button (``one``), the
    ticked boxes (``ids``) or every entry of the filter (``all``)."""
    tenant, name = _filter()
    form = flask.request.form
    visible = {e.task_id for e in entries(tenant, name, SCAN_LIMIT)}
    if form.get("one"):
        chosen = [form["one"]]
    elif form.get("all"):
        chosen = sorted(visible)
    else:
        chosen = form.getlist("ids")
    if not chosen:
        flask.flash("nothing selected: tick some entries first", "error")
    else:
        allowed = [i for i in chosen if i in visible]
        done = action(redcron_app().broker.dlq, allowed) if allowed else 0
        missed = len(chosen) - done
        message = f"{verb} {done} task{'s' if done != 1 else ''} ({what})"
        if missed:
            message += f"; {missed} no longer in the DLQ (replayed or discarded meanwhile)"
        flask.flash(message, "error" if missed and not done else "info")
    return render.go("ui.dlq.index", tenant=tenant or None, name=name or None)
