"""Cancelling a task (:func:`cancel`, ``cancel.lua``), and what a cancel did: the
answers of ``cancel.lua`` and ``run_cancel.lua``.

A cancel that is accepted ends the instance ``cancelled`` at once, wherever it
is, and never again: a leased attempt ends with its lease, so the worker's
complete/fail is refused as a zombie's is (docs/architecture.md, "Cancel").
The code of a leased attempt may still be running when the cancel returns: a
worker kills a command's process group at its next heartbeat, but a Python
thread cannot be killed and runs to its end (its result is discarded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redcron.engine import argv
from redcron.engine.core import Core, shard_of_id
from redcron.serde import text as _s


@dataclass(frozen=True, slots=True)
class TaskCancel:
    """What cancelling one task did."""

    id: str
    #: ``cancelled``, or the terminal state it had already ended in
    state: str
    #: this call cancelled it; False: it had already ended (``state``), nothing written
    cancelled: bool
    #: it was leased: it ended cancelled, but its worker may still be running
    #: the code until it notices (a Python thread is never killed)
    may_still_be_running: bool


@dataclass(frozen=True, slots=True)
class RunCancel:
    """What cancelling a run did."""

    id: str
    #: the run's state after the call (``cancelled``), or the one it had ended in
    state: str
    #: this call cancelled it; False: it had already ended (``state``), nothing written
    cancelled: bool
    #: the run's tasks that were leased: ended cancelled, code may still be running
    running: tuple[str, ...] = ()

    @property
    def may_still_be_running(self) -> bool:
        return bool(self.running)


def task_cancel(iid: str, raw: Sequence[Any]) -> TaskCancel:
    """cancel.lua's ``{state, how}`` (how: 0 already ended, 1 cancelled, 2 while leased)."""
    state, how = raw
    how = int(how)
    return TaskCancel(iid, _s(state), how > 0, how == 2)


def run_cancel(run_id: str, raw: Sequence[Any]) -> RunCancel:
    """run_cancel.lua's ``{state, cancelled, {running task names}}``."""
    state, cancelled, running = raw
    return RunCancel(run_id, _s(state), bool(int(cancelled)), tuple(_s(t) for t in running))


def cancel(core: Core, iid: str, now: int | None = None) -> TaskCancel:
    """``cancel.lua``: end a task ``cancelled`` wherever it is."""
    return task_cancel(iid, core._run("cancel", shard_of_id(iid), argv.cancel(iid, now)))
