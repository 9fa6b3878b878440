"""``/dlq``: dead-lettered tasks, filtered by tenant and task name, each with
its error and log tail; replay or discard one, the selected, or all shown.

A page at a time in (tenant, entry) order (``?after=<tenant> <entry id>``, the
cursor of the next link): across tenants it reads the DLQ index of each shard,
never every tenant's stream (``DlqStore.page``)."""

from __future__ import annotations

import flask

from redcron.dashboard.api import actions, auth
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.ui import render
from redcron.dashboard.ui.render import Reply
from redcron.engine import DLQ_ENTRY_ID, DlqPage, DlqVerb
from redcron.errors import ValidationError
from redcron.model import validation

bp = flask.Blueprint("dlq", __name__)

#: task ids one replay or discard form may name
MAX_CHOSEN = 1_000


def parse_after(text: str | None, field: str = "after") -> tuple[str, str] | None:
    """A page cursor ``<tenant> <entry id>`` (an empty entry id: past the tenant)."""
    if not text:
        return None
    tenant, _sep, eid = text.partition(" ")
    validation.name(field, tenant)
    if eid and not DLQ_ENTRY_ID.fullmatch(eid):
        raise ValidationError(field, f"{text!r} is not a DLQ page cursor; follow the next link")
    return tenant, eid


def entries(
    tenant: str | None, name: str | None, after: tuple[str, str] | None, limit: int
) -> DlqPage:
    """A page of the dead tasks the viewer may see, matching the filter."""
    if tenant is not None and not auth.may_see(tenant):
        return DlqPage([], None)
    found = redcron_app().broker.dlq.page(tenant or auth.scope(), after, limit, name)
    # the read holds only the scope's entries: a guard, never a filter
    return DlqPage([e for e in found.entries if auth.may_see(e.tenant)], found.next_cursor)


def _filter() -> tuple[str | None, str | None, tuple[str, str] | None]:
    source = flask.request.form if flask.request.method == "POST" else flask.request.args
    tenant = source.get("tenant") or None
    if tenant is not None:
        validation.name("tenant", tenant)
    return tenant, source.get("name") or None, parse_after(source.get("after"))


@bp.get("/dlq")
def index() -> Reply:
    tenant, name, after = _filter()
    found = entries(tenant, name, after, render.PER_PAGE)
    nxt = " ".join(found.next_cursor) if found.next_cursor else None
    return render.page(
        "dlq.html",
        title="Dead-letter queue",
        entries=render.Keyed(found.entries, nxt, None),
        tenant=tenant or "",
        name=name or "",
        after=" ".join(after) if after else "",
        scoped=auth.scope() is not None,
    )


@bp.post("/dlq/replay")
def replay() -> Reply:
    return _act("replay", "replayed", "back on their queues with a fresh retry budget")


@bp.post("/dlq/discard")
def discard() -> Reply:
    return _act("discard", "discarded", "ended cancelled")


def _act(what: DlqVerb, verb: str, what_now: str) -> Reply:
    """Apply ``what`` to the chosen entries: a row's button (``one``), the
    ticked boxes (``ids``) or every entry of the page shown (``all``).  A
    tenant's viewer acts on its own tasks only: the script checks each id's
    tenant in the same call (another tenant's, or no task: left alone)."""
    tenant, name, after = _filter()
    form = flask.request.form
    if form.get("one"):
        chosen = [form["one"]]
    elif form.get("all"):
        chosen = [e.task_id for e in entries(tenant, name, after, render.PER_PAGE).entries]
    else:
        chosen = form.getlist("ids")
    chosen = chosen[:MAX_CHOSEN]
    if not chosen:
        flask.flash("nothing selected: tick some entries first", "error")
    else:
        acted = redcron_app().broker.dlq.act(what, chosen, tenant=auth.scope())
        for owner, ids in acted.items():
            actions.note(ids, tenant=owner)
        done = sum(map(len, acted.values()))
        missed = len(chosen) - done
        message = f"{verb} {done} task{'s' if done != 1 else ''} ({what_now})"
        if missed:
            message += f"; {missed} no longer in the DLQ (replayed or discarded meanwhile)"
        flask.flash(message, "error" if missed and not done else "info")
        actions.note(detail=message)
    return render.go("ui.dlq.index", tenant=tenant or None, name=name or None)
