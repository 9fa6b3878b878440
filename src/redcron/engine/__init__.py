"""All Redis I/O lives in this package.

The faces (``cli/``, ``dashboard/``) and the chaos tool reach Redis through
``App`` and the names exported here, never through a submodule
(``tests/unit/test_imports.py`` checks it): which module a store or a reader
lives in is this package's business, and may change without touching them.

The action record and the attempt audit are loaded on first use (PEP 562,
:data:`_LAZY`): the App, the worker and the beat never use them.  The doctor
is a package of its own (``redcron.doctor``), a tool over this one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from redcron.engine.argv import EnqueueRow, FailItem
from redcron.engine.broker import Broker, FailResult, Lease, LeaseRequest
from redcron.engine.cancel import RunCancel, TaskCancel
from redcron.engine.channels import ChannelStore
from redcron.engine.cluster_admin import MAX_KEYS as MAX_SHARD_KEYS
from redcron.engine.cluster_admin import ShardMove, move_shard, plan_move
from redcron.engine.connection import key_slot, scan_keys
from redcron.engine.dlq import DLQ_ENTRY_ID, DlqPage, DlqStore, DlqVerb
from redcron.engine.inspect import Running, queue_loads, running_by_worker, unrunnable_counts
from redcron.engine.jobs import JobStore
from redcron.engine.listing import (
    RUN_SCAN,
    Page,
    count_tenants,
    ensure_indexes,
    page_job_runs,
    page_jobs,
    page_runs,
    page_tenants,
)
from redcron.engine.logins import LINK_TTL_S, LoginLinks
from redcron.engine.metrics import ATTEMPT_OUTCOMES, BREAKER_VALUES, Metrics, read_metrics
from redcron.engine.outbox import Claimed, FeedEntry, Outbox
from redcron.engine.partial import (
    begin_partial_reads,
    end_partial_reads,
    note_left_out,
    partial_reads,
    unavailable_channels,
    unavailable_shards,
)
from redcron.engine.registered import refuse_unregistered
from redcron.engine.retry import TRANSIENT, UNAVAILABLE, Outage, ShardGate, is_unavailable
from redcron.engine.shared_secrets import lease_secret
from redcron.engine.stats import activity, trigger_lag, trigger_lag_by_tenant, trigger_lag_of
from redcron.engine.tasklist import TaskFilter, list_tasks, scan_tasks
from redcron.engine.tenants import TenantStore
from redcron.engine.tokens import KINDS as TOKEN_KINDS
from redcron.engine.tokens import OPERATOR, ROLES, VIEWER, TokenStore, digest
from redcron.engine.workers import (
    LEASED_REPUBLISH_S,
    TTL_LEASES,
    Registration,
    WorkerRegistry,
    unserved_by_task,
    unserved_refs,
    unserved_tasks,
)

if TYPE_CHECKING:  # the same names as _LAZY, for the type checker and the reader
    from redcron.engine.actions import OUTCOMES as ACTION_OUTCOMES
    from redcron.engine.actions import (
        Action,
        ActionLog,
        ActionPage,
        Actor,
        record_action,
        valid_action_cursor,
    )
    from redcron.engine.audit import AuditEntry, AuditLog

#: exported name -> (module, its name there), loaded on first use
#: (``tests/unit/test_cli_startup.py`` checks it matches the TYPE_CHECKING block)
_LAZY = {
    "ACTION_OUTCOMES": ("redcron.engine.actions", "OUTCOMES"),
    "Action": ("redcron.engine.actions", "Action"),
    "ActionLog": ("redcron.engine.actions", "ActionLog"),
    "ActionPage": ("redcron.engine.actions", "ActionPage"),
    "Actor": ("redcron.engine.actions", "Actor"),
    "record_action": ("redcron.engine.actions", "record_action"),
    "valid_action_cursor": ("redcron.engine.actions", "valid_action_cursor"),
    "AuditEntry": ("redcron.engine.audit", "AuditEntry"),
    "AuditLog": ("redcron.engine.audit", "AuditLog"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # once: the next look-up is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ACTION_OUTCOMES",
    "ATTEMPT_OUTCOMES",
    "BREAKER_VALUES",
    "DLQ_ENTRY_ID",
    "LEASED_REPUBLISH_S",
    "LINK_TTL_S",
    "MAX_SHARD_KEYS",
    "OPERATOR",
    "ROLES",
    "RUN_SCAN",
    "TOKEN_KINDS",
    "TRANSIENT",
    "TTL_LEASES",
    "UNAVAILABLE",
    "VIEWER",
    "Action",
    "ActionLog",
    "ActionPage",
    "Actor",
    "AuditEntry",
    "AuditLog",
    "Broker",
    "ChannelStore",
    "Claimed",
    "DlqPage",
    "DlqStore",
    "DlqVerb",
    "EnqueueRow",
    "FailItem",
    "FailResult",
    "FeedEntry",
    "JobStore",
    "Lease",
    "LeaseRequest",
    "LoginLinks",
    "Metrics",
    "Outage",
    "Outbox",
    "Page",
    "Registration",
    "RunCancel",
    "Running",
    "ShardGate",
    "ShardMove",
    "TaskCancel",
    "TaskFilter",
    "TenantStore",
    "TokenStore",
    "WorkerRegistry",
    "activity",
    "begin_partial_reads",
    "count_tenants",
    "digest",
    "end_partial_reads",
    "ensure_indexes",
    "is_unavailable",
    "key_slot",
    "lease_secret",
    "list_tasks",
    "move_shard",
    "note_left_out",
    "page_job_runs",
    "page_jobs",
    "page_runs",
    "page_tenants",
    "partial_reads",
    "plan_move",
    "queue_loads",
    "read_metrics",
    "record_action",
    "refuse_unregistered",
    "running_by_worker",
    "scan_keys",
    "scan_tasks",
    "trigger_lag",
    "trigger_lag_by_tenant",
    "trigger_lag_of",
    "unavailable_channels",
    "unavailable_shards",
    "unrunnable_counts",
    "unserved_by_task",
    "unserved_refs",
    "unserved_tasks",
    "valid_action_cursor",
]
