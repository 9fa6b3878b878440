"""The chaos runner's one-off tasks: it submits each planned wave (one atomic
enqueue per shard), enqueues again what a lost connection left unacknowledged,
and cancels the "cancel" tasks once they run."""

from __future__ import annotations

import logging
import time
from typing import Any

from redcron.app import App
from redcron.chaos.scenario import OneOff
from redcron.chaos.tally import Tally
from redcron.engine import TRANSIENT, EnqueueRow, Outage, ShardGate
from redcron.errors import Conflict
from redcron.keys import shard_of_id
from redcron.model.states import TASK_TERMINAL
from redcron.store import AuditLog


class Submissions:
    """Submit waves of one-offs on ``app``; what is acknowledged and cancelled
    goes to ``tally``."""

    def __init__(self, app: App, tally: Tally) -> None:
        self.app = app
        self.tally = tally
        #: row groups (one shard each) to enqueue
        self.pending: list[list[EnqueueRow]] = []
        self._to_cancel: list[str] = []
        #: shards whose enqueue failed, left alone a while (the runner's own log)
        self.gate = ShardGate(
            0.2, 1.0, Outage(logging.getLogger(__name__), "chaos runner"), app.broker.shards_with
        )

    def submit(self, wave: tuple[OneOff, ...]) -> None:
        by_shard: dict[int, list[EnqueueRow]] = {}
        for job in wave:
            opts: dict[str, Any] = {"_tenant": job.tenant, "_priority": job.priority}
            if job.timeout is not None:
                opts["_timeout"] = job.timeout
            if job.retries is not None:
                opts["_retries"] = job.retries
            defaults = self.app.tasks[job.task].options
            row = self.app._row(job.task, "python", [list(job.args), {}], defaults, opts)
            by_shard.setdefault(shard_of_id(row.iid), []).append(row)
            if job.kind == "cancel":
                self._to_cancel.append(row.iid)
        self.pending.extend(by_shard.values())
        self.flush()

    def flush(self) -> None:
        """Enqueue the row groups not yet acknowledged, the same rows again after an
        error (each group is one atomic call: a Conflict on a retry means the
        first call wrote it, and its answer was lost with the connection).  A
        shard whose call fails (on a cluster, its master is down) keeps its
        groups, in order, and is left alone for its gate delay; the other
        shards' go on."""
        left: list[list[EnqueueRow]] = []
        for rows in self.pending:
            shard = shard_of_id(rows[0].iid)
            if not self.gate.open([shard], time.monotonic()):
                left.append(rows)
                continue
            try:
                self.app.broker.enqueuer.enqueue(rows)
            except Conflict:
                pass
            except TRANSIENT as exc:
                self.gate.failed(shard, exc, "enqueue", time.monotonic())
                left.append(rows)
                continue
            self.gate.ok(shard)
            self.tally.acked += [r.iid for r in rows]
            self.tally.enqueued += len(rows)
        self.pending = left

    def cancel_running(self, all_left: bool = False) -> None:
        """Cancel the "cancel" tasks that run (``all_left``: every one not yet ended)."""
        if not self._to_cancel:
            return
        audit = AuditLog(self.app.broker)
        left: list[str] = []
        try:
            states = audit.states(self._to_cancel)
            for iid in self._to_cancel:
                state = states.get(iid, "")
                if state in TASK_TERMINAL:
                    continue
                if state == "running" or (all_left and state):
                    if self.app.broker.cancel(iid).cancelled:
                        self.tally.cancelled.append(iid)
                    self.tally.cancels += 1
                else:
                    left.append(iid)
        except TRANSIENT:
            return
        self._to_cancel = left
