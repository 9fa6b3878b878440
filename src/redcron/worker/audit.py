"""The attempt audit as a hook (``Worker(audit=True)``, ``redcron worker --audit``)."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid

from redcron.engine import TRANSIENT, Backoff
from redcron.store import AuditLog
from redcron.worker.execute import Attempt, Outcome
from redcron.worker.hooks import AttemptHook

# the worker's logger: operators and tests filter on it, wherever the line is written
log = logging.getLogger("redcron.worker.worker")


class Audit(AttemptHook):
    """Record that an attempt starts executing (before its body runs) and that its
    execution ended (after it returned), in the shard's audit stream.

    Each record is retried while Redis is away, so a start is always recorded
    before the body runs; given up only on a hard stop (``hard_stop`` set).
    """

    def __init__(self, audit_log: AuditLog, worker_id: str, hard_stop: threading.Event) -> None:
        self.audit_log = audit_log
        self.worker_id = worker_id
        self.hard_stop = hard_stop

    def before_attempt(self, attempt: Attempt) -> None:
        self._record(attempt, "start", "")

    def after_attempt(self, attempt: Attempt, outcome: Outcome) -> None:
        self._record(attempt, "end", outcome.outcome)

    def _record(self, attempt: Attempt, event: str, outcome: str) -> None:
        lease = attempt.lease
        backoff = Backoff(0.05, 1.0, log)
        token = uuid.uuid4().hex[:16]  # one per event: a retry whose first send landed is one
        while True:
            try:
                self.audit_log.record(
                    lease.shard,
                    event,
                    lease.iid,
                    lease.epoch,
                    lease.attempt,
                    self.worker_id,
                    os.getpid(),
                    outcome,
                    token,
                )
                return
            except TRANSIENT as exc:
                if self.hard_stop.is_set():
                    return
                time.sleep(backoff.failed(exc, f"audit {event} of {lease.iid}"))
