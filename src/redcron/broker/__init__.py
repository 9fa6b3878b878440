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

from redcron.broker.argv import EnqueueRow, FailItem
from redcron.broker.broker import Broker, FailResult, Lease, LeaseRequest
from redcron.broker.cancel import RunCancel, TaskCancel
from redcron.broker.channels import ChannelStore
from redcron.broker.cluster_admin import MAX_KEYS as MAX_SHARD_KEYS
from redcron.broker.cluster_admin import ShardMove, move_shard, plan_move
from redcron.broker.connection import key_slot, scan_keys
from redcron.broker.dlq import DLQ_ENTRY_ID, DlqPage, DlqStore, DlqVerb
from redcron.broker.inspect import Running, queue_loads, running_by_worker, unrunnable_counts
from redcron.broker.jobs import JobStore
from redcron.broker.listing import (
    RUN_SCAN,
    Page,
    count_tenants,
    ensure_indexes,
    page_job_runs,
    page_jobs,
    page_runs,
    page_tenants,
)
from redcron.broker.logins import LINK_TTL_S, LoginLinks
from redcron.broker.metrics import ATTEMPT_OUTCOMES, BREAKER_VALUES, Metrics, read_metrics
from redcron.broker.outbox import Claimed, FeedEntry, Outbox
from redcron.broker.partial import (
    begin_partial_reads,
    end_partial_reads,
    note_left_out,
    partial_reads,
    unavailable_channels,
    unavailable_shards,
)
from redcron.broker.registered import refuse_unregistered
from redcron.broker.retry import TRANSIENT, UNAVAILABLE, Outage, ShardGate, is_unavailable
from redcron.broker.shared_secrets import lease_secret
from redcron.broker.stats import activity, trigger_lag, trigger_lag_by_tenant, trigger_lag_of
from redcron.broker.tasklist import TaskFilter, list_tasks, scan_tasks
from redcron.broker.tenants import TenantStore
from redcron.broker.tokens import KINDS as TOKEN_KINDS
from redcron.broker.tokens import OPERATOR, ROLES, VIEWER, TokenStore, digest
from redcron.broker.workers import (
    LEASED_REPUBLISH_S,
    TTL_LEASES,
    Registration,
    WorkerRegistry,
    unserved_by_task,
    unserved_refs,
    unserved_tasks,
)

if TYPE_CHECKING:  # the same names as _LAZY, for the type checker and the reader
    from redcron.broker.actions import OUTCOMES as ACTION_OUTCOMES
    from redcron.broker.actions import (
        Action,
        ActionLog,
        ActionPage,
        Actor,
        record_action,
        valid_action_cursor,
    )
    from redcron.broker.audit import AuditEntry, AuditLog

#: exported name -> (module, its name there), loaded on first use
#: (``tests/unit/test_cli_startup.py`` checks it matches the TYPE_CHECKING block)
_LAZY = {
    "ACTION_OUTCOMES": ("redcron.broker.actions", "OUTCOMES"),
    "Action": ("redcron.broker.actions", "Action"),
    "ActionLog": ("redcron.broker.actions", "ActionLog"),
    "ActionPage": ("redcron.broker.actions", "ActionPage"),
    "Actor": ("redcron.broker.actions", "Actor"),
    "record_action": ("redcron.broker.actions", "record_action"),
    "valid_action_cursor": ("redcron.broker.actions", "valid_action_cursor"),
    "AuditEntry": ("redcron.broker.audit", "AuditEntry"),
    "AuditLog": ("redcron.broker.audit", "AuditLog"),
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
