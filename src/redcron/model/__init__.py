"""The records the library returns, and the one serializer for them (no Redis here)."""

from redcron.model.records import (
    AttemptRecord,
    DlqEntry,
    Event,
    ExpiredTask,
    JobChange,
    JobRecord,
    RunRecord,
    TaskRecord,
    TenantLoad,
)
from redcron.model.serialize import to_json

__all__ = [
    "AttemptRecord",
    "DlqEntry",
    "Event",
    "ExpiredTask",
    "JobChange",
    "JobRecord",
    "RunRecord",
    "TaskRecord",
    "TenantLoad",
    "to_json",
]
