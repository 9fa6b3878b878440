"""What the library returns: small frozen records, parsed from Redis hashes.

Redis holds plain text (times as ms integers, numbers as digits, '' for
unset); a record holds typed values: timezone-aware UTC ``datetime`` (None
when unset), ints and floats, enums, tuples.  Each ``from_fields`` is a pure
function of a decoded hash (no Redis here), so the parsing is unit-tested on
plain dicts.  ``redcron.model.serialize.to_json`` turns any record into the
JSON the CLI and the REST API print.

One module per area, every name re-exported here (``from
redcron.model.records import TaskRecord`` keeps working):

- ``fields``: parsing one hash field (text, ints, times as ms), and
  ``from_ms`` / ``epoch_ms``;
- ``tasks``: a task instance and its attempts;
- ``runs``: a run of a job;
- ``jobs``: a job, what writing it did, its breaker's events;
- ``tenants``: a tenant's load and status, its DLQ entries;
- ``workers``: live workers and API tokens;
- ``activity``: attempts per minute and trigger lag.

The doctor's records (findings, recounts, its report) live beside the doctor,
in ``redcron.doctor.records``.
"""

from redcron.model.records.activity import LagSummary, MinuteActivity
from redcron.model.records.fields import EPOCH, JSON_TEXT, Fields, epoch_ms, from_ms
from redcron.model.records.jobs import Event, JobChange, JobChangeKind, JobRecord
from redcron.model.records.runs import RunRecord
from redcron.model.records.tasks import (
    AttemptRecord,
    ExpiredTask,
    MapCounts,
    ProgressNote,
    TaskProgress,
    TaskRecord,
)
from redcron.model.records.tenants import DlqEntry, QueueLoad, TenantLoad, TenantStatus
from redcron.model.records.workers import TokenInfo, WorkerInfo

__all__ = [
    "EPOCH",
    "JSON_TEXT",
    "AttemptRecord",
    "DlqEntry",
    "Event",
    "ExpiredTask",
    "Fields",
    "JobChange",
    "JobChangeKind",
    "JobRecord",
    "LagSummary",
    "MapCounts",
    "MinuteActivity",
    "ProgressNote",
    "QueueLoad",
    "RunRecord",
    "TaskProgress",
    "TaskRecord",
    "TenantLoad",
    "TenantStatus",
    "TokenInfo",
    "WorkerInfo",
    "epoch_ms",
    "from_ms",
]
