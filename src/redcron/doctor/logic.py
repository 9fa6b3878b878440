"""The pure comparisons of ``redcron doctor``: what a state allows, whether an
instance hash can be placed, a run recounted from its tasks, whether a run can
move on.  No Redis; unit-tested in ``tests/unit/test_doctor_logic.py``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from redcron.keys import PRIORITIES
from redcron.model.states import TASK_LEASED, TASK_TERMINAL, TaskState

STATES = frozenset(TaskState)
TIMER_STATES = frozenset({TaskState.SCHEDULED, TaskState.RETRY_WAIT})
#: states in which a run's task is somewhere work moves on from
#: states work moves from; a mapped task's (issue 32 §2): its instances, or the
#: follow-up that makes them
LIVE = frozenset(
    {"ready", "leased", "running", "scheduled", "retry_wait", "held", "waiting", "mapping"}
)


def instance_problem(fields: Mapping[str, str]) -> str | None:
    """Why an instance hash cannot be placed (a sentence), or None when it can.

    A hash with no ``state``, a state that is not a :class:`TaskState`, or a
    live instance without its routing (``queue``, ``tenant``, a ``priority``
    class) is malformed: no script can move it, and doctor cannot tell where
    it belongs."""
    state = fields.get("state") or ""
    if not state:
        return "has no state field"
    if state not in STATES:
        return f"has state {state!r}, which is not a task state"
    if state in TASK_TERMINAL and state != "dead":
        return None
    missing = [f for f in ("queue", "tenant", "priority") if not fields.get(f)]
    if missing:
        return f"is {state} but has no {', '.join(missing)}"
    if fields["priority"] not in PRIORITIES:
        return (
            f"is {state} with priority {fields['priority']!r}, not one of {', '.join(PRIORITIES)}"
        )
    if state in TASK_LEASED and not fields.get("deadline"):
        return f"is {state} but has no lease deadline"
    return None


@dataclass(frozen=True, slots=True)
class RunCounts:
    """A run's counters as its task states say they should be."""

    total: int
    n_done: int
    n_succeeded: int
    n_failed: int
    n_cancelled: int


def run_recount(states: Sequence[str]) -> RunCounts:
    """Recount a run from its tasks' states, as ``lib/runs.lua`` counts them:
    a dead or upstream-failed task is failed, a cancelled one cancelled."""
    ok = sum(1 for s in states if s == "succeeded")
    failed = sum(1 for s in states if s in ("dead", "failed", "upstream_failed"))
    cancelled = sum(1 for s in states if s in ("cancelled", "skipped"))
    return RunCounts(len(states), ok + failed + cancelled, ok, failed, cancelled)


def run_progress(tasks: Mapping[str, tuple[str, Sequence[str]]]) -> tuple[bool, list[str]]:
    """Can an active run move on?  ``tasks``: name -> (state, dependencies).

    Returns (can progress, pending tasks whose dependencies all succeeded but
    that were never made ready: the fan-in that did not happen).  A run moves
    on while a task is somewhere work moves from (ready, leased, waiting on a
    timer, held) or a pending task may still get its dependencies."""
    fanin: list[str] = []
    can = False
    for name, (state, deps) in tasks.items():
        if state in LIVE:
            can = True
        elif state == "pending":
            dep_states = [tasks[d][0] if d in tasks else "" for d in deps]
            if all(s == "succeeded" for s in dep_states):
                fanin.append(name)
            elif all(s == "succeeded" or s in LIVE or s == "pending" for s in dep_states):
                can = True
    return can and not fanin, fanin


def owns(fields: Mapping[str, str], eid: str, delivered: bool) -> bool:
    """Does the instance (hash ``fields``) own stream entry ``eid``: leased on it
    when the entry is delivered, ready at it when not?  A delivered entry is
    owned by an instance ready at it too: a stray whose hash came back (lease
    left it pending while the hash was missing, lua/lib/take.lua), which the
    reaper makes ready again on a new entry at its next look."""
    ready_at = fields.get("state") == "ready" and fields.get("loc") == "q:" + eid
    if delivered:
        leased_on = fields.get("state", "") in TASK_LEASED and fields.get("lease_entry") == eid
        return leased_on or ready_at
    return ready_at
