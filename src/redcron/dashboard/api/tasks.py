"""``/v1/tasks``: enqueue a one-off call of a registered task, read a task, cancel it.

Only tasks registered on the App the server runs with (``redcron dashboard
-A module:app``) can be enqueued: the name is checked, the arguments are
bound to the function's signature (a call that does not fit is a 400 naming
``args`` or ``kwargs.<name>``), and the task's declared options are the
defaults the body overrides.  With a unique window or a debounce (declared,
or ``unique_for_s`` / ``debounce_s`` + ``max_wait_s`` in the body, ``unique_key``)
a call may fold into an existing task: 200 with that task and ``duplicate``
true, where a new task is 201 with ``duplicate`` false.
"""

from __future__ import annotations

import contextlib
from typing import Any

import flask

from redcron import tracing
from redcron.dashboard.api import auth
from redcron.dashboard.api.common import (
    ApiError,
    bad,
    body,
    only,
    redcron_app,
    reply,
    unconfirmed,
)
from redcron.dashboard.api.operation import Operation, Routes, link
from redcron.dashboard.api.params import EMPTY_BODY, Json, body_schema
from redcron.dashboard.api.record_schema import ref
from redcron.errors import NotReplicated, RedcronError, ValidationError
from redcron.model import to_json, validation

bp = Routes("tasks", __name__)

#: what a client can do next with the task a reply holds
TASK_LINKS = {
    "GetTask": link("get_task", {"task_id": "$response.body#/id"}),
    "CancelTask": link("cancel_task", {"task_id": "$response.body#/id"}),
}

#: body field -> the per-call option of TaskDef.enqueue it sets
OPTIONS = {
    "tenant": "_tenant",
    "queue": "_queue",
    "priority": "_priority",
    "timeout_s": "_timeout",
    "retries": "_retries",
    "countdown_s": "_countdown",
    # unique windows and debounce (issue 21 §4)
    "unique_for_s": "_unique_for",
    "unique_key": "_unique_key",
    "debounce_s": "_debounce",
    "max_wait_s": "_max_wait",
    "concurrency_key": "_concurrency_key",
}
FIELDS = frozenset({"name", "args", "kwargs", *OPTIONS})
#: a ValidationError's field from TaskDef.enqueue (the Python API's names, with or
#: without their "_") -> the body field that set it
_BODY_NAMES = {option: field for field, option in OPTIONS.items()} | {
    option.lstrip("_"): field for field, option in OPTIONS.items()
}


def _or_null(schema: Json) -> Json:
    return {"anyOf": [schema, {"type": "null"}]}


def body_of(registered: list[str]) -> Json:
    """``POST /v1/tasks``'s body as ``GET /v1/openapi.json`` shows it: ``name``
    one of the tasks the server's app registers.  Whether the arguments fit the
    task's function is checked on the call (400 naming ``args`` or
    ``kwargs.<name>``).  A null option is the task's declared default."""
    name: Json = {"type": "string", "enum": registered} if registered else {"type": "string"}
    # a window counts whole milliseconds (model/dedupe.py): under one is refused
    window: Json = {"type": "number", "minimum": 0.001, "maximum": validation.MAX_SECONDS}
    schema = body_schema({
        "name": name,
        "args": {"type": "array", "items": {}, "default": []},
        # TaskDef.enqueue reads _names as options: set those by their body fields
        "kwargs": {"type": "object", "propertyNames": {"pattern": "^[^_]"}, "default": {}},
        "tenant": _or_null(validation.name_schema()),
        "queue": _or_null(validation.name_schema()),
        "priority": _or_null(validation.priority_schema()),
        "timeout_s": _or_null(validation.seconds_schema()),
        "retries": _or_null(validation.whole_number_schema()),
        "countdown_s": _or_null(validation.seconds_schema()),
        # issue 21: whether they combine (a debounce refuses a countdown, a unique
        # window a debounce) is the call's check, a 400 naming the field
        "unique_for_s": _or_null(window),
        "unique_key": _or_null({"type": "string", "minLength": 1, "maxLength": 256}),
        "debounce_s": _or_null(window),
        "max_wait_s": _or_null(window),
        "concurrency_key": _or_null({"type": "string", "minLength": 1}),
    }, ("name",))  # fmt: skip
    # what the call refuses whatever the task declares (model/dedupe.py): a debounce
    # with a unique window or a countdown (it is the delay: under 1 ms is none), a
    # unique window with max_wait_s (a debounce's cap).  Which need a debounce or
    # a window the task may declare itself (max_wait_s, unique_key alone) is the
    # call's check; so is max_wait_s below debounce_s.
    null: Json = {"type": "null"}
    schema["dependentSchemas"] = {
        "debounce_s": {"if": {"properties": {"debounce_s": {"type": "number"}}},
                       "then": {"properties": {
                           "unique_for_s": null,
                           "countdown_s": {"anyOf": [null, {"type": "number", "minimum": 0,
                                                            "exclusiveMaximum": 0.001}]}}}},
        "unique_for_s": {"if": {"properties": {"unique_for_s": {"type": "number"}}},
                         "then": {"properties": {"debounce_s": null, "max_wait_s": null}}},
    }  # fmt: skip
    return schema


@bp.post(
    "/tasks",
    doc=Operation(
        "enqueue_task",
        "Enqueue a task the server's app registers (200 with duplicate true: the call "
        "folded into an existing task, a unique window's or a debounce's; 202: queued, "
        "but durability=strict's replicas did not confirm it: look the id up, do not "
        "enqueue again)",
        ref("EnqueuedTask"),
        ok=("201", "200"),
        errors=("429",),
        body=ref("TaskBody"),
        links=TASK_LINKS,
    ),
)
def enqueue_task() -> flask.Response:
    data = body()
    only(data, FIELDS)
    auth.tenant_field(data)
    app = redcron_app()
    name = data.get("name")
    if not isinstance(name, str) or not name:
        bad("name", "must be the name of a registered task")
    if name not in app.tasks:
        known = ", ".join(sorted(app.tasks)) or "none (start the server with -A module:app)"
        bad("name", f"unknown task {name!r}; registered tasks: {known}")
    args = data.get("args", [])
    if not isinstance(args, list):
        bad("args", "must be a list of positional arguments")
    kwargs = data.get("kwargs", {})
    if not isinstance(kwargs, dict):
        bad("kwargs", "must be an object of keyword arguments")
    for key in kwargs:
        if key.startswith("_"):
            # TaskDef.enqueue reads _names as options; set those by their body fields
            bad(f"kwargs.{key}", "keyword arguments may not start with '_'")
    options: dict[str, Any] = {
        option: data[field] for field, option in OPTIONS.items() if data.get(field) is not None
    }
    try:
        # a caller's W3C traceparent: its trace goes on through the task (docs/observability.md)
        with tracing.incoming(flask.request.headers):
            handle = app.tasks[name].enqueue(*args, **kwargs, **options)
    except ValidationError as exc:
        # the Python API's names for two options: name the body's fields
        field = _BODY_NAMES.get(exc.field, exc.field)
        raise ApiError(400, "invalid", exc.message, field) from exc
    except NotReplicated as exc:
        return _queued_unconfirmed(exc)
    return reply({**to_json(handle.info()), "duplicate": handle.duplicate},
                 200 if handle.duplicate else 201)  # fmt: skip


def _queued_unconfirmed(exc: NotReplicated) -> flask.Response:
    """202: the task is queued on the master (it will run) but its replicas did
    not confirm it: its record when it can be read, else its id."""
    (task_id,) = exc.task_ids or [""]
    record: dict[str, Any] = {"id": task_id}
    # the master just failed, or a new one has not got it yet: the id alone
    with contextlib.suppress(RedcronError):
        record = to_json(redcron_app().get(task_id).info())
    return unconfirmed(exc, record)


@bp.get(
    "/tasks/<path:task_id>",  # a run's task ids hold a slash: <run>/<task>
    doc=Operation("get_task", "A task instance", ref("Task"), errors=("404",)),
)
def get_task(task_id: str) -> flask.Response:
    task = auth.task(task_id)
    slots = redcron_app().broker.inspection.concurrency(task)
    if slots is None:
        return reply(task)
    # a keyed task: its key's slots too (holders, waiters, its place)
    return reply({**to_json(task), "concurrency": to_json(slots)})


@bp.get(
    "/tasks/<path:task_id>/cancel",
    doc=Operation(
        "get_task_named_cancel",
        "The task whose id is {task_id}/cancel (a run's task named cancel: "
        "GET /v1/tasks/{task_id} reads the same)",
        ref("Task"),
        errors=("404",),
    ),
)
def get_task_named_cancel(task_id: str) -> flask.Response:
    """A run's task may be named ``cancel``: its id is ``<run id>/cancel``, so
    ``GET /v1/tasks/<run id>/cancel`` reads it.  A rule of its own, so that the URL
    map, ``Allow`` and the document all say GET is served here beside POST."""
    return get_task(f"{task_id}/cancel")


@bp.post(
    "/tasks/<path:task_id>/cancel",
    doc=Operation(
        "cancel_task",
        "Cancel a task: it ends cancelled at once; 409 if it had ended",
        ref("TaskCancel"),
        errors=("404", "409"),
        body=EMPTY_BODY,
        body_required=False,
    ),
)
def cancel_task(task_id: str) -> flask.Response:
    """End the task cancelled wherever it is: ``{id, state, cancelled,
    may_still_be_running}`` (a leased attempt's code may go on until its worker's
    next heartbeat; a Python thread runs to its end, its result refused); 409
    naming the state it had already ended in."""
    only(body(required=False), EMPTY_BODY["properties"])
    task = auth.task(task_id)
    done = redcron_app().broker.cancel(task.id)
    if not done.cancelled:
        raise ApiError(409, "conflict", f"task {task.id} already ended {done.state}")
    return reply(done)
