"""Job files: jobs declared in YAML or JSON, loaded and validated before any write.

A file holds one job mapping, a list of jobs, or ``{jobs: [...]}``.  Tasks
are a mapping (``name: {...}``, or ``name: registered.task.name`` for a
Python task without arguments) or a list of mappings with a ``name``::

    jobs:
      - name: nightly
        cron: "0 2 * * *"
        tz: Europe/Berlin
        tasks:
          extract: examples.tasks.add
          load:
            command: [sh, -c, "echo load"]
            depends_on: [extract]

A job may also be written in the short form of the design's API body: one
``task`` ({name | command | image, cmd, cpu, mem, ...}, or just a registered
task's name) with the task's ``retries`` and ``timeout_s`` at the job's top
level (``POST /v1/jobs`` takes the same).  A task's ``cmd`` is its
``command``: a list is the argv; a string is split into one by POSIX shell
quoting rules (``shlex.split``) and run without a shell (write ``[sh, -c,
"..."]`` for pipes, ``&&`` or ``$VAR``).  ``timeout_s`` is ``timeout``
(seconds).  A job-level ``depends_on`` names
other jobs of the tenant (job chaining, docs/api.md).

Every error is a :class:`JobFileError` naming the file, the job and the
field, e.g. ``jobs.yaml: job 'nightly': tasks.load.depends_on: unknown task
'extrct'``.  YAML keys given twice in one mapping are errors (plain YAML
keeps the last one silently, which would drop a task).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Hashable, Iterable, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode

from redcron.errors import ValidationError
from redcron.model.jobs import SHORT_TASK_POLICIES, JobSpec, spec_from_dict

__all__ = ["SHORT_TASK_POLICIES", "JobFileError", "load_job_files", "load_jobs", "parse_jobs"]

#: the short form's ``task``: what runs and its resources
SHORT_TASK_FIELDS = frozenset(
    {"name", "command", "cmd", "image", "args", "kwargs", "env", "cwd", "cpu", "mem", "queue",
     "priority"}
)  # fmt: skip
#: what the short form's ``task`` looks like, for the errors that refuse one
SHORT_TASK_EXAMPLE = (
    "give a registered task's name (task: examples.tasks.add) or a mapping, e.g. "
    'task: {name: examples.tasks.add, args: [1, 2]}, task: {cmd: "echo hi"} or '
    'task: {image: alpine:3.20, cmd: "echo hi", cpu: 0.5, mem: 256M}'
)
YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class JobFileError(ValidationError):
    """A job file is unreadable, malformed or declares an invalid job."""

    def __init__(self, source: str, job: str | None, field: str, message: str) -> None:
        parts = [source] + ([job] if job else []) + ([field] if field else [])
        # ValidationError renders "<field>: <message>"; the field carries the whole path
        super().__init__(": ".join(parts), message)
        self.source = source
        self.job = job
        self.job_field = field


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


class StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: dict[Any, int] = {}
        for key_node, _value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue  # keys merged in with "<<" may be overridden on purpose
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # unhashable: SafeLoader reports it below
            line = key_node.start_mark.line + 1
            if first is not None:
                raise _DuplicateKey(
                    None,
                    None,
                    f"duplicate key {key!r} (first given on line {first})",
                    key_node.start_mark,
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _read(path: Path, source: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise JobFileError(source, None, "", f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise JobFileError(source, None, "", f"not UTF-8 text: {exc}") from exc
    suffix = path.suffix.lower()
    if suffix in JSON_SUFFIXES:
        try:
            return json.loads(text, object_pairs_hook=_no_duplicates)
        except json.JSONDecodeError as exc:
            raise JobFileError(source, None, f"line {exc.lineno}", exc.msg) from exc
        except ValueError as exc:  # from _no_duplicates
            raise JobFileError(source, None, "", str(exc)) from exc
    if suffix in YAML_SUFFIXES:
        try:
            return yaml.load(text, Loader=StrictLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f"line {mark.line + 1}" if mark is not None else ""
            problem = exc.problem or exc.context or "invalid YAML"
            raise JobFileError(source, None, where, problem) from exc
        except yaml.YAMLError as exc:
            raise JobFileError(source, None, "", f"invalid YAML: {exc}") from exc
    raise JobFileError(
        source, None, "", f"unknown file type {suffix or '(none)'!r}; use .yaml, .yml or .json"
    )


def _job_list(data: Any, source: str) -> list[Any]:
    if data is None:
        raise JobFileError(source, None, "", "the file is empty; declare at least one job")
    if isinstance(data, list):
        return data
    if isinstance(data, Mapping):
        if "jobs" in data:
            extra = sorted(str(k) for k in data if k != "jobs")
            if extra:
                raise JobFileError(
                    source,
                    None,
                    extra[0] or '""',  # an empty key is named too (else the path ends there)
                    "unknown top-level key; a file with 'jobs' holds only it",
                )
            jobs = data["jobs"]
            if not isinstance(jobs, list):
                raise JobFileError(source, None, "jobs", "must be a list of jobs")
            return jobs
        return [data]
    raise JobFileError(
        source, None, "", "must hold a job mapping, a list of jobs, or a mapping {jobs: [...]}"
    )


def _label(raw: Any, index: int) -> str:
    name = raw.get("name") if isinstance(raw, Mapping) else None
    return f"job {name!r}" if isinstance(name, str) and name else f"job #{index + 1}"


def _field(inner: str) -> str:
    # spec_from_dict is called with where="" so its paths start with "."
    return inner.lstrip(".")


def _message(exc: ValidationError) -> str:
    text = str(exc)
    head = f"{exc.field}: "
    return text[len(head) :] if text.startswith(head) else text


def _normalize(raw: Mapping[str, Any], label: str, source: str) -> dict[str, Any]:
    """Friendly forms YAML and JSON users write, turned into what JobSpec takes."""
    data = dict(raw)
    if "task" in data:
        data = _short_form(data, label, source)
    else:
        for key in SHORT_TASK_POLICIES:
            if key in data:
                raise JobFileError(
                    source, label, key, "set it per task in tasks (or use the short form with task)"
                )
    deps = data.get("depends_on")
    if isinstance(deps, str):
        data["depends_on"] = [deps]  # one upstream job, not the letters of its name
    at = data.get("at")
    if isinstance(at, str):
        try:
            data["at"] = datetime.fromisoformat(at.strip())
        except ValueError as exc:
            raise JobFileError(
                source,
                label,
                "at",
                f"{at!r} is not an ISO-8601 date and time, e.g. 2026-11-29T02:00:00Z "
                "(without an offset it is a wall time in tz)",
            ) from exc
    elif isinstance(at, date) and not isinstance(at, datetime):
        raise JobFileError(
            source, label, "at", f"{at.isoformat()} is a date; give a time too, e.g. {at}T02:00:00Z"
        )
    elif at is not None and not isinstance(at, datetime):
        raise JobFileError(source, label, "at", f"{at!r} is not an ISO-8601 date and time")
    for fname in ("cron", "every", "tz", "name", "tenant"):
        value = data.get(fname)
        if fname == "every" and isinstance(value, int) and not isinstance(value, bool):
            data[fname] = str(value)  # every: 90 means 90 seconds
        elif value is not None and not isinstance(value, str):
            raise JobFileError(source, label, fname, f"{value!r} must be a string")
    tasks = data.get("tasks")
    if isinstance(tasks, Mapping):
        data["tasks"] = {k: _normalize_task(str(k), v, label, source) for k, v in tasks.items()}
    elif isinstance(tasks, list):
        data["tasks"] = [
            _normalize_task(str(t.get("name", f"[{i}]")), t, label, source)
            if isinstance(t, Mapping)
            else t
            for i, t in enumerate(tasks)
        ]
    return data


def _short_form(data: dict[str, Any], label: str, source: str) -> dict[str, Any]:
    """``task`` (one task) and its top-level ``retries``/``timeout_s`` as ``tasks``:
    a one-task DAG whose task is named as the job."""
    if "tasks" in data:
        raise JobFileError(
            source, label, "task", "give either task (one task) or tasks (a DAG), not both"
        )
    task = data.pop("task")
    if isinstance(task, str) and task:
        task = {"name": task}  # task: examples.tasks.add, as a task of tasks may be written
    if not isinstance(task, Mapping):
        raise JobFileError(source, label, "task", f"{task!r} is not a task; {SHORT_TASK_EXAMPLE}")
    bad = {str(k) for k in task} - SHORT_TASK_FIELDS
    if bad:
        raise JobFileError(
            source,
            label,
            f"task.{min(bad)}",
            f"unknown field; known: {', '.join(sorted(SHORT_TASK_FIELDS))}",
        )
    runs = [k for k in ("name", "command", "cmd") if k in task]
    if "image" in task:
        runs = [k for k in runs if k == "name"]  # command/cmd is then the container's
        runs.append("image")
    if len(runs) != 1:
        raise JobFileError(
            source,
            label,
            "task",
            "give exactly one of name (a registered task), command or cmd (a command), "
            f"or image (a container, cmd its command) (got {', '.join(runs) or 'none'})",
        )
    node = dict(task)
    if "name" in node:
        node["ref"] = node.pop("name")
    for key in SHORT_TASK_POLICIES:
        if key in data:
            node[key] = data.pop(key)
    name = data.get("name")
    data["tasks"] = {name if isinstance(name, str) and name else "task": node}
    return data


def _normalize_task(tname: str, task: Any, label: str, source: str) -> Any:
    if not isinstance(task, Mapping):
        return task
    task = _task_aliases(tname, task, label, source)
    if "depends_on" not in task:
        return task
    deps = task["depends_on"]
    if isinstance(deps, str):
        # depends_on: extract is one dependency, not the letters of "extract"
        deps = [deps]
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise JobFileError(
            source, label, f"tasks.{tname}.depends_on", "must be a list of task names"
        )
    return {**task, "depends_on": list(deps)}


def _task_aliases(tname: str, task: Mapping[str, Any], label: str, source: str) -> Any:
    """The API's names for a task's fields: ``cmd`` (``command``; a string is
    split with POSIX shell quoting, never run by a shell) and ``timeout_s``
    (``timeout``)."""
    out = dict(task)
    for alias, fname in (("cmd", "command"), ("timeout_s", "timeout")):
        if alias not in out:
            continue
        if fname in out:
            raise JobFileError(
                source, label, f"tasks.{tname}.{alias}", f"give {alias} or {fname}, not both"
            )
        value = out.pop(alias)
        if alias == "cmd" and isinstance(value, str):
            try:
                value = shlex.split(value)
            except ValueError as exc:
                raise JobFileError(
                    source, label, f"tasks.{tname}.cmd", f"{value!r} cannot be split: {exc}"
                ) from exc
        out[fname] = value
    return out


def parse_jobs(data: Any, source: str) -> list[JobSpec]:
    """Build and validate the jobs of already-parsed file content.

    Raises JobFileError on the first bad job; returns only when every job is valid.
    """
    specs: list[JobSpec] = []
    seen: dict[tuple[str, str], str] = {}
    for i, raw in enumerate(_job_list(data, source)):
        label = _label(raw, i)
        if not isinstance(raw, Mapping):
            raise JobFileError(source, label, "", "must be a mapping of job fields")
        try:
            spec = spec_from_dict(_normalize(raw, label, source), where="")
            spec.validate()
        except JobFileError:
            raise
        except ValidationError as exc:
            raise JobFileError(source, label, _field(exc.field), _message(exc)) from exc
        except TypeError as exc:  # a field of the wrong shape reached a dataclass
            raise JobFileError(source, label, "", str(exc)) from exc
        key = (spec.tenant, spec.name)
        if key in seen:
            raise JobFileError(
                source,
                label,
                "name",
                f"job {spec.name!r} of tenant {spec.tenant!r} is declared twice",
            )
        seen[key] = label
        specs.append(spec)
    return specs


def load_jobs(path: str | Path) -> list[JobSpec]:
    """Every job of a YAML (.yaml/.yml) or JSON file, each validated.

    Raises:
        JobFileError: the file cannot be read or parsed, or a job is invalid;
            the message names the file, the job and the field.
    """
    p = Path(path)
    source = str(path)
    return parse_jobs(_read(p, source), source)


def load_job_files(
    paths: Iterable[str | Path], defaults: Mapping[str, Any] | None = None
) -> list[JobSpec]:
    """The jobs of several files, all validated before returning; a job
    (tenant + name) declared in two files is an error.  With the deployment's
    task ``defaults`` (``job_defaults``), each task's retry backoff is checked
    against them too (:meth:`JobSpec.check_backoff`), the error naming the file."""
    specs: list[JobSpec] = []
    where: dict[tuple[str, str], str] = {}
    for path in paths:
        for spec in load_jobs(path):
            if defaults is not None:
                try:
                    spec.check_backoff(defaults)
                except ValidationError as exc:
                    raise JobFileError(
                        str(path), f"job {spec.name!r}", exc.field, exc.message
                    ) from exc
            key = (spec.tenant, spec.name)
            if key in where:
                raise JobFileError(
                    str(path),
                    f"job {spec.name!r}",
                    "name",
                    f"tenant {spec.tenant!r} already declares it in {where[key]}",
                )
            where[key] = str(path)
            specs.append(spec)
    return specs
