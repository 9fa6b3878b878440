"""What is data, and its validation; no Redis, no processes.

- ``jobs``: job specs and the DAG of a job's tasks (``JobSpec``, ``Task``).
- ``jobfile``: job files (YAML/JSON) into specs.
- ``tenants``: a tenant's dispatch settings.
- ``states``: task and run states (the Lua tables are generated from them).
- ``validation``: the checks every number and name coming in goes through.
- ``binding``: does a call's ``[args, kwargs]`` fit a task function's signature.
- ``records``: what the library returns (a task, a job, a run...), and
  ``serialize``: the one JSON form of them (CLI ``--json``, the API).
"""

from redcron.model.records import (
    AttemptRecord,
    DlqEntry,
    DoctorReport,
    DoctorSummary,
    Event,
    ExpiredTask,
    Finding,
    JobChange,
    JobRecord,
    LagSummary,
    MinuteActivity,
    QueueLoad,
    RunRecord,
    TaskRecord,
    TenantLoad,
    TenantRecount,
    TenantStatus,
    TokenInfo,
    WorkerInfo,
)
from redcron.model.serialize import to_json

__all__ = [
    "AttemptRecord",
    "DlqEntry",
    "DoctorReport",
    "DoctorSummary",
    "Event",
    "ExpiredTask",
    "Finding",
    "JobChange",
    "JobRecord",
    "LagSummary",
    "MinuteActivity",
    "QueueLoad",
    "RunRecord",
    "TaskRecord",
    "TenantLoad",
    "TenantRecount",
    "TenantStatus",
    "TokenInfo",
    "WorkerInfo",
    "to_json",
]
