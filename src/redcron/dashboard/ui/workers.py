"""``/workers``: the live workers from the worker registry — host, pid,
queues, slots, the tasks each is running, last heartbeat; the processes of
one ``redcron worker --procs N`` under a row naming their supervisor — a page at a time
by worker id (``?after=<id>``): the work grows with the page, never with the
number of workers, tenants or leases.  Above them, the (tenant, queue)s with
ready work of tasks no live worker serving them registered, from the
background totals (counted at most every 10 s, never by the request)."""

from __future__ import annotations

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.api.live_workers import as_seen, serves_tenant
from redcron.dashboard.totals import totals
from redcron.dashboard.ui import render
from redcron.dashboard.ui.render import Reply
from redcron.engine import WorkerRegistry, running_by_worker

bp = flask.Blueprint("workers", __name__)


@bp.get("/workers")
def index() -> Reply:
    app = redcron_app()
    only = auth.scope()
    # any text is a valid lexical bound: the page after it
    workers, nxt = WorkerRegistry(app.broker).page(
        render.after_cursor(),
        render.PER_PAGE,
        None if only is None else lambda w: serves_tenant(w, only),
    )
    snap = totals().get()
    unrunnable = (
        None
        if snap is None
        else sorted(
            (tenant, queue, n)
            for (tenant, queue), n in snap.unrunnable.items()
            if only is None or tenant == only
        )
    )
    return render.page(
        "workers.html",
        title="Workers",
        workers=render.Keyed([as_seen(w, only) for w in workers], nxt, None),
        running=running_by_worker(app.broker, workers, only),
        now=app.jobs.server_now(),
        unrunnable=unrunnable,
    )
