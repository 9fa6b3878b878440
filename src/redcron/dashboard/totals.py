"""Deployment-wide work totals (ready per class, in flight, delayed, DLQ), each
tenant's delayed tasks, and the live workers' queues, slots and running
attempts, for the overview and ``/metrics``, without a request paying for them.

Summing them reads every tenant's streams and sets: work that grows with the
tenants.  So no request does it: a request that finds the snapshot older than
:data:`TTL_S` (or none yet) starts one refresh in a background thread and
answers with the snapshot it has (None on the very first request, shown as
"counting"), or waits a bounded time for the refresh (a scrape:
``Totals.get(wait_s=...)``).  At most one refresh runs per dashboard
process, and only while someone is looking: an idle dashboard reads nothing.
Pages that show every tenant anyway (all of them fit on one page) sum their
own rows instead, exact and live; their delayed column still comes from the
snapshot (counting a tenant's delayed tasks reads its shard's timers, which
name no tenant).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import flask

from redcron.app import App
from redcron.engine import (
    WorkerRegistry,
    is_unavailable,
    note_left_out,
    partial_reads,
    unrunnable_counts,
)

log = logging.getLogger(__name__)

#: Flask extension key of the process's :class:`Totals`
EXTENSION = "redcron.totals"
#: how old a snapshot may be before a request starts a refresh (seconds)
TTL_S = 10.0


@dataclass
class WorkTotals:
    """Work summed over tenants (a snapshot, or a page's rows)."""

    ready: dict[str, int] = field(default_factory=dict)  # priority class -> ready
    in_flight: int = 0
    delayed: int | None = 0  # None: a page's rows before the first snapshot
    dlq: int = 0
    #: tenant -> its delayed tasks (retry waits, countdowns)
    delayed_by_tenant: dict[str, int] = field(default_factory=dict)
    #: the live workers: queue -> how many lease from it, their slots, their running attempts
    workers_by_queue: dict[str, int] = field(default_factory=dict)
    worker_slots: int = 0
    worker_running: int = 0
    #: (tenant, queue) -> ready instances of tasks no live worker serving it
    #: registered (the workers leave them ready; ``broker.inspect``'s bounds)
    unrunnable: dict[tuple[str, str], int] = field(default_factory=dict)
    #: when the snapshot was taken (epoch s, this process's clock); None: live
    taken_at: float | None = None
    #: shards left out of the counts: their master did not answer (a Redis
    #: Cluster with a master down or failing over)
    unavailable_shards: list[int] = field(default_factory=list)

    @property
    def ready_total(self) -> int:
        return sum(self.ready.values())

    def unrunnable_by_queue(self, queues: Iterable[str] = ()) -> dict[str, int]:
        """:attr:`unrunnable` summed over tenants, with 0 for ``queues`` it lacks."""
        out = dict.fromkeys(queues, 0)
        for (_tenant, queue), n in self.unrunnable.items():
            out[queue] = out.get(queue, 0) + n
        return out


def count(app: App) -> WorkTotals:
    """Every tenant's work, summed: the refresh's whole cost.  On a Redis Cluster
    with a master down, the live shards' work, the others named
    (:attr:`WorkTotals.unavailable_shards`) rather than no count at all."""
    with partial_reads() as gone:
        out = _count(app)
    out.unavailable_shards = sorted(gone)
    return out


def _count(app: App) -> WorkTotals:
    out = WorkTotals(taken_at=time.time())
    for load, classes in app.broker.inspection.inspect_classes():
        for priority, n in classes.items():
            out.ready[priority] = out.ready.get(priority, 0) + n
        out.in_flight += load.in_flight
        out.delayed = (out.delayed or 0) + load.delayed
        out.dlq += load.dlq
        out.delayed_by_tenant[load.tenant] = (
            out.delayed_by_tenant.get(load.tenant, 0) + load.delayed
        )
    live = WorkerRegistry(app.broker).list()
    for w in live:
        for q in w.queues:
            out.workers_by_queue[q] = out.workers_by_queue.get(q, 0) + 1
        out.worker_slots += w.slots
        out.worker_running += w.running
    out.unrunnable = unrunnable_counts(app.broker, live)
    return out


class Totals:
    """The process's snapshot of :func:`count` and its one refresher thread."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._snapshot: WorkTotals | None = None
        self._running = False

    def get(self, wait_s: float = 0.0, max_age_s: float | None = None) -> WorkTotals | None:
        """The latest snapshot (None: none yet); starts a refresh if it is stale.

        ``wait_s``: when stale, wait up to that long for the refresh, so the
        answer is fresh whenever counting takes less (a scrape: a figure from
        before an idle spell is not served as the current one).  ``max_age_s``:
        a snapshot older than that, when the wait ran out, is None."""
        with self._lock:
            snap = self._snapshot
            stale = snap is None or snap.taken_at is None or time.time() - snap.taken_at > TTL_S
            if stale and not self._running:
                self._running = True
                threading.Thread(target=self._refresh, name="redcron-totals", daemon=True).start()
        if stale and wait_s > 0:
            snap = self.wait(wait_s)
        taken = snap.taken_at if snap is not None else None
        if max_age_s is not None and taken is not None and time.time() - taken > max_age_s:
            return None
        if snap is not None:  # the answer that shows it names the shards it lacks
            note_left_out(snap.unavailable_shards)
        return snap

    def _refresh(self) -> None:
        try:
            snap = count(self.app)
        except Exception as exc:  # keep the old snapshot: a later request retries
            if is_unavailable(exc):  # Redis down: the outage is reported once, elsewhere
                log.debug("work totals not refreshed: %s", exc)
            else:
                log.exception("work totals not refreshed")
            snap = None
        finally:
            with self._lock:
                self._running = False
        if snap is not None:
            with self._lock:
                self._snapshot = snap

    def wait(self, timeout_s: float = 30.0) -> WorkTotals | None:
        """Wait for a running refresh to end (tests and the benchmark's set-up)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running:
                    return self._snapshot
            time.sleep(0.01)
        return self._snapshot


def init_totals(web: flask.Flask, app: App) -> None:
    web.extensions[EXTENSION] = Totals(app)


def totals() -> Totals:
    found: Totals = flask.current_app.extensions[EXTENSION]
    return found
