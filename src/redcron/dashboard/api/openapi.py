"""``GET /v1/openapi.json``: the API described in OpenAPI 3.1.

Written by hand next to the routes; ``tests/integration/test_api.py`` checks
that every ``/v1`` URL rule and method is here and nothing else is.
"""

from __future__ import annotations

from typing import Any

import flask

bp = flask.Blueprint("openapi", __name__)

Json = dict[str, Any]


def _ref(name: str) -> Json:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: Json) -> Json:
    return {"content": {"application/json": {"schema": schema}}}


ERRORS: dict[str, str] = {
    "400": "Bad input; error.field names the field",
    "404": "Unknown id",
    "409": "The object's state does not allow it",
    "413": "Body over the size limit (MAX_CONTENT_LENGTH, 1 MiB by default)",
    "429": "Admission refused (tenant at max_queued); see Retry-After",
    "403": "The caller's token does not allow it (e.g. a queue a worker token lacks)",
    "409L": "The lease is no longer held (cancelled, reaped or superseded); nothing was written",
    "403L": "The lease_id is not genuine (altered, made up, or signed by another deployment) "
    "or was leased with another token; nothing was written",
}


def _op(
    summary: str,
    ok: str,
    schema: Json | None,
    errors: tuple[str, ...] = ("404",),
    request: Json | None = None,
    query: tuple[tuple[str, ...], ...] = (),
) -> Json:
    responses: Json = {ok: {"description": "OK", **(_json(schema) if schema else {})}}
    for code in errors:
        # "409L", "403L": second meanings of 409 and 403 (the worker routes' leases)
        responses[code[:3]] = {"description": ERRORS[code], **_json(_ref("Error"))}
    op: Json = {"summary": summary, "responses": responses}
    if request is not None:
        op["requestBody"] = {"required": True, **_json(request)}
    if query:
        # (name, type) or (name, type, description)
        op["parameters"] = [
            {
                "name": q[0],
                "in": "query",
                "required": False,
                "schema": {"type": q[1]},
                **({"description": q[2]} if len(q) > 2 else {}),
            }
            for q in query
        ]
    return op


def _path(*names: str) -> list[Json]:
    string = {"type": "string"}
    return [{"name": n, "in": "path", "required": True, "schema": string} for n in names]


_OBJECT: Json = {"type": "object"}
_BODY_ERRORS = ("400", "404", "413")

#: the query arguments and reply field every paged list shares
_LIMIT = ("limit", "integer", "Entries per page, 1..500 (default 50)")
_CURSOR = ("cursor", "string", "The next_cursor of the previous page, passed back as it is")
_NEXT_CURSOR: Json = {
    "type": ["string", "null"],
    "description": "Pass as cursor for the next page; null on the last page",
}
_STATE_PAGES = (
    "Only runs in this state; a page then reads at most 1,000 runs, so it may hold "
    "fewer than limit while next_cursor is not null: page until it is"
)

PATHS: Json = {
    "/v1/jobs": {
        "post": _op("Create or update a job (keyed by tenant + name); warnings name the "
                    "Python tasks no live worker serves", "201", {"allOf": [_ref("Job"), {
                        "type": "object", "required": ["warnings"], "properties": {
                            "warnings": {"type": "array", "items": {"type": "string"}}}}]},
                    ("400", "413"), _ref("JobBody")),
        "get": _op("Jobs by tenant and name, a page at a time (no cursor: the first page)",
                   "200", {"type": "object", "properties": {
                       "jobs": {"type": "array", "items": _ref("Job")},
                       "next_cursor": _NEXT_CURSOR}}, ("400",),
                   query=(("tenant", "string"), _LIMIT, _CURSOR)),
    },
    "/v1/jobs/{job_id}": {
        "parameters": _path("job_id"),
        "get": _op("A job", "200", _ref("Job")),
        "put": _op("Replace a job's spec", "200", _ref("Job"), _BODY_ERRORS, _ref("JobBody")),
        "delete": _op("Delete a job", "204", None),
    },
    "/v1/jobs/{job_id}/pause": {
        "parameters": _path("job_id"),
        "post": _op("Pause a job", "200", _ref("Job")),
    },
    "/v1/jobs/{job_id}/resume": {
        "parameters": _path("job_id"),
        "post": _op("Resume a job", "200", _ref("Job")),
    },
    "/v1/jobs/{job_id}/trigger": {
        "parameters": _path("job_id"),
        "post": _op("Start a manual run now", "201", {"type": "object", "properties": {
            "run_id": {"type": "string"}}}, ("400", "404", "429")),
    },
    "/v1/runs": {
        "get": _op("Runs, newest first, a page at a time", "200", {"type": "object", "properties": {
            "runs": {"type": "array", "items": _ref("Run")},
            "next_cursor": _NEXT_CURSOR}}, ("400", "404"),
            query=(("job", "string"), ("state", "string", _STATE_PAGES), ("tenant", "string"),
                   _LIMIT, _CURSOR)),
    },
    "/v1/runs/{run_id}": {
        "parameters": _path("run_id"),
        "get": _op("A run with its tasks", "200", _ref("Run")),
    },
    "/v1/runs/{run_id}/cancel": {
        "parameters": _path("run_id"),
        "post": _op("Cancel a run: every live task ends cancelled at once", "200",
                    _ref("RunCancel"), ("404", "409")),
    },
    "/v1/runs/{run_id}/tasks/{name}/cancel": {
        "parameters": _path("run_id", "name"),
        "post": _op("Cancel one task of a run", "200", _ref("RunCancel"), ("404", "409")),
    },
    "/v1/runs/{run_id}/tasks/{name}/retry": {
        "parameters": _path("run_id", "name"),
        "post": _op("Retry one failed task of a run", "200", _ref("Run"), ("404", "409")),
    },
    "/v1/tasks": {
        "post": _op("Enqueue a registered task (200 with duplicate true: it folded into an "
                    "existing task, a unique key's or a debounce's)", "201", _ref("Task"),
                    ("400", "413", "429"), _ref("TaskBody")),
    },
    "/v1/tasks/{task_id}": {
        "parameters": _path("task_id"),
        "get": _op("A task instance", "200", _ref("Task")),
    },
    "/v1/tasks/{task_id}/cancel": {
        "parameters": _path("task_id"),
        "post": _op("Cancel a task: it ends cancelled at once; 409 if it had ended", "200",
                    _ref("TaskCancel"), ("404", "409")),
    },
    "/v1/tenants/{tenant}": {
        "parameters": _path("tenant"),
        "get": _op("A tenant's settings and live figures", "200", _ref("TenantStatus"), ("400",)),
        "put": _op("Change some settings", "200", _ref("TenantStatus"), ("400", "413"),
                   _ref("TenantSettings")),
    },
    "/v1/tenants/{tenant}/dlq": {
        "parameters": _path("tenant"),
        "get": _op("Dead tasks of a tenant, oldest first, a page at a time", "200",
                   {"type": "object", "properties": {
                       "entries": {"type": "array", "items": _ref("DlqEntry")},
                       "next_cursor": _NEXT_CURSOR}}, ("400",),
                   query=(("limit", "integer", "Entries per page, 1..1000 (default 100)"),
                          _CURSOR)),
    },
    "/v1/dlq": {
        "get": _op("Dead tasks of every tenant (a tenant token: its own) by tenant, oldest "
                   "first, a page at a time", "200", {"type": "object", "properties": {
                       "entries": {"type": "array", "items": _ref("DlqEntry")},
                       "next_cursor": _NEXT_CURSOR}}, ("400",),
                   query=(("tenant", "string"), ("name", "string"), _LIMIT, _CURSOR)),
    },
    "/v1/workers": {
        "get": _op("Live workers by id, a page at a time, each with the tasks it holds "
                   "(a tenant token: the workers serving it, its own tasks)", "200",
                   {"type": "object", "properties": {
                       "workers": {"type": "array", "items": {"type": "object"}},
                       "next_cursor": _NEXT_CURSOR}}, ("400",),
                   query=(_LIMIT, _CURSOR)),
    },
    "/v1/channels": {
        "get": _op("Notification channels (admin: every one, or tenant's; a tenant token: "
                   "its own)", "200", {"type": "object", "properties": {
                       "channels": {"type": "array", "items": _ref("Channel")}}}, ("400",),
                   query=(("tenant", "string"),)),
        "post": _op("Add a channel (a tenant token: for its tenant; the admin: for tenant, "
                    "or every tenant's events without one); secret is shown this once",
                    "201", {"type": "object", "properties": {
                        "channel": _ref("Channel"), "secret": {"type": ["string", "null"]}}},
                    ("400", "413"), _ref("ChannelBody")),
    },
    "/v1/channels/{channel_id}": {
        "parameters": _path("channel_id"),
        "get": _op("One channel and its pending deliveries", "200", {"type": "object",
                   "properties": {"channel": _ref("Channel"), "pending": {"type": "integer"}}}),
        "delete": _op("Remove a channel with what it still had to send", "200", _ref("Channel")),
    },
    "/v1/channels/{channel_id}/test": {
        "parameters": _path("channel_id"),
        "post": _op("Queue a test message for the notifier to send", "202", {"type": "object",
                    "properties": {"delivery": {"type": "string"}}}),
    },
    "/v1/channels/{channel_id}/deliveries": {
        "parameters": _path("channel_id"),
        "get": _op("The channel's delivery log, newest first (bounded)", "200",
                   {"type": "object", "properties": {
                       "deliveries": {"type": "array", "items": _ref("Delivery")},
                       "pending": {"type": "integer"}}}, ("400", "404"),
                   query=(("limit", "integer", "Lines, 1..1000 (default 50)"),)),
    },
    "/v1/tenants/{tenant}/dlq/{task_id}/replay": {
        "parameters": _path("tenant", "task_id"),
        "post": _op("Replay one dead task", "200", _ref("Task"), ("400", "404", "409")),
    },
    "/v1/tenants/{tenant}/dlq/{task_id}/discard": {
        "parameters": _path("tenant", "task_id"),
        "post": _op("Discard one dead task for good (it ends cancelled)", "200", _ref("Task"),
                    ("400", "404", "409")),
    },
    "/v1/worker/lease": {
        "post": _op("Lease attempts to run (HTTP worker); long-polls up to wait_s", "200",
                    {"type": "array", "items": _ref("WorkerLease")}, ("400", "403", "413"),
                    _ref("WorkerLeaseBody")),
    },
    "/v1/worker/heartbeat": {
        "post": _op("Renew leases: each answers ok, revoked (cancelled) or lost", "200",
                    {"type": "object", "additionalProperties": {
                        "enum": ["ok", "revoked", "lost"]}}, ("400", "403L", "413"),
                    {"type": "object", "required": ["worker_id", "lease_ids"], "properties": {
                        "worker_id": {"type": "string"},
                        "lease_ids": {"type": "array", "items": {"type": "string"}}}}),
    },
    "/v1/worker/complete": {
        "post": _op("Report an attempt done", "200", _ref("WorkerReport"),
                    ("400", "403L", "409L", "413"),
                    {"type": "object", "required": ["lease_id"], "properties": {
                        "lease_id": {"type": "string"}, "result": {}}}),
    },
    "/v1/worker/fail": {
        "post": _op("Report an attempt failed (retried or dead-lettered)", "200",
                    _ref("WorkerReport"), ("400", "403L", "409L", "413"),
                    {"type": "object", "required": ["lease_id"], "properties": {
                        "lease_id": {"type": "string"}, "error": {"type": "string"},
                        "retryable": {"type": "boolean"},
                        "exit_code": {"type": ["integer", "null"]},
                        "retry_in_s": {"type": ["number", "null"]}}}),
    },
    "/v1/audit": {
        "get": _op("Who did what, newest first: every state-changing request (a tenant "
                   "token: its own tenant's)", "200", {"type": "object", "properties": {
                       "actions": {"type": "array", "items": _ref("Action")},
                       "next_cursor": _NEXT_CURSOR}}, ("400",),
                   query=(("tenant", "string"), _LIMIT, _CURSOR)),
    },
    "/v1/openapi.json": {
        "get": {**_op("This document", "200", _OBJECT, ()), "security": []},  # no token
    },
}  # fmt: skip

#: a viewer token (reads only) is refused every method that changes state, before
#: the route runs (auth.refuse_viewer); the worker routes say their own 403
_VIEWER_403: Json = {
    "description": "The token may not: a viewer token (reads only) on any route that "
    "changes state, or a route that needs the admin token",
    **_json(_ref("Error")),
}
for _route, _item in PATHS.items():
    for _method, _operation in _item.items():
        if _method in ("post", "put", "patch", "delete") and not _route.startswith("/v1/worker/"):
            _operation["responses"].setdefault("403", _VIEWER_403)

_TIME: Json = {"type": ["string", "null"], "format": "date-time"}

SCHEMAS: Json = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "object", "required": ["code", "message", "field"],
                                 "properties": {"code": {"type": "string"},
                                                "message": {"type": "string"},
                                                "field": {"type": ["string", "null"]}}}},
    },
    "JobBody": {
        "type": "object",
        "description": "A job as in a job file (tasks: a DAG), or the design's short form "
        "with one task {name | command | cmd | image, args, cpu, mem} and retries, timeout_s; "
        "a string cmd is split by POSIX shell rules and run without a shell. depends_on "
        "names other jobs of the tenant (job chaining, docs/api.md).",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"}, "tenant": {"type": "string"},
            "cron": {"type": "string"}, "every": {"type": "string"},
            "at": {"type": "string", "format": "date-time"}, "tz": {"type": "string"},
            "tasks": {"type": ["object", "array"]}, "task": _OBJECT,
            "retries": {"type": "integer"}, "timeout_s": {"type": "number"},
            "paused": {"type": "boolean"},
            "depends_on": {"type": ["array", "string"], "items": {"type": "string"}},
        },
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
    "RunCancel": {"allOf": [_ref("Run"), {"type": "object", "properties": {
        "may_still_be_running": {"type": "boolean", "description": "a task was leased: it "
                                 "ended cancelled, but its code may run until its worker's "
                                 "next heartbeat (a Python thread runs to its end)"},
        "still_running": {"type": "array", "items": {"type": "string"}}}}]},
    "TaskCancel": {"type": "object", "properties": {
        "id": {"type": "string"}, "state": {"type": "string"},
        "cancelled": {"type": "boolean"}, "may_still_be_running": {"type": "boolean"}}},
    "TaskBody": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"}, "args": {"type": "array"}, "kwargs": _OBJECT,
        "tenant": {"type": "string"}, "queue": {"type": "string"},
        "priority": {"type": "string"}, "timeout_s": {"type": "number"},
        "retries": {"type": "integer"}, "countdown_s": {"type": "number"},
        "unique_for_s": {"type": "number"}, "unique_key": {"type": "string"},
        "debounce_s": {"type": "number"}, "max_wait_s": {"type": "number"}}},
    "Task": {"type": "object", "properties": {
        "id": {"type": "string"}, "name": {"type": "string"}, "state": {"type": "string"},
        "attempt": {"type": "integer"}, "error": {"type": ["string", "null"]}}},
    "TenantSettings": {"type": "object", "properties": {
        "weight": {"type": "number"}, "max_in_flight": {"type": "integer"},
        "rate": {"type": ["number", "string"]}, "burst": {"type": "integer"},
        "max_queued": {"type": "integer"}, "max_priority": {"type": "string"},
        "jitter_s": {"type": "number"}, "allow_commands": {"type": "boolean"}}},
    "TenantStatus": {"type": "object", "properties": {
        "tenant": {"type": "string"}, "settings": _ref("TenantSettings"),
        "in_flight": {"type": "integer"}, "queued": {"type": "integer"},
        "dispatched_last_minute": {"type": "integer"},
        "share_last_minute": {"type": "number"}}},
    "DlqEntry": {"type": "object", "properties": {
        "task_id": {"type": "string"}, "name": {"type": "string"},
        "error": {"type": ["string", "null"]}, "dead_at": _TIME}},
    "Channel": {"type": "object", "properties": {
        "id": {"type": "string"}, "kind": {"enum": ["webhook", "slack"]},
        "name": {"type": "string"}, "tenant": {"type": ["string", "null"]},
        "url": {"type": "string", "description": "without path (slack) or query (webhook)"},
        "events": {"type": "array", "items": {"type": "string"}},
        "timeout_s": {"type": "number"}, "created_at": _TIME}},
    "ChannelBody": {"type": "object", "required": ["url"], "properties": {
        "tenant": {"type": "string"}, "kind": {"enum": ["webhook", "slack"]},
        "url": {"type": "string"}, "name": {"type": "string"},
        "events": {"type": "array", "items": {"type": "string"}},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 30}}},
    "Delivery": {"type": "object", "properties": {
        "id": {"type": "string"}, "delivery": {"type": "string"}, "type": {"type": "string"},
        "outcome": {"enum": ["delivered", "failed", "expired"]},
        "status": {"type": ["integer", "null"]}, "attempt": {"type": "integer"},
        "error": {"type": "string"}, "at": _TIME}},
    "WorkerLeaseBody": {"type": "object", "required": ["worker_id"], "properties": {
        "worker_id": {"type": "string"},
        "capacity": {"type": "object", "properties": {
            "slots": {"type": "integer", "minimum": 1, "maximum": 256},
            "cpu": {"type": "number"}, "mem": {"type": ["integer", "string"]}}},
        "queues": {"type": "array", "items": {"type": "string"}},
        "wait_s": {"type": "number", "minimum": 0, "maximum": 30}}},
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
    "Action": {"type": "object", "description": "One recorded action (docs/operations.md, "
               "Roles and the audit trail); never a token's secret", "properties": {
        "id": {"type": "string", "description": "stream entry id: <server ms>-<seq>"},
        "at": _TIME, "who": {"type": "string", "description": "a token id, admin (the "
                             "configured admin token) or cli:<user>"},
        "kind": {"enum": ["admin", "tenant", "cli"]}, "role": {"enum": ["operator", "viewer"]},
        "via": {"enum": ["api", "page", "cli"]}, "action": {"type": "string"},
        "tenant": {"type": ["string", "null"]},
        "ids": {"type": "array", "items": {"type": "string"}},
        "outcome": {"enum": ["ok", "refused", "error"]},
        "status": {"type": ["integer", "null"]}, "detail": {"type": "string"}}},
    "WorkerReport": {"type": "object", "properties": {
        "task_id": {"type": "string"}, "state": {"type": "string"},
        "retry_in_s": {"type": ["number", "null"]}}},
}  # fmt: skip

DOCUMENT: Json = {
    "openapi": "3.1.0",
    "info": {"title": "redcron API", "version": "1"},
    "paths": PATHS,
    "components": {
        "schemas": SCHEMAS,
        # the admin token, a tenant token or a worker token (docs/api.md)
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    },
    "security": [{"bearer": []}],
}


@bp.get("/openapi.json")
def openapi_json() -> flask.Response:
    return flask.jsonify(DOCUMENT)
