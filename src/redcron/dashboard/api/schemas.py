"""The schemas of ``GET /v1/openapi.json``'s components: each request body from
the definitions its route checks it with, and the replies.

Request bodies come from where the checks are: a job from the model
(:mod:`redcron.model.job_schema`), a tenant's settings from
:func:`redcron.model.tenants.settings_schema`, the worker protocol's bodies
from ``worker.py``, a task's from ``tasks.py``; each is built from the
constants the checks use (patterns, ranges, choices) and the route refuses a
field its schema does not list.  Replies are described here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redcron.dashboard.api import tasks, worker
from redcron.dashboard.api.params import body_schema
from redcron.model import channels
from redcron.model.job_schema import job_body_schema
from redcron.model.tenants import settings_schema

Json = dict[str, Any]


def ref(name: str) -> Json:
    return {"$ref": f"#/components/schemas/{name}"}


_OBJECT: Json = {"type": "object"}

_TIME: Json = {"type": ["string", "null"], "format": "date-time"}
#: a 202's fields: written on the master, its replicas did not confirm it in time
#: (durability=strict; docs/api.md, "Not replicated")
UNCONFIRMED: Json = {
    "replicated": {"type": "boolean", "description": "202 only, false: written on the "
                   "master, not yet confirmed by its replicas; look it up, do not resend"},
    "message": {"type": "string", "description": "202 only: why it is not confirmed"},
}  # fmt: skip

REPLIES: Json = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "object", "required": ["code", "message", "field"],
                                 "properties": {"code": {"type": "string"},
                                                "message": {"type": "string"},
                                                "field": {"type": ["string", "null"]}}}},
    },
    "Job": {"type": "object", "properties": {
        "id": {"type": "string"}, "tenant": {"type": "string"}, "name": {"type": "string"},
        "paused": {"type": "boolean"}, "next_fire": _TIME,
        "parked_reason": {"type": ["string", "null"], "description": "why the beat took the "
                          "job off the schedule; cleared by an update (PUT) or resume"},
        "parked_at": _TIME,
        "depends_on": {"type": "array", "items": {"type": "string"}},
        "chained_by": {"type": ["string", "null"], "enum": ["upstreams", "trigger", None]},
        "waiting_for": {"type": "array", "items": {"type": "string"}, "description": "upstream "
                        "jobs without a succeeded run since this job's last chained or "
                        "scheduled run"},
        "waiting_fire": _TIME}},
    "Run": {"type": "object", "properties": {
        "id": {"type": "string"}, "job_id": {"type": "string"}, "state": {"type": "string"},
        "created_at": _TIME, "ended_at": _TIME,
        "tasks": {"type": ["array", "null"], "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "id": {"type": ["string", "null"]},
            "state": {"type": "string"}, "attempts": {"type": "integer"},
            "started_at": _TIME, "ended_at": _TIME,
            "exit_code": {"type": ["integer", "null"]},
            "error": {"type": ["string", "null"]}}}}}},
    "RunCancel": {"allOf": [ref("Run"), {"type": "object", "properties": {
        "may_still_be_running": {"type": "boolean", "description": "a task was leased: it "
                                 "ended cancelled, but its code may run until its worker's "
                                 "next heartbeat (a Python thread runs to its end)"},
        "still_running": {"type": "array", "items": {"type": "string"}}}}]},
    "TaskCancel": {"type": "object", "properties": {
        "id": {"type": "string"}, "state": {"type": "string"},
        "cancelled": {"type": "boolean"}, "may_still_be_running": {"type": "boolean"}}},
    "Unconfirmed": {"type": "object", "required": ["replicated", "message"],
                    "description": "written on the master, not yet confirmed by its "
                    "replicas (durability=strict): do not resend; docs/api.md, "
                    "Not replicated", "properties": {
        **UNCONFIRMED, "ids": {"type": "array", "items": {"type": "string"},
                               "description": "ids the write created, if any"}}},
    "Task": {"type": "object", "properties": {
        "id": {"type": "string"}, "name": {"type": "string"}, "state": {"type": "string"},
        "attempt": {"type": "integer"}, "error": {"type": ["string", "null"]},
        "duplicate": {"type": "boolean", "description": "POST /v1/tasks: the call folded "
                      "into this existing task (a unique window's or a debounce's)"},
        **UNCONFIRMED}},
    "TenantStatus": {"type": "object", "properties": {
        "tenant": {"type": "string"},
        "settings": {"type": "object", "properties": settings_schema()},
        "in_flight": {"type": "integer"}, "queued": {"type": "integer"},
        "dispatched_last_minute": {"type": "integer"},
        "share_last_minute": {"type": "number"}}},
    "DlqEntry": {"type": "object", "properties": {
        "task_id": {"type": "string"}, "tenant": {"type": "string"},
        "name": {"type": "string"}, "error": {"type": ["string", "null"]}, "dead_at": _TIME}},
    "WorkerLease": {"type": "object", "properties": {
        "lease_id": {"type": "string", "description":
                     "signed fencing token; only the token that leased reports on it"},
        "task_id": {"type": "string"}, "kind": {"enum": ["python", "command", "container"]},
        "name": {"type": "string"}, "args": {"type": "array"}, "kwargs": _OBJECT,
        "command": {"type": "array", "items": {"type": "string"}}, "env": _OBJECT,
        "cwd": {"type": ["string", "null"]}, "container": _OBJECT,
        "attempt": {"type": "integer"}, "max_attempts": {"type": "integer"},
        "timeout_s": {"type": ["number", "null"]}, "ttl_s": {"type": "number"},
        "idem_key": {"type": "string"}, "tenant": {"type": "string"},
        "queue": {"type": "string"}}},
    "Channel": {"type": "object", "properties": {
        "id": {"type": "string"}, "kind": {"enum": list(channels.KINDS)},
        "name": {"type": "string"}, "tenant": {"type": ["string", "null"]},
        "url": {"type": "string", "description": "without path (slack) or query (webhook)"},
        "events": {"type": "array", "items": {"enum": list(channels.EVENT_TYPES)}},
        "timeout_s": {"type": "number"}, "created_at": _TIME}},
    "Delivery": {"type": "object", "properties": {
        "id": {"type": "string"}, "delivery": {"type": "string"}, "type": {"type": "string"},
        "outcome": {"enum": ["delivered", "failed", "expired"]},
        "status": {"type": ["integer", "null"]}, "attempt": {"type": "integer"},
        "error": {"type": ["string", "null"]}, "at": _TIME}},
    "Action": {"type": "object", "description": "One recorded action (docs/operations.md, "
               "Roles and the audit trail); never a token's secret", "properties": {
        "id": {"type": "string", "description": "stream entry id: <server ms>-<seq>"},
        "at": _TIME, "who": {"type": "string", "description": "a token id, admin (the "
                             "configured admin token) or cli:<user>"},
        "kind": {"type": "string"}, "role": {"type": "string"},
        "via": {"enum": ["api", "page", "cli"]}, "action": {"type": "string"},
        "tenant": {"type": ["string", "null"]},
        "ids": {"type": "array", "items": {"type": "string"}},
        "outcome": {"enum": ["ok", "refused", "error"]},
        "status": {"type": ["integer", "null"]}, "detail": {"type": ["string", "null"]}}},
    "WorkerReport": {"type": "object", "properties": {
        "task_id": {"type": "string"}, "state": {"type": "string"},
        "retry_in_s": {"type": ["number", "null"]}}},
}  # fmt: skip


def schemas(registered: Sequence[str], allow: Sequence[str] = ()) -> Json:
    """Every component schema; ``registered``: the task names ``POST /v1/tasks`` takes,
    ``allow``: the hosts a channel URL may name (the notification allowlist)."""
    return {
        **REPLIES,
        "JobBody": job_body_schema(),
        # PUT keeps the job's name and tenant: left out, they are the job's
        "JobReplaceBody": {k: v for k, v in job_body_schema().items() if k != "required"},
        "TaskBody": tasks.body_of(list(registered)),
        "TenantSettings": body_schema(settings_schema()),
        "ChannelBody": body_schema(channels.body_properties(allow), ("url",)),
        "WorkerLeaseBody": worker.LEASE_BODY,
        "WorkerHeartbeatBody": worker.HEARTBEAT_BODY,
        "WorkerCompleteBody": worker.COMPLETE_BODY,
        "WorkerFailBody": worker.FAIL_BODY,
    }
