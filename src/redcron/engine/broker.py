"""The broker: the engine's data path, as one object.

:class:`Broker` is a :class:`~redcron.engine.core.Core` (client, scripts,
script execution, meta, durability) that holds one object per protocol, each
the Python that calls ``lua/<name>.lua``, one hop from the script:

============================  ====================================================================
module                        scripts
============================  ====================================================================
``engine/enqueue.py``         enqueue, enqueue_check (:class:`Enqueuer`)
``engine/leases.py``          lease, start, heartbeat, complete, fail, release
``engine/maintenance.py``     promote, reap (with the lock and ``recent`` pruning)
``engine/dlq.py``             dlq_replay, dlq_discard, dlq_prune, dlq_unindex (:class:`DlqStore`)
``engine/inspect.py``         watch; counts read without a script
``engine/beat.py``            beat_own, fire_batch, job_park, deadline_sweep (:class:`BeatStore`)
``engine/cancel.py``          cancel (run_cancel, run_retry: ``engine/jobs.py``)
============================  ====================================================================

It implements :class:`~redcron.engine.api.Engine`, what the processes and
``App`` call: each of those methods hands the call to its part unchanged
(``Broker.cancel`` is the one of its own: docs/architecture.md, "The
packages").  Only ``redcron.engine``'s ``__init__`` imports this module; the
App, the testing mode and the faces build a Broker from the package's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis

from redcron.config import Settings
from redcron.engine.argv import EnqueueRow, FailItem, FireArgs
from redcron.engine.beat import SWEEP_LIMIT, BeatStore, DueRow, JobHead, Park, ShardClaim, Swept
from redcron.engine.cancel import TaskCancel, cancel
from redcron.engine.core import Core
from redcron.engine.dlq import DlqStore
from redcron.engine.enqueue import Enqueued, Enqueuer
from redcron.engine.inspect import Inspection
from redcron.engine.leases import (
    Completion,
    Heartbeat,
    LeaseRequest,
    Leases,
    LogLines,
    ProgressItem,
    ReportedAndLeased,
)
from redcron.engine.maintenance import FOLLOW_BUDGET_S, Maintained, Maintenance
from redcron.engine.workers import Registration, WorkerRegistry
from redcron.model import TaskRecord
from redcron.model.edges import RunInputs

__all__ = ["Broker"]


class Broker(Core):
    """All Redis operations of one deployment (one key prefix).

    The :class:`~redcron.engine.api.Engine` methods below hand each call to
    the part that holds it, unchanged; the faces and the tests also reach the
    parts themselves (``broker.dlq``, ``broker.leases.lease``).
    """

    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        super().__init__(settings, client)
        self.enqueuer = Enqueuer(self)
        self.leases = Leases(self)
        self.maintenance = Maintenance(self)
        self.dlq = DlqStore(self)
        self.inspection = Inspection(self)
        self.beat = BeatStore(self)
        self.workers = WorkerRegistry(self)

    # -- work in -----------------------------------------------------------------

    def enqueue(self, rows: Sequence[EnqueueRow], now: int | None = None) -> int:
        return self.enqueuer.enqueue(rows, now)

    def submit(self, rows: Sequence[EnqueueRow], now: int | None = None) -> Enqueued:
        return self.enqueuer.submit(rows, now)

    def cancel(self, iid: str, now: int | None = None) -> TaskCancel:
        """End a task ``cancelled`` wherever it is (see :mod:`redcron.engine.cancel`)."""
        return cancel(self, iid, now)

    # -- reading a task ------------------------------------------------------------

    def task_info(self, iid: str) -> TaskRecord:
        return self.inspection.task_info(iid)

    def watch(self, iid: str) -> str:
        return self.inspection.watch(iid)

    def wait_done(self, iid: str, timeout_s: float) -> bool:
        return self.inspection.wait_done(iid, timeout_s)

    def run_inputs(self, shard: int, iids: Sequence[str]) -> list[RunInputs]:
        return self.inspection.run_inputs(shard, iids)

    def once(self, shard: int, tenant: str, key: str, ttl_s: int) -> bool:
        return self.leases.once(shard, tenant, key, ttl_s)

    # -- leases ----------------------------------------------------------------------

    def wait_for_work(
        self,
        shards: Sequence[int],
        queues: Sequence[str],
        timeout_s: float,
        pass_on: Callable[[], bool] | None = None,
    ) -> bool:
        return self.leases.wait_for_work(shards, queues, timeout_s, pass_on=pass_on)

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
        return self.leases.report_and_lease(shard, worker, completes, fails, logs, lease, now)

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
        return self.leases.heartbeat(shard, worker, ttl_ms, tokens, now)

    def progress(
        self, shard: int, worker: str, items: Sequence[ProgressItem], now: int | None = None
    ) -> list[bool]:
        return self.leases.progress(shard, worker, items, now)

    def release(
        self, shard: int, worker: str, tokens: Iterable[tuple[str, str]], now: int | None = None
    ) -> int:
        return self.leases.release(shard, worker, tokens, now)

    def publish_worker(self, reg: Registration, ttl_ms: int, now: int | None = None) -> int:
        return self.workers.publish(reg, ttl_ms, now)

    def remove_worker(self, worker_id: str) -> None:
        self.workers.remove(worker_id)

    # -- maintenance -----------------------------------------------------------------

    def try_lock(
        self, shard: int, owner: str, interval_s: float, name: str = "maintenance"
    ) -> bool:
        return self.maintenance.try_lock(shard, owner, interval_s, name)

    def maintain(self, shard: int, now: int | None = None, follow: bool = True) -> Maintained:
        return self.maintenance.maintain(shard, now, follow)

    def follow_all(self, shard: int, rounds: int = 20, budget_s: float = FOLLOW_BUDGET_S) -> int:
        return self.maintenance.follow_all(shard, rounds, budget_s)

    # -- the beat --------------------------------------------------------------------

    def beat_register(self, beat: str, now: int, ttl_ms: int) -> int:
        return self.beat.register(beat, now, ttl_ms)

    def beat_unregister(self, beat: str) -> None:
        self.beat.unregister(beat)

    def beat_own(
        self, shards: Sequence[int], beat: str, ttl_ms: int, mode: str
    ) -> list[ShardClaim]:
        return self.beat.own(shards, beat, ttl_ms, mode)

    def next_due(self, shards: Sequence[int]) -> tuple[int, list[int | None]]:
        return self.beat.next_due(shards)

    def due(self, shard: int, now: int, limit: int) -> list[DueRow]:
        return self.beat.due(shard, now, limit)

    def due_page(
        self, shard: int, start: int, end: int, after: DueRow | None, limit: int
    ) -> list[DueRow]:
        return self.beat.due_page(shard, start, end, after, limit)

    def job_heads(
        self, shard: int, job_ids: Sequence[str], tenants: Sequence[str]
    ) -> tuple[list[JobHead], list[Any]]:
        return self.beat.job_heads(shard, job_ids, tenants)

    def job_specs(
        self, shard: int, job_ids: Sequence[str], tenants: Sequence[str]
    ) -> tuple[list[tuple[str, str, str] | None], list[Any]]:
        return self.beat.job_specs(shard, job_ids, tenants)

    def fire(self, shard: int, fires: Sequence[FireArgs]) -> list[Any]:
        return self.beat.fire(shard, fires)

    def job_park(self, shard: int, parks: Sequence[Park]) -> list[bool]:
        return self.beat.park(shard, parks)

    def sweep_deadlines(
        self, shard: int, now: int | None = None, limit: int = SWEEP_LIMIT
    ) -> Swept:
        return self.beat.sweep_deadlines(shard, now, limit)
