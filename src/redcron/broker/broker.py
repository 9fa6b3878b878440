"""The broker: every operation on Redis, as one object.

:class:`Broker` is a thin facade.  It is a :class:`~redcron.broker.core.Core`
(client, scripts, script execution, meta, durability) that holds one object
per protocol and hands each call to it, so the Python that calls
``lua/<name>.lua`` is the protocol module's method, one hop from the script:

============================  ===============================================
module                        scripts
============================  ===============================================
``broker/enqueue.py``         enqueue, enqueue_check (:class:`Enqueuer`)
``broker/leases.py``          lease, start, heartbeat, complete, fail, release
``broker/maintenance.py``     promote, reap (with the lock and ``recent`` pruning)
``broker/dlq.py``             dlq_replay, dlq_discard, dlq_prune (:class:`DlqStore`)
``broker/inspect.py``         watch; counts read without a script
``broker/beat.py``            beat_own, fire, fire_batch, job_park (:class:`BeatStore`)
``broker/cancel.py``          cancel (run_cancel, run_retry: ``broker/jobs.py``)
``broker/tenants.py``         tenant_unpark
============================  ===============================================

New code may use the protocol objects directly (``broker.leases.lease(...)``);
the methods here stay so every caller written against one ``Broker`` keeps
working (docs/architecture.md, "The broker").  ``shard_of_id``, ``fields_of``,
``time_ms`` and ``PAYLOADS`` live in :mod:`redcron.broker.core` and are
importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis

from redcron.broker.argv import EnqueueRow, FailItem, FireArgs
from redcron.broker.beat import BeatStore, Fired
from redcron.broker.cancel import TaskCancel, cancel
from redcron.broker.core import MAX_MAINTENANCE, PAYLOADS, Core, fields_of, shard_of_id, time_ms
from redcron.broker.dlq import DlqStore
from redcron.broker.enqueue import Enqueuer
from redcron.broker.inspect import Inspection
from redcron.broker.leases import (
    Completion,
    FailResult,
    Heartbeat,
    Lease,
    LeaseRequest,
    Leases,
    LogLines,
    Reported,
    ReportedAndLeased,
)
from redcron.broker.maintenance import PRUNE_BATCH, Maintained, Maintenance, Promoted, Reaped
from redcron.broker.tenants import TenantStore
from redcron.config import Settings
from redcron.model import DlqEntry, TaskRecord, TenantLoad

#: ``Broker`` and what callers import from this module by name (the helpers
#: live in ``core``, the rows in ``leases``)
__all__ = [
    "PAYLOADS",
    "Broker",
    "FailResult",
    "Lease",
    "LeaseRequest",
    "fields_of",
    "shard_of_id",
    "time_ms",
]


class Broker(Core):
    """All Redis operations of one deployment (one key prefix)."""

    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        super().__init__(settings, client)
        self.enqueuer = Enqueuer(self)
        self.leases = Leases(self)
        self.maintenance = Maintenance(self)
        self.dlq = DlqStore(self)
        self.inspection = Inspection(self)
        self.beat = BeatStore(self)

    # -- producing: broker/enqueue.py ------------------------------------------

    def enqueue(self, rows: Sequence[EnqueueRow], now: int | None = None) -> int:
        """See :meth:`Enqueuer.enqueue`."""
        return self.enqueuer.enqueue(rows, now)

    # -- the lease protocol: broker/leases.py ----------------------------------

    def lease(
        self,
        shard: int,
        worker: str,
        max_tasks: int,
        ttl_ms: int,
        queues: Sequence[str],
        tenants: Sequence[str] = (),
        capacity: tuple[float | None, int | None] = (None, None),
        now: int | None = None,
    ) -> list[Lease]:
        """See :meth:`Leases.lease`."""
        return self.leases.lease(shard, worker, max_tasks, ttl_ms, queues, tenants, capacity, now)

    def start(
        self, shard: int, worker: str, tokens: Iterable[tuple[str, str]], now: int | None = None
    ) -> int:
        return self.leases.start(shard, worker, tokens, now)

    def heartbeat(
        self,
        shard: int,
        worker: str,
        ttl_ms: int,
        tokens: Iterable[tuple[str, str]],
        now: int | None = None,
    ) -> Heartbeat:
        """See :meth:`Leases.heartbeat`."""
        return self.leases.heartbeat(shard, worker, ttl_ms, tokens, now)

    def complete(
        self, shard: int, worker: str, items: Sequence[Completion], now: int | None = None
    ) -> list[bool]:
        return self.leases.complete(shard, worker, items, now)

    def fail(
        self,
        shard: int,
        worker: str,
        items: Sequence[FailItem],
        now: int | None = None,
        jitter: float | None = None,
    ) -> list[FailResult]:
        """See :meth:`Leases.fail`."""
        return self.leases.fail(shard, worker, items, now, jitter)

    def report(
        self,
        shard: int,
        worker: str,
        completes: Sequence[Completion],
        fails: Sequence[FailItem],
        logs: Sequence[LogLines],
        now: int | None = None,
    ) -> Reported:
        """See :meth:`Leases.report`."""
        return self.leases.report(shard, worker, completes, fails, logs, now)

    def report_and_lease(
        self,
        shard: int,
        worker: str,
        completes: Sequence[Completion],
        fails: Sequence[FailItem],
        logs: Sequence[LogLines],
        lease: LeaseRequest | None,
        now: int | None = None,
    ) -> ReportedAndLeased:
        """See :meth:`Leases.report_and_lease`."""
        return self.leases.report_and_lease(shard, worker, completes, fails, logs, lease, now)

    def release(
        self, shard: int, worker: str, tokens: Iterable[tuple[str, str]], now: int | None = None
    ) -> int:
        return self.leases.release(shard, worker, tokens, now)

    def append_logs(self, shard: int, items: Sequence[LogLines], pipe: Any = None) -> None:
        """See :meth:`Leases.append_logs`."""
        self.leases.append_logs(shard, items, pipe)

    def once(self, shard: int, key: str, ttl_s: int) -> bool:
        """See :meth:`Leases.once`."""
        return self.leases.once(shard, key, ttl_s)

    def wait_for_work(
        self,
        shards: Sequence[int],
        queues: Sequence[str],
        timeout_s: float,
        pass_on: Callable[[], bool] | None = None,
    ) -> bool:
        """See :meth:`Leases.wait_for_work`."""
        return self.leases.wait_for_work(shards, queues, timeout_s, pass_on)

    # -- maintenance: broker/maintenance.py ------------------------------------

    def reap(
        self,
        shard: int,
        limit: int = MAX_MAINTENANCE,
        now: int | None = None,
        jitter: float | None = None,
    ) -> Reaped:
        """See :meth:`Maintenance.reap`."""
        return self.maintenance.reap(shard, limit, now, jitter)

    def promote(self, shard: int, limit: int = MAX_MAINTENANCE, now: int | None = None) -> Promoted:
        """See :meth:`Maintenance.promote`."""
        return self.maintenance.promote(shard, limit, now)

    def try_maintenance_lock(self, shard: int, owner: str, interval_s: float) -> bool:
        """See :meth:`Maintenance.try_lock`."""
        return self.maintenance.try_lock(shard, owner, interval_s)

    def maintain(self, shard: int, now: int | None = None) -> Maintained:
        """See :meth:`Maintenance.maintain`."""
        return self.maintenance.maintain(shard, now)

    def prune_recent(self, shard: int, batch: int = PRUNE_BATCH) -> int:
        """See :meth:`Maintenance.prune_recent`."""
        return self.maintenance.prune_recent(shard, batch)

    # -- the beat: broker/beat.py -----------------------------------------------

    def beat_own(
        self,
        shard: int,
        owner: str,
        ttl_ms: int,
        mode: str,
        now: int | None = None,
        pipe: Any = None,
    ) -> Any:
        """See :meth:`BeatStore.beat_own`."""
        return self.beat.beat_own(shard, owner, ttl_ms, mode, now, pipe)

    def fire(self, shard: int, fire: FireArgs, now: int | None = None) -> Fired:
        """See :meth:`BeatStore.fire_one`."""
        return self.beat.fire_one(shard, fire, now)

    def fire_batch(
        self, shard: int, fires: Sequence[FireArgs], now: int | None = None, pipe: Any = None
    ) -> Any:
        """See :meth:`BeatStore.fire_batch`."""
        return self.beat.fire_batch(shard, fires, now, pipe)

    # -- control and the DLQ: broker/cancel.py, dlq.py, tenants.py -------------

    def cancel(self, iid: str, now: int | None = None) -> TaskCancel:
        """End a task ``cancelled`` wherever it is (see :mod:`redcron.broker.cancel`)."""
        return cancel(self, iid, now)

    def dlq_list(self, tenant: str | None = None, count: int = 100) -> list[DlqEntry]:
        """See :meth:`DlqStore.list`."""
        return self.dlq.list(tenant, count)

    def dlq_replay(self, iids: Sequence[str], now: int | None = None) -> int:
        """See :meth:`DlqStore.replay`."""
        return self.dlq.replay(iids, now)

    def dlq_discard(self, iids: Sequence[str], now: int | None = None) -> int:
        """See :meth:`DlqStore.discard`."""
        return self.dlq.discard(iids, now)

    def unpark(self, shard: int, tenant: str) -> bool:
        """See :meth:`TenantStore.unpark`."""
        return TenantStore(self).unpark(shard, tenant)

    # -- inspection: broker/inspect.py -----------------------------------------

    def watch(self, iid: str) -> str:
        return self.inspection.watch(iid)

    def wait_done(self, iid: str, timeout_s: float) -> bool:
        return self.inspection.wait_done(iid, timeout_s)

    def task_info(self, iid: str) -> TaskRecord:
        """See :meth:`Inspection.task_info`."""
        return self.inspection.task_info(iid)

    def run_params(self, shard: int, run_id: str) -> dict[str, Any]:
        """See :meth:`Inspection.run_params`."""
        return self.inspection.run_params(shard, run_id)

    def log_lines(self, iid: str, attempt: int, count: int = 20) -> list[str]:
        return self.inspection.log_lines(iid, attempt, count)

    def inspect(self) -> list[TenantLoad]:
        """See :meth:`Inspection.inspect`."""
        return self.inspection.inspect()

    def inspect_classes(self, tenant: str | None = None) -> list[tuple[TenantLoad, dict[str, int]]]:
        """See :meth:`Inspection.inspect_classes`."""
        return self.inspection.inspect_classes(tenant)

    def delayed_counts(self, shard: int, limit: int = 10_000) -> dict[tuple[str, str], int]:
        """See :meth:`Inspection.delayed_counts`."""
        return self.inspection.delayed_counts(shard, limit)

    def ready_counts(self, streams: Sequence[str]) -> list[int]:
        """See :meth:`Inspection.ready_counts`."""
        return self.inspection.ready_counts(streams)

    def stats(self) -> dict[str, int]:
        """See :meth:`Inspection.stats`."""
        return self.inspection.stats()
