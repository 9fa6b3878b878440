"""Jobs: a trigger plus a DAG of tasks, validated before anything is written.

``Task`` describes one node (a registered Python task, a command, or a
container); ``JobSpec`` a whole job.  :meth:`JobSpec.template` compiles the
DAG into the plain rows ``fire.lua`` turns into task instances, so a run is
created in one script call without Python in the loop.

One module, a little over 400 lines, on purpose: ``Task`` and ``JobSpec``
validate against each other (names, dependencies, cycles) and the template
compiler reads both, so a split would only add an import cycle to follow.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from redcron import serde
from redcron.errors import ValidationError
from redcron.model import validation
from redcron.model.fields import JOB_DEFAULTS, TEMPLATE_DEFAULTS, TI_DEFAULTS
from redcron.schedule.plan import FirePolicy
from redcron.schedule.triggers import Trigger, make_trigger

COMMAND_TASK = "redcron.command"
CONTAINER_TASK = "redcron.container"
CATCHUP_POLICIES = ("latest", "all", "none")
OVERLAP_POLICIES = ("allow", "skip", "buffer_one", "cancel_previous")
MAX_DAG_TASKS = 1_000
#: the most instances a mapped task makes unless its ``map_max`` says otherwise,
#: and the most it may say (issue 32 §2)
MAP_MAX = 10_000
MAP_MAX_LIMIT = 100_000
#: ``map_over`` names a param of the run when it starts with this
MAP_PARAMS = "params."
_TI_DEFAULT = {k: TI_DEFAULTS[k] for k in ("timeout_ms", "retry_base_ms", "retry_cap_ms")}


@dataclass
class Task:
    """One task of a job's DAG.

    Exactly one of ``ref`` (a registered task name), ``command`` (argv) or
    ``image`` (a container image; ``command`` is then the container's
    command) says what runs.
    """

    ref: str | None = None
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    command: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    image: str | None = None
    cpu: float | None = None
    mem: str | int | None = None
    depends_on: list[str] = field(default_factory=list)
    timeout: float | None = None
    retries: int | None = None
    retry_base: float | None = None
    retry_cap: float | None = None
    priority: str | None = None
    queue: str | None = None
    #: fan-out at run time (issue 32 §2): the upstream task whose result (a list)
    #: this task is mapped over, one instance per element (``transform[0]``,
    #: ``transform[1]``...), or ``"params.<name>"``: a list the run's params hold.
    #: The upstream becomes a dependency; a task downstream of this one joins
    #: the instances (receives the list of their results, in order)
    map_over: str | None = None
    #: the most instances the map may make (default :data:`MAP_MAX`); a longer
    #: list fails the mapped task with an error that says so
    map_max: int | None = None

    @property
    def kind(self) -> str:
        if self.image is not None:
            return "container"
        if self.command is not None:
            return "command"
        return "python"

    def validate(self, where: str) -> None:
        chosen = [k for k in ("ref", "image") if getattr(self, k) is not None]
        if self.command is not None and self.image is None:
            chosen.append("command")
        if len(chosen) != 1:
            raise ValidationError(
                where,
                "give exactly one of a registered task name, command=[...] or image=... "
                f"(got {', '.join(chosen) or 'none'})",
            )
        if self.command is not None:
            validation.argv(self.command, f"{where}.command")
        if self.image is not None:
            validation.image(self.image, f"{where}.image")
        validation.env(self.env, f"{where}.env")
        validation.cwd(self.cwd, f"{where}.cwd")
        if self.ref is not None and (not isinstance(self.ref, str) or not self.ref):
            raise ValidationError(f"{where}.ref", "must be a registered task name")
        if not isinstance(self.args, list | tuple):
            raise ValidationError(f"{where}.args", "must be a list")
        if not isinstance(self.kwargs, dict):
            raise ValidationError(f"{where}.kwargs", "must be a mapping")
        if not isinstance(self.depends_on, list | tuple) or not all(
            isinstance(d, str) for d in self.depends_on
        ):
            # a TypeError from validate() otherwise ('NoneType' is not iterable)
            raise ValidationError(f"{where}.depends_on", "must be a list of task names")
        for key in self.kwargs:
            if not isinstance(key, str):
                raise ValidationError(f"{where}.kwargs", f"{key!r}: keyword names are strings")
        # here, not only when the DAG is compiled at put time: app.job() declares at
        # import and an unencodable argument surfaced only when `redcron beat` applied it
        if self.args:  # empty: encodable, and the common case
            serde.dumps(self.args, field=f"{where}.args")
        if self.kwargs:
            serde.dumps(self.kwargs, field=f"{where}.kwargs")
        validation.timeout_ms(self.timeout, f"{where}.timeout")
        if self.retries is not None:
            self.retries = validation.non_negative_int(self.retries, f"{where}.retries")
        if self.priority is not None:
            validation.priority(self.priority, f"{where}.priority")
        if self.queue is not None:
            validation.name(f"{where}.queue", self.queue)
        if self.cpu is not None:
            validation.cpus(self.cpu, f"{where}.cpu")
        if self.mem is not None:
            validation.mem_bytes(self.mem, f"{where}.mem")
        # the checks @app.task makes; base <= cap against the deployment's defaults
        # is checked by backoff_s once those are known
        if self.retry_base is not None:
            validation.seconds(self.retry_base, f"{where}.retry_base")
        if self.retry_cap is not None:
            validation.seconds(self.retry_cap, f"{where}.retry_cap")
        if self.retry_base is not None and self.retry_cap is not None:
            validation.backoff(self.retry_base, self.retry_cap, f"{where}.")
        if self.map_over is not None:
            over = self.map_over
            if not isinstance(over, str) or not validation.is_name(over.removeprefix(MAP_PARAMS)):
                raise ValidationError(
                    f"{where}.map_over",
                    f"{over!r}: name the upstream task whose result is the list to map "
                    "over, e.g. 'extract', or a param of the run, e.g. 'params.items'",
                )
        if self.map_max is not None:
            if self.map_over is None:
                raise ValidationError(f"{where}.map_max", "is for a mapped task: give map_over")
            self.map_max = validation.non_negative_int(self.map_max, f"{where}.map_max")
            if not 1 <= self.map_max <= MAP_MAX_LIMIT:
                raise ValidationError(
                    f"{where}.map_max", f"must be 1 to {MAP_MAX_LIMIT:,} (default {MAP_MAX:,})"
                )

    def upstream(self) -> list[str]:
        """The tasks this one depends on: ``depends_on``, and the task it is
        mapped over when that is not among them."""
        over = self.map_over
        if over is None or over.startswith(MAP_PARAMS) or over in self.depends_on:
            return list(self.depends_on)
        return [*self.depends_on, over]

    def backoff_s(self, where: str, defaults: Mapping[str, Any]) -> tuple[float, float]:
        """(retry_base, retry_cap) in seconds, the deployment's ``defaults`` filling
        in what the task leaves out; raises if base > cap."""
        return validation.backoff(
            defaults["retry_base"] if self.retry_base is None else self.retry_base,
            defaults["retry_cap"] if self.retry_cap is None else self.retry_cap,
            f"{where}.",
        )


@dataclass
class JobSpec:
    """A job: who owns it, when it fires, what runs, and its policies."""

    name: str
    tenant: str = "default"
    tasks: dict[str, Task] = field(default_factory=dict)
    cron: str | None = None
    every: str | None = None
    at: datetime | None = None
    tz: str = "UTC"
    catchup: str = "latest"
    catchup_limit: int = 100
    overlap: str = "skip"
    jitter_s: float = 0.0
    paused: bool = False
    pause_after_failures: int = 0
    keep_runs: int = 100
    keep_days: float = 7.0
    breaker_threshold: float = 0.9
    breaker_min_attempts: int = 20
    breaker_window_s: float = 300.0
    breaker_cooldown_s: float = 60.0
    #: job chaining: other jobs of the tenant whose succeeded runs start this one
    #: (docs/api.md "Job chaining")
    depends_on: list[str] = field(default_factory=list)
    #: a run not ended this many seconds after its nominal fire time (a manual
    #: run's: its trigger time) is late: marked, counted and an event
    #: (docs/operations.md "Deadlines"); None: no deadline
    deadline_s: float | None = None

    def validate(self) -> Trigger:
        """Raise ValidationError naming the first bad field; writes nothing.
        Returns the job's trigger, built on the way (``put_many`` uses it rather
        than building it twice)."""
        validation.name("name", self.name)
        validation.name("tenant", self.tenant)
        trigger = self.trigger()  # trigger fields: cron syntax, time zone, every, at
        if self.catchup not in CATCHUP_POLICIES:
            raise ValidationError("catchup", f"{self.catchup!r} is not one of {CATCHUP_POLICIES}")
        if self.overlap not in OVERLAP_POLICIES:
            raise ValidationError("overlap", f"{self.overlap!r} is not one of {OVERLAP_POLICIES}")
        # a setting left at its default (most of them, most of the time) is valid
        # as it is: its checks are skipped (a third of put_many's validation, profiled)
        fresh = [f for f in _CHECKED if not _is_default(self, f)]
        for fname in ("catchup_limit", "keep_runs", "breaker_min_attempts"):
            if fname in fresh:
                setattr(self, fname, validation.whole_number(getattr(self, fname), fname, 1))
        if "pause_after_failures" in fresh:
            self.pause_after_failures = validation.non_negative_int(
                self.pause_after_failures, "pause_after_failures"
            )
        if "breaker_threshold" in fresh:
            validation.fraction(self.breaker_threshold, "breaker_threshold")
        for fname in ("breaker_window_s", "breaker_cooldown_s"):
            if fname in fresh:
                validation.seconds(getattr(self, fname), fname, above=True)
        if "jitter_s" in fresh:
            validation.seconds(self.jitter_s, "jitter_s")
        if self.deadline_s is not None:
            validation.number(
                self.deadline_s,
                "deadline_s",
                above=True,
                example="300 (leave it out for no deadline)",
                maximum=validation.MAX_SECONDS,
            )
        if "keep_days" in fresh:
            validation.number(
                self.keep_days,
                "keep_days",
                unit="days",
                example="7",
                maximum=validation.MAX_SECONDS / 86_400,
            )
        self._validate_depends_on()
        if not isinstance(self.tasks, Mapping) or not self.tasks:
            raise ValidationError("tasks", "a job needs at least one task")
        if len(self.tasks) > MAX_DAG_TASKS:
            raise ValidationError("tasks", f"{len(self.tasks)} tasks; a DAG holds at most 1000")
        for tname, task in self.tasks.items():
            validation.name("tasks", tname)
            if not isinstance(task, Task):
                example = task if isinstance(task, str) else "module.function"
                raise ValidationError(
                    f"tasks.{tname}",
                    f"must be a Task(...), e.g. Task({example!r}) (from redcron import Task)",
                )
            task.validate(f"tasks.{tname}")
            for dep in task.upstream():
                what = "depends_on" if dep in task.depends_on else "map_over"
                if dep not in self.tasks:
                    raise ValidationError(
                        f"tasks.{tname}.{what}",
                        f"unknown task {dep!r}; tasks are {', '.join(self.tasks)}",
                    )
                if dep == tname:
                    raise ValidationError(f"tasks.{tname}.{what}", "a task cannot depend on itself")
        if any(task.upstream() for task in self.tasks.values()):
            cycle = find_cycle({t: task.upstream() for t, task in self.tasks.items()})
            if cycle:
                raise ValidationError("tasks", "dependency cycle: " + " -> ".join(cycle))
        return trigger

    def _validate_depends_on(self) -> None:
        deps = self.depends_on
        if not isinstance(deps, list | tuple) or not all(isinstance(d, str) for d in deps):
            raise ValidationError(
                "depends_on", "must be a list of job names of the same tenant, e.g. [extract]"
            )
        for dep in deps:
            validation.name("depends_on", dep)
            if dep == self.name:
                raise ValidationError("depends_on", f"a job cannot depend on itself ({dep!r})")
        if len(set(deps)) != len(deps):
            raise ValidationError("depends_on", "names a job twice")

    def trigger(self) -> Trigger:
        cron = self.cron
        # the job's key seeds only an H field: other jobs of the same schedule
        # share one Trigger (built once, cached: put_many validates thousands)
        key = f"{self.tenant}/{self.name}" if isinstance(cron, str) and "h" in cron.lower() else ""
        try:
            return _trigger(cron, self.every, self.at, self.tz, key)
        except TypeError:  # an unhashable value: make_trigger says what is wrong
            return make_trigger(cron=cron, every=self.every, at=self.at, tz=self.tz, job_key=key)

    def deadline_ms(self) -> int | None:
        """``deadline_s`` in ms as the job hash holds it (``deadline_ms``), at
        least 1 (a positive deadline never reads as none); None: no deadline."""
        if self.deadline_s is None:
            return None
        return max(1, round(self.deadline_s * 1000))

    def hash_settings(self) -> dict[str, str]:
        """The settings the job hash holds (job_put.lua writes them), as text, and
        only those not at their default (:data:`JOB_DEFAULTS`; ``deadline_ms``
        only when set): the script drops the others, and readers take an absent
        one as its default."""
        out: dict[str, str] = {}
        for name, attr in _HASH_SETTINGS:
            if _is_default(self, attr):
                continue  # the common case: no text made
            if name == "keep_s":
                value = str(int(self.keep_days * 86_400))
            elif name == "paused":
                value = "1" if self.paused else "0"
            else:
                value = str(getattr(self, attr))
            if value != JOB_DEFAULTS[name]:
                out[name] = value
        deadline = self.deadline_ms()
        if deadline is not None:
            out["deadline_ms"] = str(deadline)
        return out

    def fire_policy(self) -> FirePolicy:
        """What fire planning reads of the job beside its trigger."""
        return FirePolicy(self.catchup, self.catchup_limit, self.jitter_s)

    def check_backoff(self, defaults: Mapping[str, Any]) -> None:
        """Each task's retry backoff against the deployment's ``defaults`` (a task
        that sets only ``retry_cap`` may fall below the default ``retry_base``):
        raises :class:`ValidationError` naming ``tasks.<name>.retry_cap``.
        :meth:`validate` cannot: the defaults are the deployment's."""
        for tname, task in self.tasks.items():
            task.backoff_s(f"tasks.{tname}", defaults)

    def template(
        self, defaults: Mapping[str, Any], keyed: Mapping[str, Mapping[str, Any]] | None = None
    ) -> tuple[str, dict[str, bytes]]:
        """Compile the DAG for ``fire.lua``.

        Returns the template JSON (a list of task rows, roots marked) and
        the msgpack args per task (kept out of JSON so bytes survive).
        ``defaults`` holds retries, retry_base, retry_cap of the deployment;
        ``keyed``: task name -> the fields its registration adds to its row (a
        concurrency key's ``ck``/``ckn``, model/concurrency.py; a rate's
        ``rate_ms``/``rate_n``/``rate_key``/``rate_group``, model/rate.py),
        worked out by ``App.job_concurrency``.
        """
        down: dict[str, list[str]] = {t: [] for t in self.tasks}
        for tname, task in self.tasks.items():
            for dep in task.upstream():
                down[dep].append(tname)
        rows = []
        args: dict[str, bytes] = {}
        for tname, task in self.tasks.items():
            kind = task.kind
            if kind == "python":
                ref = task.ref or ""
                payload: Any = [list(task.args), dict(task.kwargs)]
            elif kind == "command":
                ref = COMMAND_TASK
                payload = {"argv": list(task.command or []), "env": task.env, "cwd": task.cwd}
            else:
                ref = CONTAINER_TASK
                payload = {
                    "image": task.image,
                    "command": list(task.command or []),
                    "env": task.env,
                    "cpu": task.cpu,
                    "mem": task.mem,
                }
            args[tname] = serde.dumps(payload, field=f"tasks.{tname}.args")
            retries = defaults["retries"] if task.retries is None else task.retries
            if task.retry_base is None and task.retry_cap is None:
                # the deployment's own, checked by check_backoff (put_many) and Settings
                retry_base, retry_cap = defaults["retry_base"], defaults["retry_cap"]
            else:
                retry_base, retry_cap = task.backoff_s(f"tasks.{tname}", defaults)
            # a field at its default is left out (lib/template.lua fills it in):
            # a one-task job's template then fits a listpack-encoded job hash
            row: dict[str, Any] = {"task": tname, "name": ref, "max_attempts": retries + 1}
            queue = task.queue or ("default" if kind == "python" else "commands")
            for key, text in (("kind", kind), ("queue", queue), ("priority", task.priority)):
                if text is not None and text != TEMPLATE_DEFAULTS[key]:
                    row[key] = text
            for key, ms in (
                ("timeout_ms", validation.timeout_ms(task.timeout)),
                ("retry_base_ms", int(1000 * retry_base)),
                ("retry_cap_ms", int(1000 * retry_cap)),
            ):
                if ms != _TI_DEFAULT[key]:
                    row[key] = ms
            if task.upstream():
                row["deps"] = task.upstream()
            if task.map_over is not None:  # lib/runs.lua, map_expand.lua
                row["map_over"] = task.map_over
                if task.map_max is not None:
                    row["map_max"] = task.map_max
            if down[tname]:
                row["down"] = down[tname]
            if task.cpu:
                row["cpu"] = task.cpu
            if task.mem:
                row["mem"] = validation.mem_bytes(task.mem, f"tasks.{tname}.mem")
            if keyed and tname in keyed:  # lib/ckeys.lua, lib/rate.lua
                row.update(keyed[tname])
            rows.append(row)
        return _COMPACT.encode(rows), args


@functools.lru_cache(maxsize=4096)
def _trigger(cron: Any, every: Any, at: Any, tz: Any, job_key: str) -> Trigger:
    return make_trigger(cron=cron, every=every, at=at, tz=tz, job_key=job_key)


def job_spec(
    name: str,
    *,
    tasks: Mapping[str, Task],
    cron: str | None = None,
    every: str | None = None,
    at: datetime | None = None,
    tz: str = "UTC",
    tenant: str = "default",
    **policies: Any,
) -> JobSpec:
    """A validated :class:`JobSpec` from the keyword form that ``app.job`` and
    ``app.jobs.put`` take; a misspelled policy is an error, not ignored."""
    known = set(JobSpec.__dataclass_fields__) - {
        "name",
        "tasks",
        "cron",
        "every",
        "at",
        "tz",
        "tenant",
    }
    unknown = set(policies) - known
    if unknown:
        raise ValidationError(
            first_unknown(unknown), f"unknown job option; known: {', '.join(sorted(known))}"
        )
    spec = JobSpec(
        name=name, tenant=tenant, tasks=dict(tasks), cron=cron, every=every, at=at, tz=tz,
        **policies,
    )  # fmt: skip
    spec.validate()
    return spec


def find_cycle(deps: Mapping[str, list[str]]) -> list[str] | None:
    """A dependency cycle as ``[a, b, ..., a]``, or None (iterative DFS, no recursion limit)."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    for root in deps:
        if state.get(root):
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = []
        while stack:
            node, i = stack.pop()
            if i == 0:
                state[node] = 1
                path.append(node)
            children = deps.get(node, [])
            if i < len(children):
                stack.append((node, i + 1))
                child = children[i]
                if state.get(child) == 1:
                    return [*path[path.index(child) :], child]
                if not state.get(child):
                    stack.append((child, 0))
            else:
                state[node] = 2
                path.pop()
    return None


def chain_order(specs: Sequence[JobSpec]) -> list[int]:
    """The indexes of ``specs`` with every job after the jobs of the batch its
    ``depends_on`` names (the same tenant's), so each upstream exists when its
    dependent is written; otherwise in the order given.  A cycle among them is
    a :class:`ValidationError` naming it (``depends_on``)."""
    where = {(s.tenant, s.name): i for i, s in enumerate(specs)}
    deps = {
        f"{s.tenant}/{s.name}": [f"{s.tenant}/{d}" for d in s.depends_on if (s.tenant, d) in where]
        for s in specs
    }
    cycle = find_cycle(deps)
    if cycle:
        raise ValidationError(
            "depends_on",
            "job dependency cycle: " + " -> ".join(c.partition("/")[2] for c in cycle),
        )
    order: list[int] = []
    placed: set[int] = set()
    for start in range(len(specs)):
        stack = [(start, False)]
        while stack:
            i, expanded = stack.pop()
            if i in placed:
                continue
            if expanded:
                placed.add(i)
                order.append(i)
                continue
            stack.append((i, True))
            spec = specs[i]
            for d in reversed(spec.depends_on):
                j = where.get((spec.tenant, d))
                if j is not None and j not in placed:
                    stack.append((j, False))
    return order


#: the other names job files and the API take for a task's fields (the
#: tutorial writes ``task:``): ``task`` is read here, ``cmd`` and ``timeout_s``
#: by model/jobfile.py; listed with the fields in "known:" messages
TASK_ALIASES = {"task": "ref", "cmd": "command", "timeout_s": "timeout"}
#: the short form's fields of the one task, given at the job's top level
#: (model/jobfile.py)
SHORT_TASK_POLICIES = ("retries", "timeout_s")


def known_fields(fields: Iterable[str], aliases: Mapping[str, str]) -> str:
    """The names a mapping takes, for an "unknown field" message: ``fields`` and
    ``aliases``, sorted, each alias with what it stands for (``cmd (= command)``)."""
    names = {name: name for name in fields} | {a: f"{a} (= {f})" for a, f in aliases.items()}
    return ", ".join(names[n] for n in sorted(names))


def first_unknown(names: set[str]) -> str:
    """The unknown key an error names: the first in order, a real name before an
    empty one, and an empty one shown as ``""`` (bare, it would read as "no field")."""
    return min(names, key=lambda name: (not name, name)) or '""'


def spec_from_dict(data: Mapping[str, Any], *, where: str = "job") -> JobSpec:
    """Build a JobSpec from plain data (YAML/JSON); unknown keys are errors."""
    if not isinstance(data, Mapping):
        raise ValidationError(where, "must be a mapping")
    known = set(JobSpec.__dataclass_fields__)
    unknown = set(data) - known
    if unknown:
        short = ", ".join(("task", *SHORT_TASK_POLICIES))
        raise ValidationError(
            f"{where}.{first_unknown(unknown)}",
            f"unknown field; known: {', '.join(sorted(known))}; "
            f"or, for a job of one task, {short} in place of tasks",
        )
    if "name" not in data:
        raise ValidationError(f"{where}.name", "missing")
    raw_tasks = data.get("tasks") or {}
    tasks: dict[str, Task] = {}
    items: list[tuple[str, Any]]
    if isinstance(raw_tasks, list):
        items = []
        for i, t in enumerate(raw_tasks):
            if not isinstance(t, Mapping) or "name" not in t:
                raise ValidationError(f"{where}.tasks[{i}]", "each task needs a name")
            items.append((str(t["name"]), {k: v for k, v in t.items() if k != "name"}))
    elif isinstance(raw_tasks, Mapping):
        items = [(str(k), v) for k, v in raw_tasks.items()]
    else:
        raise ValidationError(f"{where}.tasks", "must be a mapping or a list")
    task_fields = set(Task.__dataclass_fields__)
    for tname, tdata in items:
        if tname in tasks:
            raise ValidationError(f"{where}.tasks", f"duplicate task name {tname!r}")
        if isinstance(tdata, str):
            tdata = {"ref": tdata}
        if not isinstance(tdata, Mapping):
            raise ValidationError(f"{where}.tasks.{tname}", "must be a mapping")
        tdata = dict(tdata)
        if "task" in tdata and "ref" in tdata:
            raise ValidationError(f"{where}.tasks.{tname}.task", "give task or ref, not both")
        if "task" in tdata:
            tdata["ref"] = tdata.pop("task")
        bad = set(tdata) - task_fields
        if bad:
            raise ValidationError(
                f"{where}.tasks.{tname}.{first_unknown(bad)}",
                f"unknown field; known: {known_fields(task_fields, TASK_ALIASES)}",
            )
        tasks[tname] = Task(**tdata)
    fields = {k: v for k, v in data.items() if k != "tasks"}
    spec = JobSpec(tasks=tasks, **fields)
    return spec


def spec_json(spec: JobSpec) -> str:
    """The spec as the JSON text a job hash stores (``spec``): canonical (sorted
    keys, no spaces), without ``name`` and ``tenant`` (the job's key and index
    say them: :func:`spec_from_json` takes them back) and without any field,
    of the job or of a task, that holds its default (``spec_from_json`` fills
    those in).  job_put.lua compares this text with the stored one to tell an
    unchanged job, so equal specs give equal text.  A job stored by an older
    release holds :func:`spec_json_full`'s text, which reads the same."""
    data: dict[str, Any] = {}
    for fname, default in _SPEC_DEFAULTS:
        value = getattr(spec, fname)
        if value != default:
            data[fname] = value
    tasks: dict[str, Any] = {}
    for tname, task in spec.tasks.items():
        tasks[tname] = {f: v for f, d in _TASK_DEFAULTS if (v := getattr(task, f)) != d}
    data["tasks"] = tasks
    return _CANONICAL.encode(data)


def spec_json_full(spec: JobSpec) -> str:
    """The spec's text as releases before the lean job hash stored it: every
    field, defaults included, name and tenant too.  For the job's readers (the
    record's ``spec``, so the API shows what it always showed) and to tell an
    unchanged job stored that way (``put_many`` sends its sha1)."""
    return json.dumps(_plain(spec), sort_keys=True, default=_json_default)


def spec_text_full(text: str, tenant: str, name: str) -> str:
    """A stored spec as :func:`spec_json_full` writes it: what a job's record
    shows (the API's ``spec``, ``jobs show``), whichever release stored it.  A
    text that names its job is an older release's, already in full; one that
    cannot be read is shown as it is."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or "name" in data:
            return text
        return spec_json_full(spec_from_json(text, tenant, name))
    except (ValueError, TypeError):
        return text


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON: {value!r}")


#: job hash setting -> the JobSpec field it is written from (JobSpec.hash_settings)
_HASH_SETTINGS = (
    ("overlap", "overlap"), ("keep_runs", "keep_runs"), ("keep_s", "keep_days"),
    ("pause_after_failures", "pause_after_failures"), ("paused", "paused"),
    ("breaker_ratio", "breaker_threshold"), ("breaker_min", "breaker_min_attempts"),
    ("breaker_window_s", "breaker_window_s"), ("breaker_cooldown_s", "breaker_cooldown_s"),
)  # fmt: skip

#: JobSpec's numeric settings whose checks validate() skips at their default
_CHECKED = (
    "catchup_limit", "keep_runs", "breaker_min_attempts", "pause_after_failures",
    "breaker_threshold", "breaker_window_s", "breaker_cooldown_s", "jitter_s", "keep_days",
)  # fmt: skip


def _is_default(spec: JobSpec, fname: str) -> bool:
    """Whether ``spec``'s ``fname`` is its default, of the default's own type (a
    ``True`` is not the default ``1``)."""
    value, default = getattr(spec, fname), _SPEC_DEFAULT[fname]
    return type(value) is type(default) and value == default


def _defaults(cls: type, skip: tuple[str, ...] = ()) -> tuple[tuple[str, Any], ...]:
    out = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if f.default is not dataclasses.MISSING:
            out.append((f.name, f.default))
        elif f.default_factory is not dataclasses.MISSING:
            out.append((f.name, f.default_factory()))
        else:
            out.append((f.name, dataclasses.MISSING))  # always written
    return tuple(out)


#: json.dumps with arguments of its own builds an encoder per call: these are
#: built once (a few µs a job on put_many's path)
_COMPACT = json.JSONEncoder(separators=(",", ":"))
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_json_default)

#: (field, default) of a JobSpec (name and tenant: the key's; tasks: below) and
#: of a Task, in :func:`spec_json`'s order
_SPEC_DEFAULTS = _defaults(JobSpec, skip=("name", "tenant", "tasks"))
_TASK_DEFAULTS = _defaults(Task)
_SPEC_DEFAULT = dict(_SPEC_DEFAULTS)


def _plain(value: Any) -> Any:
    """What :func:`dataclasses.asdict` makes of a spec, as JSON sees it, without
    its deep copy of every leaf (half the cost of putting a job, profiled):
    dataclasses become dicts, tuples lists, everything else is kept as is."""
    if isinstance(value, (str, int, float)) or value is None:
        return value
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: _plain(getattr(value, name)) for name in _field_names(type(value))}
    return value


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def spec_from_json(text: str, tenant: str | None = None, name: str | None = None) -> JobSpec:
    """A job hash's stored ``spec`` (:func:`spec_json`'s text, or an older
    release's :func:`spec_json_full`) as a JobSpec; ``tenant`` and ``name`` (the
    job hash's) fill in what the text leaves out."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValidationError("job", "the stored spec is not a JSON object")
    if tenant is not None:
        data.setdefault("tenant", tenant)
    if name is not None:
        data.setdefault("name", name)
    for name in ("cron", "every"):
        # stored before an empty cron/every was refused, when "" meant a manual job
        if data.get(name) == "":
            data[name] = None
    if data.get("at"):
        data["at"] = datetime.fromisoformat(data["at"])
    return spec_from_dict(data)
