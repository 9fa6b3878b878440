"""Leasing: the lease loop, on the worker's main thread.

It leases up to the free slots plus the prefetch from every shard and hands
the attempts to the pool; while busy, it sends the reports of the attempts
that ended in the same round trip as its next lease; when nothing is ready it
blocks (≤ 1 s) on the wake lists, and the reporter thread takes the reports.
"""

from __future__ import annotations

import logging
import os

from redcron import serde
from redcron.broker import Lease, LeaseRequest
from redcron.broker.retry import TRANSIENT, Backoff
from redcron.worker import capture
from redcron.worker.crew import Crew, Role
from redcron.worker.execute import Attempt, Outcome
from redcron.worker.ledger import MAX_REPORT, Item
from redcron.worker.reporting import Reporter

# the worker's logger: operators and tests filter on it, wherever the line is written
log = logging.getLogger("redcron.worker.worker")


class Leaser(Role):
    """The lease loop of one worker over its ``shards``."""

    def __init__(self, crew: Crew, reporter: Reporter) -> None:
        super().__init__(crew)
        self.log_max_lines = crew.app.settings.log_max_lines
        self.reporter = reporter

    def run(self, shards: list[int]) -> None:
        """Lease and dispatch until the worker stops."""
        ledger = self.ledger
        backoff = Backoff(0.1, 5.0, log, self._outage)
        start = 0
        while not ledger.stopping.is_set():
            with ledger.lock:
                ledger.leaser_reports = True
                free = ledger.capacity - ledger.busy
                if len(ledger.active) >= ledger.capacity + MAX_REPORT:
                    free = 0  # reports are not getting through: lease no more until they do
                if free <= 0 and not ledger.done:
                    ledger.wait_for_slots(1, 0.5)
                    continue
                if 0 < free < ledger.min_batch and ledger.busy:
                    if self.pool.queued():
                        # every slot has work: lease once a batch is free, or the
                        # queue runs dry (a slot would idle)
                        ledger.wait_for_slots(ledger.min_batch, 0.05, when_dry=True)
                    else:
                        # a lease call costs a round trip: gather a few free slots first
                        ledger.wait_for_slots(ledger.min_batch, 0.002)
                    free = ledger.capacity - ledger.busy
                items = ledger.take_done()
            try:
                got = self._exchange(shards, start, items, free)
                items = []
                start += 1
                if not got and free > 0:
                    # nothing ready: the reporter sends what ends while we block
                    ledger.set_leaser_reports(False)
                    self.broker.leases.wait_for_work(shards, self.options.queues, 1.0)
                backoff.reset()
            except TRANSIENT as exc:
                with ledger.lock:
                    items = ledger.still_held(items)
                ledger.set_leaser_reports(False, unsent=items)
                ledger.stopping.wait(backoff.failed(exc, "lease"))
        ledger.set_leaser_reports(False)

    def _exchange(self, shards: list[int], start: int, items: list[Item], free: int) -> int:
        """Report ``items`` and lease up to ``free`` attempts, one round trip per shard
        visited; returns how many were leased.  Shards are visited in rotation
        from ``start``; a shard with reports but no room left gets only those."""
        send = self.reporter.send
        by_shard: dict[int, list[Item]] = {}
        for item in items:
            by_shard.setdefault(item[0].lease.shard, []).append(item)
        got = 0
        for i in range(len(shards)):
            shard = shards[(start + i) % len(shards)]
            group = by_shard.pop(shard, [])
            if free <= 0:
                if group:
                    send(shard, group, None)
                continue
            req = LeaseRequest(
                self.id,
                free,
                self.lease_ttl_ms,
                tuple(self.options.queues),
                tuple(self.options.tenants),
                self.ledger.free_resources(),
            )
            leases = send(shard, group, req)
            if leases:
                self._dispatch(leases)
                got += len(leases)
                free -= len(leases)
        for shard, group in by_shard.items():  # shards this worker does not poll
            send(shard, group, None)
        return got

    def _dispatch(self, leases: list[Lease]) -> None:
        """Hold the leased attempts and hand them to the pool; a command task this
        worker may not run ends at once."""
        cap = self.log_max_lines
        attempts = [Attempt(lease, capture.LineBuffer(cap)) for lease in leases]
        self.ledger.hold(attempts)
        options = self.options
        commands = options.commands
        for attempt in attempts:
            if attempt.lease.kind != "python" and not options.allow_commands:
                self.ledger.ended(
                    attempt,
                    Outcome(
                        ok=False,
                        outcome="failed",
                        delay_ms=5_000,
                        error=f"worker {self.id} does not run command tasks (--allow-commands); "
                        f"route them to a queue served by one that does",
                    ),
                )
                continue
            if attempt.lease.kind != "python" and options.pass_env:
                attempt.passed_env = {n: os.environ[n] for n in options.pass_env if n in os.environ}
            if attempt.lease.kind != "python" and (commands.programs or commands.images):
                refusal = self._refusal(attempt)
                if refusal is not None:
                    self.ledger.ended(
                        attempt,
                        Outcome(ok=False, outcome="failed", error=refusal, retryable=False),
                    )
                    continue
            self.pool.submit(attempt)

    def _refusal(self, attempt: Attempt) -> str | None:
        """Why the allowlist refuses a command or container task (None: it runs; the
        program it resolved is the one executed)."""
        try:
            payload = serde.loads(attempt.lease.args)
        except Exception as exc:  # garbage args: run_command reports them
            log.debug("undecodable args of %s: %s", attempt.lease.iid, exc)
            return None
        refusal, attempt.executable = self.options.commands.check(attempt.lease.kind, payload)
        return refusal
