"""What the three roles of one worker share, and the base they are built on.

A worker is a lease loop (``leasing``), a reporter (``reporting``) and a keeper
(``keeping``) around one ledger and one pool.  :class:`Crew` is what they share;
:class:`Role` lays it out as plain attributes, so the hot loops read
``self.ledger`` rather than ``self.crew.ledger``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from redcron.engine import Engine, Outage, ShardGate
from redcron.model.jobs import COMMAND_TASK, CONTAINER_TASK
from redcron.worker.ledger import Ledger
from redcron.worker.options import WorkerOptions
from redcron.worker.pools import Pool
from redcron.worker.progress import ProgressWriter

if TYPE_CHECKING:
    from redcron.app import App


@dataclass(frozen=True)
class Crew:
    """One worker's identity, options and state, as its roles see them."""

    app: App
    id: str
    options: WorkerOptions
    lease_ttl_ms: int
    ledger: Ledger
    pool: Pool
    outage: Outage
    #: the shards whose last call failed (a cluster master down), for every role
    gate: ShardGate
    #: writes what tasks say with ``ctx.progress`` (keeper: when due; reporter: the rest)
    progress: ProgressWriter


def registered_tasks(app: App, options: WorkerOptions) -> frozenset[str]:
    """The task names this worker runs: its app's registered tasks, and the
    built-in command and container tasks with ``allow_commands``.  It publishes
    them (the worker registry's ``tasks``) and leases only their instances: the
    others stay ready for a worker that registers them (lib/take.lua)."""
    builtin = (COMMAND_TASK, CONTAINER_TASK) if options.allow_commands else ()
    return frozenset((*app.tasks, *builtin))


class Role:
    """A part of one worker: its crew's members as attributes."""

    def __init__(self, crew: Crew) -> None:
        self.app = crew.app
        self.broker: Engine = crew.app.broker
        self.settings = crew.app.settings
        self.id = crew.id
        self.options = crew.options
        self.lease_ttl_ms = crew.lease_ttl_ms
        self.ledger = crew.ledger
        self.pool = crew.pool
        self._outage = crew.outage
        self.gate = crew.gate
        self.progress = crew.progress
