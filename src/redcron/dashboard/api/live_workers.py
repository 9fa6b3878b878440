"""``GET /v1/workers``: the live workers, a page at a time by id, each with the
tasks it holds now.  A tenant token sees the workers that serve its tenant,
with only its own tenant and its own tasks on them."""

from __future__ import annotations

import dataclasses
from typing import Any

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app, reply
from redcron.dashboard.api.leases import WORKER_ID
from redcron.dashboard.api.operation import Operation, Routes, paged
from redcron.dashboard.api.params import LIMIT, CursorParam
from redcron.dashboard.api.record_schema import ref
from redcron.engine import WorkerRegistry, running_by_worker
from redcron.model import WorkerInfo
from redcron.model.serialize import to_json

bp = Routes("live_workers", __name__)

#: the query of GET /v1/workers (and LIMIT)
CURSOR = CursorParam("workers", (WORKER_ID.pattern,), "worker id")


def serves_tenant(worker: WorkerInfo, tenant: str | None) -> bool:
    return tenant is None or not worker.tenants or tenant in worker.tenants


def as_seen(worker: WorkerInfo, tenant: str | None) -> WorkerInfo:
    """``worker`` as a viewer scoped to ``tenant`` may see it: no other tenant's
    name, no instance ids (they may be another tenant's)."""
    if tenant is None:
        return worker
    return dataclasses.replace(worker, tenants=(tenant,) if worker.tenants else (), leased=())


@bp.get(
    "/workers",
    doc=Operation(
        "list_workers",
        "Live workers by id, a page at a time, each with the tasks it holds (a tenant "
        "token: the workers serving it, its own tasks)",
        paged("workers", ref("Worker")),
        query=(LIMIT, CURSOR),
    ),
)
def list_workers() -> flask.Response:
    """Live workers by id, ``limit`` a page (default 50), following ``cursor``."""
    limit = LIMIT.read()
    key = CURSOR.read()
    app = redcron_app()
    only = auth.scope()
    keep = None if only is None else (lambda w: serves_tenant(w, only))
    workers, nxt = WorkerRegistry(app.broker).page(key[0] if key else None, limit, keep)
    running = running_by_worker(app.broker, workers, only)
    # each worker's record, with the tasks it holds now (as the Workers page shows)
    rows: list[dict[str, Any]] = [
        {**to_json(as_seen(w, only)), "holding": to_json(running.get(w.id, []))} for w in workers
    ]
    return reply({"workers": rows, "next_cursor": CURSOR.encode(nxt) if nxt else None})
