"""``/workers``: the live workers from the worker registry — host, pid,
queues, slots, the tasks each is running, last heartbeat."""

from __future__ import annotations

import flask

from redcron.broker import WorkerRegistry, running_by_worker
from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.ui import render
from redcron.dashboard.ui.overview import serves_tenant
from redcron.dashboard.ui.render import Reply

bp = flask.Blueprint("workers", __name__)


@bp.get("/workers")
def index() -> Reply:
    app = redcron_app()
    only = auth.scope()
    workers = [w for w in WorkerRegistry(app.broker).list() if serves_tenant(w, only)]
    return render.page(
        "workers.html",
        title="Workers",
        workers=render.paginate(workers),
        running=running_by_worker(app.broker, only),
        now=app.jobs.server_now(),
    )
