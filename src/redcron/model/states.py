"""Task instance and run states, defined once.

Python code compares against these enums; Lua scripts get the same sets as
generated tables (:func:`lua_state_tables`, prepended to every script by
``engine/scripts.py``), so the two languages cannot disagree on which states
are terminal.  The values are the plain text stored in Redis hashes, so an
operator reading ``HGET ... state`` with redis-cli sees these words.
"""

from __future__ import annotations

from enum import StrEnum


class TaskState(StrEnum):
    """Where a task instance is in its lifecycle (the ``state`` field of its hash)."""

    PENDING = "pending"  # a run's task waiting on its upstream
    MAPPING = "mapping"  # a mapped task: its instances are being made or run (issue 32 §2)
    SCHEDULED = "scheduled"  # a countdown (ETA) task on the timer set
    READY = "ready"  # on its tenant's ready stream
    HELD = "held"  # held aside while its job's circuit breaker is open
    WAITING = "waiting"  # waiting for a slot of its concurrency key (ckwaiting: list)
    LEASED = "leased"  # handed to a worker
    RUNNING = "running"  # the worker started it
    RETRY_WAIT = "retry_wait"  # on the timer set until its retry is due
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD = "dead"  # out of attempts: in its tenant's DLQ (replay makes it ready)
    UPSTREAM_FAILED = "upstream_failed"  # a run's task whose upstream failed
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


class RunState(StrEnum):
    """A run's ``state`` field."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"  # a fire that created no run (overlap, paused job)
    REJECTED = "rejected"  # a fire refused by admission control


#: an instance in one of these has ended: no worker will run it again unless an
#: operator retries or replays it, and result() waiters are woken
TASK_TERMINAL: frozenset[TaskState] = frozenset(
    {
        TaskState.SUCCEEDED,
        TaskState.FAILED,
        TaskState.DEAD,
        TaskState.UPSTREAM_FAILED,
        TaskState.CANCELLED,
        TaskState.SKIPPED,
    }
)
#: an instance a worker holds a lease on (time passes for it)
TASK_LEASED: frozenset[TaskState] = frozenset({TaskState.LEASED, TaskState.RUNNING})

#: a run in one of these can still change
RUN_ACTIVE: frozenset[RunState] = frozenset({RunState.QUEUED, RunState.RUNNING})
RUN_TERMINAL: frozenset[RunState] = frozenset(RunState) - RUN_ACTIVE

#: not a state: the hash field a cancel sets on a run and its instances
CANCEL_REQUESTED = "cancel_requested"
#: shown for a run's task whose hash expired with its retention (not stored)
EXPIRED = "expired"

_LUA_SETS: dict[str, frozenset[TaskState] | frozenset[RunState]] = {
    "TASK_TERMINAL": TASK_TERMINAL,
    "TASK_LEASED": TASK_LEASED,
    "RUN_ACTIVE": RUN_ACTIVE,
    "RUN_TERMINAL": RUN_TERMINAL,
}


def lua_state_tables() -> str:
    """Lua source defining the state sets as lookup tables (``TASK_TERMINAL[s]``).

    Sorted, so the generated source (and each script's SHA) is stable.
    """
    out = ["-- generated from redcron/model/states.py: do not edit"]
    for name, members in _LUA_SETS.items():
        body = ", ".join(f"{s.value} = true" for s in sorted(members, key=str))
        out.append(f"local {name} = {{{body}}}")
    return "\n".join(out) + "\n"
