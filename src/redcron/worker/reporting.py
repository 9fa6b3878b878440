"""Reporting: sending what ended (log lines, completions, failures) to Redis.

The lease loop carries the reports with its next lease while it is busy (one
round trip per batch, through :meth:`Reporter.send`); the reporter thread
(:meth:`Reporter.run`) sends what ends while the lease loop blocks on the wake
lists, backs off or has stopped, so no result waits on a ``BLPOP``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from redcron.broker import FailItem, FailResult, Lease, LeaseRequest
from redcron.broker.retry import TRANSIENT, Backoff
from redcron.errors import NotFound, NotReplicated
from redcron.worker.crew import Crew, Role
from redcron.worker.execute import Attempt
from redcron.worker.hooks import HookChain, Reports
from redcron.worker.ledger import Item

# the worker's logger: operators and tests filter on it, wherever the line is written
log = logging.getLogger("redcron.worker.worker")


class Reporter(Role):
    """Sends reports of one worker, and runs its reporter thread."""

    def __init__(self, crew: Crew, hooks: HookChain) -> None:
        super().__init__(crew)
        self.hooks = hooks

    def run(self) -> None:
        """Report what ends while the lease loop is not about to (it carries reports
        with its next lease while busy): blocked on an empty queue, backing off,
        or stopped."""
        ledger = self.ledger
        backoff = Backoff(0.1, 5.0, log, self._outage)
        while True:
            with ledger.lock:
                while not (ledger.done and (ledger.closing or not ledger.leaser_reports)):
                    if ledger.closing and not ledger.done:
                        return
                    ledger.report_cv.wait(1.0)
                items = ledger.take_done()
            try:
                self.report(items)
                backoff.reset()
            except TRANSIENT as exc:
                with ledger.lock:
                    ledger.done[:0] = ledger.still_held(items)
                delay = backoff.failed(exc, "report")
                if ledger.closing and ledger.hard_stop.is_set():
                    return
                time.sleep(delay)

    def report(self, items: list[Item]) -> None:
        """Report ``items``, one round trip per shard."""
        by_shard: dict[int, list[Item]] = {}
        for attempt, out in items:
            by_shard.setdefault(attempt.lease.shard, []).append((attempt, out))
        for shard, group in by_shard.items():
            self.send(shard, group, None)

    def send(self, shard: int, group: list[Item], req: LeaseRequest | None) -> list[Lease]:
        """Logs, completions and failures of one shard, and a lease if asked for,
        in one round trip; then forget the reported attempts."""
        completes: list[tuple[str, str, bytes]] = []
        fails: list[FailItem] = []
        logs: list[tuple[str, int, Sequence[str]]] = []
        for attempt, out in group:
            lease = attempt.lease
            lines = out.lines or attempt.buffer.drain()
            if lines:
                logs.append((lease.iid, lease.attempt, lines))
            if out.ok:
                completes.append((lease.iid, lease.epoch, out.result))
            else:
                fails.append(
                    FailItem(
                        lease.iid,
                        lease.epoch,
                        out.outcome,
                        out.error,
                        out.retryable,
                        out.delay_ms,
                        out.exit_code,
                    )
                )
        if not group and req is None:
            return []
        try:
            done, failed, leases = self.broker.leases.report_and_lease(
                shard, self.id, completes, fails, logs, req
            )
        except NotReplicated:
            # written on the master, replication unconfirmed: sent again, and then
            # refused if the first send did land (see _rejected)
            for attempt, _out in group:
                attempt.resent = True
            raise
        lost, written = self._rejected(group, done, failed)
        if written:
            log.info(
                "%d results were already written: their first report reached Redis "
                "before its replication was confirmed",
                written,
            )
        if lost:
            log.warning("%d results rejected: their leases were lost (reaped or cancelled)", lost)
        if group and self.hooks.after_report:
            reports = Reports(group, done, failed)
            for hook in self.hooks.after_report:
                hook(reports)
        self.ledger.forget(group)
        return leases

    def _rejected(
        self, group: list[Item], done: list[bool], failed: list[FailResult]
    ) -> tuple[int, int]:
        """Of the reports Redis refused: how many lost their lease, and how many
        were refused because this worker's earlier send of them had landed (a
        resend after :class:`NotReplicated`: the attempt's record already holds
        this worker's outcome)."""
        oks, fails = iter(done), iter(failed)
        lost = written = 0
        for attempt, out in group:
            accepted = next(oks) if out.ok else next(fails).state is not None
            if accepted or out.outcome == "cancelled":
                continue  # a cancel ended the attempt (and its lease) already
            if attempt.resent and self._outcome_recorded(attempt):
                written += 1
            else:
                lost += 1
        return lost, written

    def _outcome_recorded(self, attempt: Attempt) -> bool:
        lease = attempt.lease
        try:
            record = self.broker.inspection.task_info(lease.iid)
        except NotFound:
            return False
        return any(
            a.number == lease.attempt and a.worker == self.id and a.outcome is not None
            for a in record.attempts
        )
