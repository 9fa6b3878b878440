"""The schemas of ``GET /v1/openapi.json``'s components: each request body from
the definitions its route checks it with, and the replies.

Request bodies come from where the checks are: a job from the model
(:mod:`redcron.model.job_schema`), a tenant's settings from
:func:`redcron.model.tenants.settings_schema`, the worker protocol's bodies
from ``worker.py``, a task's from ``tasks.py``; each is built from the
constants the checks use (patterns, ranges, choices) and the route refuses a
field its schema does not list.

Replies come from the records the routes answer (:mod:`record_schema`: each
field of the dataclass with its type, every one required, nullable where the
type says so; states as the model's enums), plus what a route adds;
``tests/integration/test_api_replies.py`` checks real replies of every route
against them, field by field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redcron.dashboard.api import tasks, tokens, worker, worker_progress
from redcron.dashboard.api.params import body_schema
from redcron.dashboard.api.record_schema import (
    enum_schema,
    extended,
    nullable,
    record_schema,
    ref,
)
from redcron.dashboard.api.runs import RunTask
from redcron.engine import Running, TaskCancel
from redcron.keys import PRIORITIES
from redcron.model import channels
from redcron.model.channels import ChannelInfo, Delivery
from redcron.model.concurrency import ConcurrencySlots
from redcron.model.job_schema import job_body_forms
from redcron.model.jobs import OVERLAP_POLICIES
from redcron.model.progress import MESSAGE_MAX, RECENT_MAX
from redcron.model.records import (
    AttemptRecord,
    DlqEntry,
    JobRecord,
    ProgressNote,
    RunRecord,
    TaskProgress,
    TaskRecord,
    TenantStatus,
    TokenInfo,
    WorkerInfo,
)
from redcron.model.states import EXPIRED, RunState, TaskState
from redcron.model.tenants import TenantSettings, settings_schema
from redcron.store import (
    ACTION_OUTCOMES,
    ATTEMPT_OUTCOMES,
    BREAKER_VALUES,
    ROLES,
    TOKEN_KINDS,
    Action,
)

Json = dict[str, Any]


#: a task's kinds (``TaskRecord.kind``, a lease's ``kind``)
TASK_KINDS = ("python", "command", "container")
_STRINGS: Json = {"type": "array", "items": {"type": "string"}}
#: a run's task whose record expired with its retention shows this state
_RUN_TASK_STATE: Json = {"type": "string", "enum": [*TaskState, EXPIRED]}


#: a 202's fields: written on the master, its replicas did not confirm it in time
#: (durability=strict; docs/api.md, "Not replicated")
UNCONFIRMED: Json = {
    "replicated": {"type": "boolean", "enum": [False], "description": "false: written on "
                   "the master, not yet confirmed by its replicas; look it up, do not resend"},
    "message": {"type": "string", "description": "why it is not confirmed"},
}  # fmt: skip


def _unconfirmed(ids: Json, description: str) -> Json:
    """A 202's body: ``ids`` (required) and :data:`UNCONFIRMED`."""
    return {"type": "object", "required": [*ids, *UNCONFIRMED], "description": description,
            "properties": {**ids, **UNCONFIRMED}}  # fmt: skip


def _enum(values: Sequence[str], description: str | None = None) -> Json:
    out: Json = {"type": "string", "enum": list(values)}
    if description:
        out["description"] = description
    return out


def _job() -> Json:
    return record_schema(JobRecord, fields={
        "overlap": _enum(OVERLAP_POLICIES),
        "breaker": _enum(list(BREAKER_VALUES), "the circuit breaker's state"),
        "chained_by": nullable(_enum(["upstreams", "trigger"])),
        "change": nullable(_enum(["created", "updated", "unchanged"], "what the write that "
                                 "answered the job did; null on a read")),
    })  # fmt: skip


def _run() -> Json:
    return record_schema(RunRecord, fields={
        "tasks": nullable({"type": "array", "items": ref("RunTask"), "description": "the "
                           "run's tasks in DAG order (GET /v1/runs/{run_id}); null in a "
                           "listing"}),
    })  # fmt: skip


def _worker() -> Json:
    return record_schema(WorkerInfo, fields={"via": _enum(["redis", "http"])}, extra={
        "holding": {"type": "array", "items": record_schema(Running), "description": "the "
                    "tasks it holds now (of the token's tenant only, for a tenant token)"},
    })  # fmt: skip


def _worker_lease() -> Json:
    """One lease of ``POST /v1/worker/lease`` (``worker._leased``): the common fields,
    and those of the task's kind."""
    any_object: Json = {"type": "object", "additionalProperties": True}
    return {"type": "object", "properties": {
        "lease_id": {"type": "string", "description":
                     "signed fencing token; only the token that leased reports on it"},
        "task_id": {"type": "string"}, "kind": _enum(TASK_KINDS),
        "attempt": {"type": "integer"}, "max_attempts": {"type": "integer"},
        "timeout_s": {"type": ["number", "null"]}, "ttl_s": {"type": "number"},
        "idem_key": {"type": "string"}, "tenant": {"type": "string"},
        "queue": {"type": "string"},
        "traceparent": {"type": ["string", "null"], "description": "the W3C trace context "
                        "of the span that enqueued the task or fired its run: the parent of "
                        "the worker's span (null: not traced)"},
        "tracestate": {"type": ["string", "null"], "description": "W3C tracestate "
                       "travelling with traceparent (null: none)"},
        "upstream": {**any_object, "description": "a task of a run: each upstream task's "
                     "result (any JSON) by its name in the job's DAG; {} for a task that "
                     "depends on none; absent for a one-off task"},
        # kind python
        "name": {"type": "string", "description": "kind python: the registered task"},
        "args": {"type": "array", "items": {}, "description": "kind python"},
        "kwargs": {**any_object, "description": "kind python"},
        # kind command
        "command": {**_STRINGS, "description": "kind command: the argv"},
        "env": {"type": "object", "additionalProperties": {"type": "string"},
                "description": "kind command"},
        "cwd": {"type": ["string", "null"], "description": "kind command"},
        # kind container
        "container": {**any_object, "description": "kind container: the image and its "
                      "options"}},
        "required": ["lease_id", "task_id", "kind", "attempt", "max_attempts", "timeout_s",
                     "ttl_s", "idem_key", "tenant", "queue", "traceparent",
                     "tracestate"]}  # fmt: skip


def replies() -> Json:
    """The reply schemas, from the records the routes answer (``record_schema``)."""
    task = record_schema(TaskRecord, fields={
        "kind": _enum(TASK_KINDS), "priority": _enum(PRIORITIES),
        "args": {"description": "the arguments: [args, kwargs] for a Python task, "
                 "{argv, env, cwd} for a command"},
        "result": {"description": "the return value (any JSON); null until it succeeded"},
        "item": {"description": "an instance of a mapped task: its element of the list its "
                 "task is mapped over (any JSON); null for any other task"},
    }, optional={"concurrency": {**ref("ConcurrencySlots"), "description": "GET of a task "
                                 "with a concurrency key: its key's slots"}})  # fmt: skip
    run = _run()
    return {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {
                "type": "object", "required": ["code", "message", "field"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"},
                               "field": {"type": ["string", "null"]}}}},
        },
        "TaskState": enum_schema(TaskState),
        "RunState": enum_schema(RunState),
        "Attempt": record_schema(AttemptRecord, fields={
            "outcome": nullable(_enum(ATTEMPT_OUTCOMES, "null while the attempt runs"))}),
        "ConcurrencySlots": record_schema(ConcurrencySlots),
        "TaskProgress": record_schema(TaskProgress, fields={
            "done": {"type": "number", "minimum": 0},
            "total": {"type": ["number", "null"], "exclusiveMinimum": 0,
                      "description": "null: unknown"},
            "message": {"type": ["string", "null"], "maxLength": MESSAGE_MAX},
            "recent": {"type": "array", "maxItems": RECENT_MAX, "items": record_schema(
                ProgressNote, fields={"message": {"type": "string",
                                                  "maxLength": MESSAGE_MAX}}),
                       "description": "the last messages, oldest first"}}),
        "Job": _job(),
        "JobCreated": extended(_job(), {"warnings": {**_STRINGS, "description": "the "
                               "Python tasks no live worker serves"}}),
        "RunTask": record_schema(RunTask, fields={"state": _RUN_TASK_STATE}),
        "Run": run,
        "RunCancel": extended(run, {
            "may_still_be_running": {"type": "boolean", "description": "a task was leased: "
                                     "it ended cancelled, but its code may run until its "
                                     "worker's next heartbeat (a Python thread runs to its "
                                     "end)"},
            "still_running": _STRINGS}),
        "Task": task,
        "EnqueuedTask": extended(task, {"duplicate": {"type": "boolean", "description":
                                        "the call folded into this existing task (a unique "
                                        "window's or a debounce's)"}}),
        # durability=strict, replicas behind (docs/api.md, "Not replicated"): the
        # write was done on the master; the body names what to look up
        "Unconfirmed": _unconfirmed({}, "Written on the master, not yet confirmed by its "
                                    "replicas: do not resend") | {"properties": {
            **UNCONFIRMED, "ids": {**_STRINGS, "description": "ids the write created"}}},
        "UnconfirmedTask": _unconfirmed({"id": {"type": "string"}}, "The task is queued on "
                                        "the master (it will run), not yet confirmed by its "
                                        "replicas: do not enqueue again, look the id up; the "
                                        "task's other fields when it could be read"),
        "UnconfirmedRun": _unconfirmed({"run_id": {"type": "string"}}, "The run was created "
                                       "on the master, not yet confirmed by its replicas: do "
                                       "not trigger again, look the run up"),
        "TaskCancel": record_schema(TaskCancel, fields={"state": ref("TaskState")}),
        "TenantSettingsValues": record_schema(TenantSettings,
                                              fields={"max_priority": _enum(PRIORITIES)}),
        "TenantStatus": record_schema(TenantStatus, optional={"unavailable_shards": {
            "type": "array", "items": {"type": "integer"}, "description": "present only when "
            "some shards did not answer (a Redis Cluster master down): the dispatch share "
            "is over the shards that did"}}),
        "DlqEntry": record_schema(DlqEntry),
        "Worker": _worker(),
        "WorkerLease": _worker_lease(),
        "WorkerReport": {"type": "object", "required": ["task_id", "state"], "properties": {
            "task_id": {"type": "string"}, "state": ref("TaskState"),
            "retry_in_s": {"type": ["number", "null"], "description": "fail: seconds until "
                           "the retry (null: no retry)"}}},
        "WorkerProgress": {"type": "object", "required": ["task_id", "done"], "properties": {
            "task_id": {"type": "string"}, "done": {"type": "number"},
            "total": {"type": "number"}, "message": {"type": "string"}},
            "description": "What was stored (total and message only when given)"},
        "Channel": record_schema(ChannelInfo, fields={
            "kind": _enum(channels.KINDS),
            "url": {"type": "string", "description": "without path (slack) or query "
                    "(webhook)"},
            "events": {"type": "array", "items": _enum(channels.EVENT_TYPES)}}),
        "Delivery": record_schema(Delivery, fields={
            "outcome": _enum(["delivered", "failed", "expired"])}),
        "Action": record_schema(Action, fields={
            "id": {"type": "string", "description": "stream entry id: <server ms>-<seq>"},
            "who": {"type": "string", "description": "a token id, admin (the configured "
                    "admin token) or cli:<user>"},
            "via": _enum(["api", "page", "cli"]), "outcome": _enum(ACTION_OUTCOMES)},
            description="One recorded action (docs/operations.md, Roles and the audit "
                        "trail); never a token's secret"),
        "Token": record_schema(TokenInfo, fields={
            "kind": _enum(TOKEN_KINDS), "role": _enum(["", *ROLES], "admin and tenant "
                                                      "tokens; empty for a worker token")},
            description="An API token: never its secret"),
        "TokenCreated": {"type": "object", "required": ["token", "secret"], "properties": {
            "token": ref("Token"),
            "secret": {"type": "string", "description": "the bearer token, <id>.<secret>: "
                       "shown this once, stored only as a hash"}}},
    }  # fmt: skip


def _lift(schema: Any, found: Json) -> Any:
    """``schema`` with each titled object or enum inside it (a kind of task, the
    time zones) replaced by a ``$ref`` to a component of that title, collected in
    ``found``: a generator makes a model of each component, and gives up on an
    object inline in a union; the zones are listed once."""
    if isinstance(schema, list):
        return [_lift(s, found) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _lift(v, found) for k, v in schema.items()}
    title = out.get("title")
    if title and (out.get("type") == "object" or "enum" in out):
        found[title] = out
        return ref(title)
    return out


def _job_bodies() -> Json:
    """A job's bodies (POST; PUT, without name and tenant: given, they must be the
    job's own) in either form, each a model of its own for a generated client,
    with the kinds of task as components."""
    found: Json = {}
    post = job_body_forms()
    put = job_body_forms(required=(), without=("name", "tenant"))
    out: Json = {}
    for i, name in enumerate(("JobDagBody", "JobShortBody")):
        out[name] = {**post[i], "properties": _lift(post[i]["properties"], found)}
        replace = name.replace("Body", "ReplaceBody")
        out[replace] = {**put[i], "title": replace,
                        "properties": _lift(put[i]["properties"], found)}  # fmt: skip
    return {**found, **out,
            "JobBody": {"oneOf": [ref("JobDagBody"), ref("JobShortBody")]},
            "JobReplaceBody": {"oneOf": [ref("JobDagReplaceBody"),
                                         ref("JobShortReplaceBody")]}}  # fmt: skip


def schemas(registered: Sequence[str], allow: Sequence[str] = ()) -> Json:
    """Every component schema; ``registered``: the task names ``POST /v1/tasks`` takes,
    ``allow``: the hosts a channel URL may name (the notification allowlist)."""
    return {
        **replies(),
        **_job_bodies(),
        "TaskBody": tasks.body_of(list(registered)),
        # a partial update: a field left out keeps its value, so no defaults (a
        # generated client would send them, resetting what it did not name)
        "TenantSettings": body_schema(
            {
                k: {f: v for f, v in schema.items() if f != "default"}
                for k, schema in settings_schema().items()
            }
        ),
        "ChannelBody": body_schema(channels.body_properties(allow), ("url",)),
        "TokenBody": tokens.BODY,
        "WorkerLeaseBody": worker.LEASE_BODY,
        "WorkerHeartbeatBody": worker.HEARTBEAT_BODY,
        "WorkerCompleteBody": worker.COMPLETE_BODY,
        "WorkerProgressBody": worker_progress.BODY,
        "WorkerFailBody": worker.FAIL_BODY,
    }
