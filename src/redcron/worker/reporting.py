"""Reporting: sending what ended (log lines, completions, failures) to Redis.

The lease loop carries the reports with its next lease while it is busy (one
round trip per batch, through :meth:`Reporter.exchange`), hands the new leases
to the pool and the reported batch to the reporter thread, which runs its
hooks (the line per attempt) and forgets it (:meth:`Reporter.settle`).  The
reporter thread (:meth:`Reporter.run`) also sends what ends while the lease
loop blocks on the wake lists, backs off or has stopped, so no result waits on
a ``BLPOP``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from redcron.engine import TRANSIENT, FailItem, FailResult, Lease, LeaseRequest
from redcron.errors import NotFound, NotReplicated
from redcron.worker.crew import Crew, Role
from redcron.worker.execute import Attempt, timeout_retryable
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
        or stopped; and settle the batches the lease loop reported (their hooks:
        the line per attempt is written here, off the lease loop).  Reports of a
        shard that is failing (its cluster master down; on one server, every
        shard) are kept for its next try, and the others go."""
        ledger = self.ledger
        parked: list[Item] = []
        while True:
            with ledger.lock:
                while not (
                    ledger.settling
                    or self._due(parked)
                    or (ledger.done and (ledger.closing or not ledger.leaser_reports))
                ):
                    if ledger.closing and not ledger.done and not parked:
                        return
                    if ledger.closing and ledger.hard_stop.is_set() and not ledger.done:
                        return  # what is parked cannot go: the leases expire
                    wait = self.gate.wait(time.monotonic()) if parked else 1.0
                    ledger.report_cv.wait(min(1.0, max(0.01, wait)))
                settling, ledger.settling = ledger.settling, []
                items: list[Item] = []
                if self._due(parked) or (
                    ledger.done and (ledger.closing or not ledger.leaser_reports)
                ):
                    items = parked + ledger.take_done()
                    parked = []
            for reports in settling:
                self.settle(reports)
            if items:
                parked = self.report(items)

    def _due(self, parked: list[Item]) -> bool:
        """Whether a parked report's shard is due a try."""
        if not parked:
            return False
        shards = sorted({it[0].lease.shard for it in parked})
        return bool(self.gate.open(shards, time.monotonic()))

    def report(self, items: list[Item]) -> list[Item]:
        """Report ``items``, one round trip per shard; returns those that could not
        go (their shard is failing: it is left alone for its gate delay)."""
        by_shard: dict[int, list[Item]] = {}
        for attempt, out in items:
            by_shard.setdefault(attempt.lease.shard, []).append((attempt, out))
        kept: list[Item] = []
        open_now = set(self.gate.open(sorted(by_shard), time.monotonic()))
        for shard, group in by_shard.items():
            if shard not in open_now:
                kept += group
                continue
            try:
                self.send(shard, group, None)
            except TRANSIENT as exc:
                self.gate.failed(shard, exc, "report", time.monotonic())
                with self.ledger.lock:
                    kept += self.ledger.still_held(group)
                continue
            self.gate.ok(shard)
        return kept

    def send(self, shard: int, group: list[Item], req: LeaseRequest | None) -> list[Lease]:
        """Logs, completions and failures of one shard, and a lease if asked for,
        in one round trip; then forget the reported attempts."""
        leases, reported, _ = self.exchange(shard, group, req)
        self.settle(reported)
        return leases

    def exchange(
        self, shard: int, group: list[Item], req: LeaseRequest | None
    ) -> tuple[list[Lease], Reports, list[str]]:
        """:meth:`send` up to the hooks: the leases, the reports for
        :meth:`settle` (the lease loop hands the leases to the pool first, so
        the slots do not wait for the lines of the batch), and the names of the
        tasks the lease left ready because this worker has not registered them."""
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
                retryable = out.retryable
                if out.outcome == "timed_out":  # whichever pool timed it out
                    retryable = retryable and timeout_retryable(self.app, lease)
                fails.append(
                    FailItem(
                        lease.iid,
                        lease.epoch,
                        out.outcome,
                        out.error,
                        retryable,
                        out.delay_ms,
                        out.exit_code,
                    )
                )
        if not group and req is None:
            return [], Reports(group, [], []), []
        told = [attempt for attempt, _out in group if attempt.progress is not None]
        if told:  # the last value before the outcome, which fences out any later write
            self.progress.write(shard, told, time.monotonic(), None)
        try:
            done, failed, leases, unregistered = self.broker.report_and_lease(
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
        return leases, Reports(group, done, failed), unregistered

    def settle(self, reports: Reports) -> None:
        """After a batch was reported: the hooks (the line per attempt), then the
        attempts are no longer held."""
        group = reports.group
        if group and self.hooks.after_report:
            for hook in self.hooks.after_report:
                hook(reports)
        self.ledger.forget(group)

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
            record = self.broker.task_info(lease.iid)
        except NotFound:
            return False
        return any(
            a.number == lease.attempt and a.worker == self.id and a.outcome is not None
            for a in record.attempts
        )
