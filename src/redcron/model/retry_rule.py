"""One retry rule for every path a task takes, and the one way attempts are shown.

``retries=N`` means at most N + 1 attempts (docs/operations.md, Retries).  A
task's retries and backoff are, first given of: the call's own (``_retries``,
a job task's ``retries``), the registered task's (``@app.task(retries=...)``,
when the process writing the task or the job registers it), the deployment's
(``max_retries``, ``retry_base``, ``retry_cap``).  A directly enqueued task
already took its registered task's; :func:`with_registered` makes a job's
Python tasks do the same, so a task makes the same number of attempts
whether a job runs it or it was enqueued (issue 20: 4 attempts inside a job,
3 enqueued, for one ``retries=2``).

A manual retry, a DLQ replay and a hand-back start a fresh budget: the
attempts before it stay in the history (``budget`` counts them) but are not
counted against ``max_attempts``.  :func:`attempts_short` and
:func:`attempts_long` show that the same way on the dashboard and in the CLI
("1 / 1 (+1 earlier)" rather than "2 / 1").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from redcron.model.jobs import JobSpec

#: the job task fields the retry rule fills from a registration
RULE_FIELDS = ("retries", "retry_base", "retry_cap")


def with_registered(spec: JobSpec, registered: Mapping[str, Mapping[str, Any]]) -> JobSpec:
    """``spec`` with each Python task's left-out retries, retry_base and retry_cap
    taken from its registration in ``registered`` (ref -> those three fields);
    a task that gives one keeps it, a task not registered there is left alone
    (the deployment's defaults apply when the job is written).  The filled
    values are part of the stored spec: the job page shows them, and a changed
    registration updates the job when it is next applied."""
    tasks = {}
    for name, task in spec.tasks.items():
        known = registered.get(task.ref or "") if task.kind == "python" else None
        fill = {f: known[f] for f in RULE_FIELDS if known and getattr(task, f) is None}
        tasks[name] = dataclasses.replace(task, **fill) if fill else task
    if all(tasks[n] is t for n, t in spec.tasks.items()):
        return spec
    return dataclasses.replace(spec, tasks=tasks)


class Attempts(Protocol):
    """What a task record tells of its attempts (``TaskRecord``)."""

    @property
    def attempt(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def budget(self) -> int: ...


def _counted(t: Attempts) -> tuple[int, str]:
    return max(0, t.attempt - t.budget), str(t.max_attempts or "?")


def attempts_short(t: Attempts, sep: str = "/") -> str:
    """``used/allowed`` for a table cell, ``+N earlier`` for the attempts before
    a fresh budget: "2/3", "1/1 (+1 earlier)"; "" before the first attempt."""
    if not t.attempt:
        return ""
    used, allowed = _counted(t)
    cell = f"{used}{sep}{allowed}"
    return cell + (f" (+{t.budget} earlier)" if t.budget else "")


def attempts_long(t: Attempts) -> str:
    """The attempts in words for a task's detail: "2 of 3"; "1 of 1, +1 earlier
    (before a retry, a DLQ replay or a hand-back: 2 in all)"."""
    used, allowed = _counted(t)
    if not t.budget:
        return f"{used} of {allowed}"
    return (
        f"{used} of {allowed}, +{t.budget} earlier (before a retry, a DLQ replay "
        f"or a hand-back: {t.attempt} in all)"
    )
