"""A job as JSON Schema: the body ``POST /v1/jobs`` and ``PUT /v1/jobs/{id}`` take,
which is a job of a job file (:mod:`redcron.model.jobfile`).

Built from the model: the fields are :class:`JobSpec`'s and :class:`Task`'s
(plus the aliases and the short form :mod:`jobfile` normalizes), each
described by the schema of the check that :meth:`JobSpec.validate` runs on it
(:mod:`redcron.model.validation`); ``tests/unit/test_job_schema.py`` holds the
field lists to the dataclasses (a field added to the model without its schema
fails there, not in a running server).  What JSON Schema cannot say stays a 400 naming the field: a
cron expression's fields and whether it ever fires, a time zone's name,
``every``'s bounds, a
``cmd`` string's shell quoting, the DAG (known upstreams, no cycle), the jobs
a job-level ``depends_on`` names, the tenant's grant for command tasks (403),
and that a Python task's arguments fit its function.  What runs in a task is
one of its kinds (``oneOf``: a registered task, a command or an image).
"""

from __future__ import annotations

from typing import Any

from redcron.model import validation
from redcron.model.jobfile import SHORT_TASK_FIELDS
from redcron.model.jobs import (
    CATCHUP_POLICIES,
    MAP_MAX,
    MAP_MAX_LIMIT,
    MAX_DAG_TASKS,
    OVERLAP_POLICIES,
    TASK_ALIASES,
)

Json = dict[str, Any]

__all__ = ["job_body_forms", "job_body_schema", "job_fields", "task_fields"]


def _nullable(schema: Json) -> Json:
    return {"anyOf": [schema, {"type": "null"}]}


_STRING: Json = {"type": "string"}
_NAMES: Json = {"type": "array", "items": validation.name_schema()}
#: a task's ``depends_on``: task names, or one name
_TASK_DEPS: Json = {"anyOf": [{"type": "array", "items": _STRING}, _STRING]}
#: ``cmd``: an argv, or a string split by POSIX shell rules and run without a shell
_CMD: Json = {"anyOf": [validation.argv_schema(), _STRING]}


def task_fields() -> Json:
    """:class:`Task`'s fields; ``task`` is ``ref`` and ``cmd``/``timeout_s`` are
    ``command``/``timeout`` (the job file's and the API's names)."""
    seconds = _nullable(validation.seconds_schema())
    return {
        "ref": _nullable({"type": "string", "minLength": 1}),
        "args": {"type": "array", "items": {}},
        "kwargs": {"type": "object"},
        "command": _nullable(validation.argv_schema()),
        "env": validation.env_schema(),
        "cwd": _nullable(validation.text_schema()),
        "image": _nullable(validation.image_schema()),
        "cpu": _nullable(validation.cpus_schema()),
        "mem": _nullable(validation.mem_schema()),
        "depends_on": _TASK_DEPS,
        "timeout": seconds,
        "retries": _nullable(validation.whole_number_schema()),
        "retry_base": seconds,
        "retry_cap": seconds,
        "priority": _nullable(validation.priority_schema()),
        "queue": _nullable(validation.name_schema()),
        "map_over": _nullable({
            "type": "string",
            "description": "fan-out at run time: the upstream task whose result (a list) "
            "this task is mapped over, one instance per element, or params.<name> for "
            "a list in the run's params",
        }),
        "map_max": _nullable({"type": "integer", "minimum": 1, "maximum": MAP_MAX_LIMIT,
                              "description": f"the most instances the map makes ({MAP_MAX})"}),
    }  # fmt: skip


_NULL: Json = {"type": "null"}
#: a field and its alias may not both be given, whatever their values
_NOT_BOTH: Json = {alias: {"properties": {field: False}} for alias, field in TASK_ALIASES.items()}


def _kind(
    title: str,
    props: Json,
    required: str,
    null: tuple[str, ...],
    absent: tuple[str, ...] = (),
    given: Json | None = None,
) -> Json:
    """One kind of task: ``required`` names what runs (not null), the fields of
    ``null`` may only be null (or left out), those of ``absent`` not be given."""
    out = {k: v for k, v in props.items() if k not in absent}
    out.update({k: _NULL for k in null if k not in absent})
    out.update(given or {})
    return {"type": "object", "title": title, "properties": out, "required": [required],
            "additionalProperties": False}  # fmt: skip


def _task_kinds(prefix: str, extra: Json | None = None) -> list[Json]:
    """A DAG task as one of its kinds (:meth:`Task.validate`: exactly one of a
    registered task, a command or an image is not null; ``task`` is ``ref``'s
    alias, ``cmd`` ``command``'s; an image's command is the container's)."""
    fields = task_fields()
    props = {**fields, **{a: fields[f] for a, f in TASK_ALIASES.items()}, **(extra or {})}
    props["cmd"] = _nullable(_CMD)
    ref = {"type": "string", "minLength": 1, "description": "a registered task"}
    kinds = [
        _kind(f"{prefix}Python", props, "ref", ("command", "cmd", "image"), ("task",),
              {"ref": ref}),
        _kind(f"{prefix}PythonByTask", props, "task", ("command", "cmd", "image"), ("ref",),
              {"task": ref}),
        _kind(f"{prefix}Command", props, "command", ("ref", "task", "image"), ("cmd",),
              {"command": validation.argv_schema()}),
        _kind(f"{prefix}Cmd", props, "cmd", ("ref", "task", "image"), ("command",),
              {"cmd": _CMD}),
        _kind(f"{prefix}Container", props, "image", ("ref", "task"), (),
              {"image": validation.image_schema()}),
    ]  # fmt: skip
    for kind in kinds:
        kind["dependentSchemas"] = {
            a: d for a, d in _NOT_BOTH.items() if a in kind["properties"]
            and next(iter(d["properties"])) in kind["properties"]
        }  # fmt: skip
        if extra:
            kind["required"] = [*kind["required"], *extra]
    return kinds


def _short_task_kinds() -> list[Json]:
    """The short form's ``task``: a registered task's name (a string), or what
    runs and its resources, one kind of four (the job file's rule: exactly one
    of ``name``, ``command`` or ``cmd``, or ``image`` with ``command`` or
    ``cmd`` as its command, counted by the fields given; what runs may not be
    null, an image's command may)."""
    fields = task_fields()
    props = {f: fields[f] for f in SHORT_TASK_FIELDS if f in fields}
    props["cmd"] = _nullable(_CMD)
    name = {"type": "string", "minLength": 1, "description": "a registered task"}
    container = _kind(
        "ShortTaskContainer", props, "image", (), ("name",), {"image": validation.image_schema()}
    )
    container["dependentSchemas"] = {"cmd": _NOT_BOTH["cmd"]}
    return [
        {**name, "title": "ShortTaskName", "description": "a registered task's name"},
        _kind("ShortTaskPython", {**props, "name": name}, "name", (),
              ("command", "cmd", "image")),
        _kind("ShortTaskCommand", props, "command", ("image",), ("name", "cmd"),
              {"command": validation.argv_schema()}),
        _kind("ShortTaskCmd", props, "cmd", ("image",), ("name", "command"), {"cmd": _CMD}),
        container,
    ]  # fmt: skip


def _zone() -> Json:
    """``tz``: an IANA zone name.  Not an enum of the tz database's names: a client
    generator turns one into identifiers, and ``Etc/GMT+0``, ``Etc/GMT-0`` and
    ``GMT0`` collide; whether this server's database holds the name is a 400."""
    return {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)*$",
            "maxLength": 64, "default": "UTC",
            "description": "an IANA time zone, e.g. Europe/Berlin"}  # fmt: skip


def job_fields() -> Json:
    """:class:`JobSpec`'s fields (``tasks`` a DAG: a mapping of task name to task,
    or a list of tasks with a ``name``; a string task is a registered task's name)."""
    task = {"oneOf": _task_kinds("JobTask")}
    named = {"oneOf": _task_kinds("JobNamedTask", {"name": validation.name_schema()})}
    seconds_above = validation.seconds_schema(above=True)
    return {
        "name": validation.name_schema(),
        "tenant": validation.name_schema(),
        "tasks": {"anyOf": [
            {"type": "object", "minProperties": 1, "maxProperties": MAX_DAG_TASKS,
             "propertyNames": validation.name_schema(),
             "additionalProperties": {"anyOf": [task, {"type": "string", "minLength": 1}]}},
            {"type": "array", "minItems": 1, "maxItems": MAX_DAG_TASKS, "items": named},
        ]},
        "cron": _nullable(_STRING),
        "every": _nullable({"type": ["string", "integer"],
                            "description": "e.g. 90s, 5m, 1h30m (a number: seconds)"}),
        "at": _nullable({"type": "string", "format": "date-time",
                         "description": "ISO-8601; without an offset a wall time in tz"}),
        "tz": _zone(),
        "catchup": {"type": "string", "enum": list(CATCHUP_POLICIES)},
        "catchup_limit": validation.whole_number_schema(1),
        "overlap": {"type": "string", "enum": list(OVERLAP_POLICIES)},
        "jitter_s": validation.seconds_schema(),
        "paused": {"type": "boolean"},
        "pause_after_failures": validation.whole_number_schema(),
        "keep_runs": validation.whole_number_schema(1),
        "keep_days": validation.number_schema(maximum=validation.MAX_SECONDS / 86_400),
        "breaker_threshold": validation.number_schema(above=True, maximum=1),
        "breaker_min_attempts": validation.whole_number_schema(1),
        "breaker_window_s": seconds_above,
        "breaker_cooldown_s": seconds_above,
        "depends_on": {"anyOf": [{**_NAMES, "uniqueItems": True}, validation.name_schema()],
                       "description": "other jobs of the tenant (job chaining)"},
        "deadline_s": _nullable({**seconds_above, "description": "a run not ended this long "
                                 "after its nominal fire time is late (docs/operations.md)"}),
    }  # fmt: skip


def job_body_forms(
    required: tuple[str, ...] = ("name",), without: tuple[str, ...] = ()
) -> tuple[Json, Json]:
    """A job's two forms, each a whole object: the job-file form (``tasks``, a DAG)
    and the short form (one ``task``, with the task's ``retries`` and ``timeout_s``
    at the top).  Neither takes the other's fields, so a body is one or the other,
    as the API reads it; ``required``: besides ``tasks`` or ``task``; ``without``:
    fields left out (a replacement keeps the job's name and tenant)."""
    task_fields_ = task_fields()
    fields = {k: v for k, v in job_fields().items() if k not in without}
    dag: Json = {"type": "object", "title": "JobDagBody", "properties": fields,
                 "additionalProperties": False, "required": [*required, "tasks"]}  # fmt: skip
    short_props = {k: v for k, v in fields.items() if k != "tasks"}
    short_props.update(task={"oneOf": _short_task_kinds()}, retries=task_fields_["retries"],
                       timeout_s=task_fields_["timeout"])  # fmt: skip
    short: Json = {"type": "object", "title": "JobShortBody", "properties": short_props,
                   "additionalProperties": False, "required": [*required, "task"]}  # fmt: skip
    return dag, short


def job_body_schema(required: tuple[str, ...] = ("name",)) -> Json:
    """One job, in either form (:func:`job_body_forms`)."""
    return {"oneOf": list(job_body_forms(required))}
