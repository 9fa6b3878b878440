"""Which task names count as registered when a job is written (issue 29 §4).

A job whose Python task names no registered task would fail every run (a
typo'd name applied at noon failed every night), so writing one is refused
unless the caller allows it.  *Registered* means: registered in the writing
App (``@app.task``: ``redcron jobs apply -A``, a client App, the dashboard's
``-A``), or published by a live worker (the worker registry's ``tasks``,
:mod:`redcron.engine.workers`), so a client that does not import the task
modules can still write jobs for the workers that run them.  The registry is
read only when the App's own names do not cover every task.  When neither
knows any task (no app, no live worker), every Python task is refused, with
the fix.  ``allow_unregistered`` (``--allow-unregistered``,
``?allow_unregistered=true``) writes the job anyway: for deployments whose
workers of another app are not running yet.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from redcron.engine.workers import WorkerRegistry
from redcron.errors import ValidationError

if TYPE_CHECKING:
    from redcron.engine.core import Core
    from redcron.model.jobs import JobSpec

#: the way out, in the words of each face
ALLOW = "allow it (--allow-unregistered; allow_unregistered=True in Python)"
#: registered names a refusal lists when none is close
LISTED = 8


def live_tasks(broker: Core) -> frozenset[str]:
    """The task names the live workers published (their union)."""
    return frozenset(name for w in WorkerRegistry(broker).list() for name in w.tasks)


def refuse_unregistered(broker: Core, specs: Sequence[JobSpec], app: Collection[str]) -> None:
    """Raise ValidationError (field ``tasks.<task>.name``, the message naming
    the job) for the first Python task of ``specs`` that names a task
    neither ``app`` (the writing App's registered names) nor a live worker
    registers, naming the closest registered names and the fixes."""
    missing = [
        (spec, tname, task.ref)
        for spec in specs
        for tname, task in spec.tasks.items()
        if task.kind == "python" and task.ref is not None and task.ref not in app
    ]
    if not missing:
        return
    known = frozenset(app) | live_tasks(broker)
    for spec, tname, ref in missing:
        if ref in known:
            continue
        # the message names the job: a batch may hold thousands
        raise ValidationError(
            f"tasks.{tname}.name", refusal(f"{spec.tenant}/{spec.name}", tname, ref, known)
        )


def refusal(job: str, tname: str, ref: str, known: Collection[str]) -> str:
    """Why job ``job``'s task ``tname`` may not run ``ref``, and what to do."""
    head = f"job {job}: task {tname!r} runs {ref!r}"
    if not known:
        return (
            f"{head}, and no task is known here: the app registers none and no live "
            f"worker publishes any; pass the app that defines it (-A module:app), start "
            f"its workers, or {ALLOW}"
        )
    close = difflib.get_close_matches(ref, sorted(known), n=3)
    if close:
        hint = "did you mean " + " or ".join(repr(n) for n in close) + "?"
    else:
        names = sorted(known)
        more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
        hint = "registered: " + ", ".join(names[:LISTED]) + more
    return (
        f"{head}, which is not a registered task ({hint}); fix the name, register "
        f"the task (import its module in the app; -A), or, if workers of another "
        f"app register it, {ALLOW}"
    )
