"""``/``: the overview — work per tenant and class, live workers, trigger lag
and throughput over the last hour, open circuit breakers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.api.live_workers import serves_tenant
from redcron.dashboard.totals import TTL_S as TOTALS_TTL_S
from redcron.dashboard.totals import WorkTotals
from redcron.dashboard.totals import totals as totals_snapshot
from redcron.dashboard.ui import render
from redcron.dashboard.ui.charts import activity_svg
from redcron.dashboard.ui.render import Reply
from redcron.engine import WorkerRegistry
from redcron.keys import PRIORITIES
from redcron.model.records import from_ms
from redcron.store import activity, page_tenants, trigger_lag

bp = flask.Blueprint("overview", __name__)

#: workers listed on the overview (the Workers page pages over them all)
WORKERS_SHOWN = 10
#: open breakers listed on the overview (the soonest to close first)
BREAKERS_SHOWN = 20
#: minutes of trigger lag and throughput on the overview
HOUR = 60


@dataclass
class TenantRow:
    """One tenant's work now (summed over the shards it has rows on)."""

    tenant: str
    ready: dict[str, int] = field(default_factory=dict)  # priority class -> ready
    in_flight: int = 0
    delayed: int | None = 0  # None: not counted yet (from the background totals)
    dlq: int = 0

    @property
    def ready_total(self) -> int:
        return sum(self.ready.values())


def tenant_rows(names: Sequence[str], snap: WorkTotals | None) -> list[TenantRow]:
    """The work of each of ``names`` (a page of tenants) the viewer may see; the
    delayed column from ``snap`` (the background totals; None: not counted yet)."""
    rows: dict[str, TenantRow] = {}
    shown = [t for t in names if auth.may_see(t)]
    delayed = snap.delayed_by_tenant if snap is not None else {}
    for load, classes in redcron_app().broker.inspection.inspect_tenants(shown, delayed):
        row = rows.setdefault(load.tenant, TenantRow(load.tenant))
        row.in_flight += load.in_flight
        if snap is None:
            row.delayed = None  # shown as "counting" until the first snapshot
        elif row.delayed is not None:
            row.delayed += load.delayed
        row.dlq += load.dlq
        for priority, n in classes.items():
            row.ready[priority] = row.ready.get(priority, 0) + n
    return [rows[t] for t in shown if t in rows]


def sum_rows(rows: Sequence[TenantRow]) -> WorkTotals:
    """The rows' work, summed (live: ``taken_at`` None)."""
    out = WorkTotals()
    for row in rows:
        for priority, n in row.ready.items():
            out.ready[priority] = out.ready.get(priority, 0) + n
        out.in_flight += row.in_flight
        out.delayed = (
            None if row.delayed is None or out.delayed is None else out.delayed + row.delayed
        )
        out.dlq += row.dlq
    return out


def recent(only: str | None, now_ms: int) -> dict[str, Any]:
    """Trigger lag p50/p99 and tasks per minute over the hour up to ``now_ms``
    (the viewer's tenant, or all), from the per-minute stats hashes."""
    broker = redcron_app().broker
    minutes = activity(broker, only, HOUR, now_ms)
    now = minutes[-1].minute if minutes else None
    chart = activity_svg([(m.minute, m.succeeded, m.failed) for m in minutes], now=now)
    return {"lag": trigger_lag(broker, only, HOUR, now_ms), "activity": chart}


@bp.get("/")
def index() -> Reply:
    app = redcron_app()
    only = auth.scope()
    now_ms = app.broker.server_ms()  # one clock read for the whole page
    names = page_tenants(app.broker, render.after_cursor(), render.PER_PAGE, only,
                         render.before_cursor())  # fmt: skip
    snap = totals_snapshot().get()
    rows = tenant_rows(names.items, snap)
    whole = names.next_cursor is None and names.prev_cursor is None
    # every tenant on this page: its rows are the totals; else the snapshot
    totals = sum_rows(rows) if whole else snap
    registry = WorkerRegistry(app.broker)
    keep = None if only is None else (lambda w: serves_tenant(w, only))
    workers, more = registry.page(None, WORKERS_SHOWN, keep)
    # a tenant's count would read every worker: "10+" when a page follows
    workers_total = registry.count() if only is None else (None if more else len(workers))
    breakers = app.jobs.open_breakers(only, BREAKERS_SHOWN)
    breakers_total = app.jobs.count_open_breakers() if only is None else None
    return render.page(
        "overview.html",
        title="Overview",
        rows=render.keyed(names, rows),
        totals=totals,
        totals_ttl_s=TOTALS_TTL_S,
        classes=PRIORITIES,
        workers=workers,
        workers_total=workers_total,
        breakers=breakers,
        breakers_total=breakers_total,
        now=from_ms(now_ms),
        **recent(only, now_ms),
    )
