"""The control plane on Redis: who may do what, what was done, who is told,
and what the faces list and count.

Tokens and login links (:class:`TokenStore`, :class:`LoginLinks`), the
deployment's shared secrets, the action record and the attempt audit,
notification channels and their outbox, tenant settings
(:class:`TenantStore`), the listings the faces page over, and the figures of
``/metrics`` and the overview.  None of it decides what runs: that is
``redcron.engine``'s, which this package imports (its client core,
:class:`~redcron.engine.Core`) and which never imports this one.

The faces reach it through the names exported here, never a submodule
(``tests/unit/test_imports.py``).  The action record and the attempt audit are
loaded on first use (PEP 562, :data:`_LAZY`): the App, the worker and the beat
never use them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from redcron.store.channels import ChannelStore
from redcron.store.listing import (
    RUN_SCAN,
    Page,
    count_tenants,
    page_job_runs,
    page_jobs,
    page_runs,
    page_tenants,
)
from redcron.store.logins import LINK_TTL_S, LoginLinks
from redcron.store.metrics import ATTEMPT_OUTCOMES, BREAKER_VALUES, Metrics, read_metrics
from redcron.store.outbox import Claimed, FeedEntry, Outbox
from redcron.store.shared_secrets import lease_secret
from redcron.store.stats import activity, trigger_lag, trigger_lag_by_tenant, trigger_lag_of
from redcron.store.tenants import TenantStore
from redcron.store.tokens import KINDS as TOKEN_KINDS
from redcron.store.tokens import OPERATOR, ROLES, VIEWER, TokenStore, digest

if TYPE_CHECKING:  # the same names as _LAZY, for the type checker and the reader
    from redcron.store.actions import OUTCOMES as ACTION_OUTCOMES
    from redcron.store.actions import (
        Action,
        ActionLog,
        ActionPage,
        Actor,
        record_action,
        valid_action_cursor,
    )
    from redcron.store.audit import AuditEntry, AuditLog

#: exported name -> (module, its name there), loaded on first use
#: (``tests/unit/test_cli_startup.py`` checks it matches the TYPE_CHECKING block)
_LAZY = {
    "ACTION_OUTCOMES": ("redcron.store.actions", "OUTCOMES"),
    "Action": ("redcron.store.actions", "Action"),
    "ActionLog": ("redcron.store.actions", "ActionLog"),
    "ActionPage": ("redcron.store.actions", "ActionPage"),
    "Actor": ("redcron.store.actions", "Actor"),
    "record_action": ("redcron.store.actions", "record_action"),
    "valid_action_cursor": ("redcron.store.actions", "valid_action_cursor"),
    "AuditEntry": ("redcron.store.audit", "AuditEntry"),
    "AuditLog": ("redcron.store.audit", "AuditLog"),
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
    "LINK_TTL_S",
    "OPERATOR",
    "ROLES",
    "RUN_SCAN",
    "TOKEN_KINDS",
    "VIEWER",
    "Action",
    "ActionLog",
    "ActionPage",
    "Actor",
    "AuditEntry",
    "AuditLog",
    "ChannelStore",
    "Claimed",
    "FeedEntry",
    "LoginLinks",
    "Metrics",
    "Outbox",
    "Page",
    "TenantStore",
    "TokenStore",
    "activity",
    "count_tenants",
    "digest",
    "lease_secret",
    "page_job_runs",
    "page_jobs",
    "page_runs",
    "page_tenants",
    "read_metrics",
    "record_action",
    "trigger_lag",
    "trigger_lag_by_tenant",
    "trigger_lag_of",
    "valid_action_cursor",
]
