"""The data path on Redis, where correctness lives: the client core, the
scripts, enqueue, leases, maintenance, the beat's store, the DLQ, cancel, jobs
and runs, inspection, the worker registry, the key-layout upgrade.

The processes (worker, beat, notifier) and ``App`` type against one Protocol,
:class:`Engine` (``engine/api.py``), which :class:`Broker` implements; the
faces (``cli/``, ``dashboard/``, ``chaos/``) reach it through the names
exported here, never a submodule (``tests/unit/test_imports.py`` checks
both): which module a reader lives in is this package's business.  The
control plane (``redcron.store``) and the doctor (``redcron.doctor``) import
this package; it imports neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from redcron.engine.api import Engine
from redcron.engine.argv import EnqueueRow, FailItem, FireArgs
from redcron.engine.beat import SWEEP_LIMIT, DueRow, LateRun, Park, ShardClaim
from redcron.engine.broker import Broker
from redcron.engine.cancel import RunCancel, TaskCancel
from redcron.engine.cluster_admin import MAX_KEYS as MAX_SHARD_KEYS
from redcron.engine.cluster_admin import ShardMove, move_shard, plan_move
from redcron.engine.connection import key_slot, scan_keys
from redcron.engine.core import MAX_MAINTENANCE, Core
from redcron.engine.dlq import DLQ_ENTRY_ID, DlqPage, DlqStore, DlqVerb
from redcron.engine.enqueue import Enqueued
from redcron.engine.indexes import ensure_indexes
from redcron.engine.inspect import Running, queue_loads, running_by_worker, unrunnable_counts
from redcron.engine.jobs import JobStore
from redcron.engine.leases import FailResult, Lease, LeaseRequest, ProgressItem
from redcron.engine.partial import (
    begin_partial_reads,
    end_partial_reads,
    note_left_out,
    partial_reads,
    unavailable_channels,
    unavailable_shards,
)
from redcron.engine.registered import refuse_unregistered
from redcron.engine.replies import UNAVAILABLE_CODES
from redcron.engine.retry import (
    TRANSIENT,
    UNAVAILABLE,
    Backoff,
    ErrorReply,
    Outage,
    ShardGate,
    is_unavailable,
)
from redcron.engine.tasklist import TaskFilter, list_tasks, scan_tasks
from redcron.engine.workers import (
    LEASED_PUBLISHED,
    LEASED_REPUBLISH_S,
    TTL_LEASES,
    Registration,
    WorkerRegistry,
    unserved_by_task,
    unserved_refs,
    unserved_tasks,
)

if TYPE_CHECKING:

    def _a_broker_is_an_engine(broker: Broker) -> Engine:
        return broker  # mypy checks that Broker implements every member of Engine


__all__ = [
    "DLQ_ENTRY_ID",
    "LEASED_PUBLISHED",
    "LEASED_REPUBLISH_S",
    "MAX_MAINTENANCE",
    "MAX_SHARD_KEYS",
    "SWEEP_LIMIT",
    "TRANSIENT",
    "TTL_LEASES",
    "UNAVAILABLE",
    "UNAVAILABLE_CODES",
    "Backoff",
    "Broker",
    "Core",
    "DlqPage",
    "DlqStore",
    "DlqVerb",
    "DueRow",
    "Engine",
    "EnqueueRow",
    "Enqueued",
    "ErrorReply",
    "FailItem",
    "FailResult",
    "FireArgs",
    "JobStore",
    "LateRun",
    "Lease",
    "LeaseRequest",
    "Outage",
    "Park",
    "ProgressItem",
    "Registration",
    "RunCancel",
    "Running",
    "ShardClaim",
    "ShardGate",
    "ShardMove",
    "TaskCancel",
    "TaskFilter",
    "WorkerRegistry",
    "begin_partial_reads",
    "end_partial_reads",
    "ensure_indexes",
    "is_unavailable",
    "key_slot",
    "list_tasks",
    "move_shard",
    "note_left_out",
    "partial_reads",
    "plan_move",
    "queue_loads",
    "refuse_unregistered",
    "running_by_worker",
    "scan_keys",
    "scan_tasks",
    "unavailable_channels",
    "unavailable_shards",
    "unrunnable_counts",
    "unserved_by_task",
    "unserved_refs",
    "unserved_tasks",
]
