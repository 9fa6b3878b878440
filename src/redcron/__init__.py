"""redcron: multi-tenant cron-as-a-service and a task queue on Redis.

``App`` and the names that come with it are loaded on first use (PEP 562,
:data:`_LAZY`): every ``redcron`` command imports this package first, and
``redcron --help`` should not pay for the App, the broker and Redis.  The
settings and the errors are loaded at once; they are small.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from redcron.config import Settings
from redcron.errors import (
    ConfigError,
    Conflict,
    LeaseLost,
    NotFound,
    NotReplicated,
    Permanent,
    RedcronError,
    RedisUnavailable,
    Rejected,
    Retry,
    TaskFailed,
    TaskTimeout,
    ValidationError,
)

if TYPE_CHECKING:  # the same names as _LAZY, for the type checker and the reader
    from redcron.app import App, TaskDef, TaskHandle
    from redcron.context import Context
    from redcron.model.jobs import JobSpec, Task

#: name -> the module it is loaded from on first use (``tests/unit/test_cli_startup.py``
#: checks it names what the TYPE_CHECKING block imports)
_LAZY = {
    "App": "redcron.app",
    "TaskDef": "redcron.app",
    "TaskHandle": "redcron.app",
    "Context": "redcron.context",
    "JobSpec": "redcron.model.jobs",
    "Task": "redcron.model.jobs",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: the next look-up is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "App",
    "ConfigError",
    "Conflict",
    "Context",
    "JobSpec",
    "LeaseLost",
    "NotFound",
    "NotReplicated",
    "Permanent",
    "RedcronError",
    "RedisUnavailable",
    "Rejected",
    "Retry",
    "Settings",
    "Task",
    "TaskDef",
    "TaskFailed",
    "TaskHandle",
    "TaskTimeout",
    "ValidationError",
]
