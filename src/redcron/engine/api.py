"""The engine's surface for the processes: what the worker, the beat, the
notifier, the task context and ``App`` call on Redis's data path, and nothing
else of it.

One Protocol, as Oban's engine behaviour is one set of callbacks: a process
types against :class:`Engine`; :class:`~redcron.engine.Broker` implements it
(``tests/unit/test_engine_api.py`` checks that mypy agrees and that no member
goes unused).  Each member is one operation, named for its script where it has
one (``heartbeat`` ↔ ``lua/heartbeat.lua``, ``beat_own`` ↔ ``lua/beat_own.lua``);
the rows they take and return are the engine's record types, exported by
``redcron.engine``.  A process that needs the control plane too (the worker's
registry entry and audit, the notifier's channels and outbox) builds those
``redcron.store`` objects from its App's broker; they are not the engine's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from redcron.config import Settings
from redcron.engine.argv import EnqueueRow, FailItem, FireArgs
from redcron.engine.beat import SWEEP_LIMIT, DueRow, JobHead, Park, ShardClaim, Swept
from redcron.engine.cancel import TaskCancel
from redcron.engine.enqueue import Enqueued
from redcron.engine.leases import (
    Completion,
    Heartbeat,
    LeaseRequest,
    LogLines,
    ProgressItem,
    ReportedAndLeased,
)
from redcron.engine.maintenance import FOLLOW_BUDGET_S, Maintained
from redcron.engine.workers import Registration
from redcron.model import TaskRecord
from redcron.model.edges import RunInputs

__all__ = ["Engine"]


class Engine(Protocol):
    """The data path of one deployment (one key prefix), as the processes use it."""

    # -- the deployment ------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """The settings the engine was made with."""
        ...

    @property
    def shards(self) -> int:
        """The deployment's shard count."""
        ...

    def shards_with(self, shard: int) -> list[int]:
        """The shards served by the node that serves ``shard`` (all of them on one server)."""
        ...

    def server_ms(self) -> int:
        """The Redis server's clock in ms (invariant 8)."""
        ...

    def close(self) -> None:
        """Close the connections."""
        ...

    # -- work in: enqueue and cancel (App, TaskDef, TaskHandle) --------------------

    def submit(self, rows: Sequence[EnqueueRow], now: int | None = None) -> Enqueued:
        """Create task instances; what was created and what a dedupe key folded."""
        ...

    def cancel(self, iid: str, now: int | None = None) -> TaskCancel:
        """End a task ``cancelled`` wherever it is (``cancel.lua``)."""
        ...

    # -- reading a task (TaskHandle, the worker's reports, the task context) -------

    def task_info(self, iid: str) -> TaskRecord:
        """The task instance's record."""
        ...

    def watch(self, iid: str) -> str:
        """The instance's state; a token comes to its done list when it ends (``watch.lua``)."""
        ...

    def wait_done(self, iid: str, timeout_s: float) -> bool:
        """Block (at most ``timeout_s``) until the instance ends; whether it did."""
        ...

    def run_inputs(self, shard: int, iids: Sequence[str]) -> list[RunInputs]:
        """What each task of a run receives from its run: its params and its
        upstream tasks' results, in one call (``inputs.lua``)."""
        ...

    def once(self, shard: int, tenant: str, key: str, ttl_s: int) -> bool:
        """Record an attempt's effect; True only for the first caller (``ctx.once``)."""
        ...

    # -- leases (the worker) -------------------------------------------------------

    def wait_for_work(
        self,
        shards: Sequence[int],
        queues: Sequence[str],
        timeout_s: float,
        pass_on: Callable[[], bool] | None = None,
    ) -> bool:
        """Block (at most ``timeout_s``) on the wake lists of ``queues`` on ``shards``."""
        ...

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
        """Report ends (``complete.lua``, ``fail.lua``) and lease more (``lease.lua``)
        in one round trip."""
        ...

    def start(
        self, shard: int, worker: str, tokens: Iterable[tuple[str, str]], now: int | None = None
    ) -> int:
        """Mark leased instances running (``start.lua``)."""
        ...

    def heartbeat(
        self,
        shard: int,
        worker: str,
        ttl_ms: int,
        tokens: Iterable[tuple[str, str]],
        now: int | None = None,
    ) -> Heartbeat:
        """Renew leases (``heartbeat.lua``): the lost and the revoked instance ids."""
        ...

    def progress(
        self, shard: int, worker: str, items: Sequence[ProgressItem], now: int | None = None
    ) -> list[bool]:
        """Store running attempts' progress, fenced by their tokens (``progress.lua``)."""
        ...

    def release(
        self, shard: int, worker: str, tokens: Iterable[tuple[str, str]], now: int | None = None
    ) -> int:
        """Hand leases back unrun (``release.lua``, a stopping worker)."""
        ...

    def publish_worker(self, reg: Registration, ttl_ms: int, now: int | None = None) -> int:
        """Write or renew a worker's registry entry; its expiry (ms)."""
        ...

    def remove_worker(self, worker_id: str) -> None:
        """Take a worker's registry entry out (a clean stop)."""
        ...

    # -- maintenance (workers and beats alike) -------------------------------------

    def try_lock(
        self, shard: int, owner: str, interval_s: float, name: str = "maintenance"
    ) -> bool:
        """At most one caller per shard per interval."""
        ...

    def maintain(self, shard: int, now: int | None = None, follow: bool = True) -> Maintained:
        """Promote due timers and reap expired leases (``promote.lua``, ``reap.lua``)."""
        ...

    def follow_all(self, shard: int, rounds: int = 20, budget_s: float = FOLLOW_BUDGET_S) -> int:
        """Apply the shard's follow-ups (chaining, counters, events)."""
        ...

    # -- the beat --------------------------------------------------------------------

    def beat_register(self, beat: str, now: int, ttl_ms: int) -> int:
        """Renew ``beat`` in the live-beats registry; how many beats are live."""
        ...

    def beat_unregister(self, beat: str) -> None:
        """Leave the live-beats registry (a stopping beat)."""
        ...

    def beat_own(
        self, shards: Sequence[int], beat: str, ttl_ms: int, mode: str
    ) -> list[ShardClaim]:
        """Acquire, renew or release shard ownership leases (``beat_own.lua``)."""
        ...

    def next_due(self, shards: Sequence[int]) -> tuple[int, list[int | None]]:
        """The server time and each shard's earliest due score."""
        ...

    def due(self, shard: int, now: int, limit: int) -> list[DueRow]:
        """Up to ``limit`` schedule rows due by ``now``, earliest first."""
        ...

    def due_page(
        self, shard: int, start: int, end: int, after: DueRow | None, limit: int
    ) -> list[DueRow]:
        """Up to ``limit`` schedule rows scored in ``[start, end]`` past ``after``."""
        ...

    def job_heads(
        self, shard: int, job_ids: Sequence[str], tenants: Sequence[str]
    ) -> tuple[list[JobHead], list[Any]]:
        """Each job's head and each tenant's default jitter."""
        ...

    def job_specs(
        self, shard: int, job_ids: Sequence[str], tenants: Sequence[str]
    ) -> tuple[list[tuple[str, str, str] | None], list[Any]]:
        """Each job's stored spec (JSON text, tenant, name) and each tenant's jitter."""
        ...

    def fire(self, shard: int, fires: Sequence[FireArgs]) -> list[Any]:
        """Fire due jobs (``fire_batch.lua``): one reply per fire."""
        ...

    def job_park(self, shard: int, parks: Sequence[Park]) -> list[bool]:
        """Park jobs that cannot fire (``job_park.lua``): whether each was parked."""
        ...

    def sweep_deadlines(
        self, shard: int, now: int | None = None, limit: int = SWEEP_LIMIT
    ) -> Swept:
        """Mark late the runs whose deadline is due (``deadline_sweep.lua``)."""
        ...
