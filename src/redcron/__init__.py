"""redcron: multi-tenant cron-as-a-service and a task queue on Redis."""

from redcron.app import App, TaskDef, TaskHandle
from redcron.config import Settings
from redcron.context import Context
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
from redcron.model.jobs import JobSpec, Task

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
