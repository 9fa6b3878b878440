"""Leasing: the lease loop, on the worker's main thread.

It leases up to the free slots plus the prefetch from every shard and hands
the attempts to the pool; while busy, it sends the reports of the attempts
that ended in the same round trip as its next lease, and leaves the hooks of
the reported batch (the line per attempt) to the reporter thread; when nothing
is ready it blocks (≤ 1 s) on the wake lists, and the reporter thread takes
the reports.
"""

from __future__ import annotations

import logging
import os
import time

from redcron import serde
from redcron.engine import TRANSIENT, Lease, LeaseRequest
from redcron.worker import capture
from redcron.worker.crew import Crew, Role, registered_tasks
from redcron.worker.execute import Attempt, Outcome
from redcron.worker.ledger import MAX_REPORT, Item
from redcron.worker.reporting import Reporter

# the worker's logger: operators and tests filter on it, wherever the line is written
log = logging.getLogger("redcron.worker.worker")


def next_start(shards: list[int], served: int) -> int:
    """Where the next round's rotation over ``shards`` (sorted) begins: at the
    first shard after ``served``, the one that last leased, wrapping around.

    A round's free slots go to the first shard from there with ready work, so
    every backlogged shard gets one round in turn, wherever the idle ones sit
    (a rotation that only moved one place per round gave a busy shard the
    turns of the idle shards before it too)."""
    for i, shard in enumerate(shards):
        if shard > served:
            return i
    return 0


class Leaser(Role):
    """The lease loop of one worker over its ``shards``."""

    def __init__(self, crew: Crew, reporter: Reporter) -> None:
        super().__init__(crew)
        self.log_max_lines = crew.app.settings.log_max_lines
        self.reporter = reporter
        #: reports of shards that are failing, kept for their next try
        self.parked: list[Item] = []
        #: the tasks this worker runs: the lease leaves the others' instances ready
        self.tasks = registered_tasks(crew.app, crew.options)
        #: tasks the lease left ready here, said once each (WARNING)
        self.unregistered: set[str] = set()

    def run(self, shards: list[int]) -> None:
        """Lease and dispatch until the worker stops.

        A shard whose call fails (its cluster master is down; on one server, all
        of them) is left alone for its gate delay (:class:`ShardGate`) while
        the others go on; its reports wait in :attr:`parked` until it is tried
        again, and go to the reporter when the loop stops."""
        ledger = self.ledger
        gate = self.gate
        served = -1  # the shard that last leased: the next round starts after it
        while not ledger.stopping.is_set():
            with ledger.lock:
                ledger.leaser_reports = True
                free = ledger.capacity - ledger.busy
                if len(ledger.active) >= ledger.capacity + MAX_REPORT:
                    free = 0  # reports are not getting through: lease no more until they do
                if free <= 0 and not ledger.done:
                    ledger.wait_for_slots(1, 0.5 if not self.parked else 0.1)
                    if not self._parked_due():
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
            items = self.parked + items
            self.parked = []
            up = gate.open(shards, time.monotonic())
            got, last = self._exchange(up, next_start(up, served), items, free)
            if last is not None:
                served = last
            if got or free <= 0:
                continue
            # nothing ready: the reporter sends what ends while we block
            ledger.set_leaser_reports(False)
            up = gate.open(shards, time.monotonic())
            if not up:  # every shard failing: wait for the first one's next try
                ledger.stopping.wait(max(0.01, gate.wait(time.monotonic())))
                continue
            try:
                self.broker.wait_for_work(up, self.options.queues, 1.0)
            except TRANSIENT as exc:  # a shard failing since the exchange: next round
                self._outage.failed(exc, "waiting for work")
                ledger.stopping.wait(0.1)
        ledger.set_leaser_reports(False, unsent=self.parked)
        self.parked = []

    def _parked_due(self) -> bool:
        """Whether a parked report's shard is due a try."""
        now = time.monotonic()
        return bool(self.gate.open(sorted({it[0].lease.shard for it in self.parked}), now))

    def _exchange(
        self, shards: list[int], start: int, items: list[Item], free: int
    ) -> tuple[int, int | None]:
        """Report ``items`` and lease up to ``free`` attempts, one round trip per shard
        visited; returns how many were leased and the last shard that leased (None:
        none did).  Shards are visited in rotation from ``start``; a shard with
        reports but no room left gets only those.
        ``shards`` are the ones to call now: the reports of any other shard, and
        of a shard whose call fails, are parked (:attr:`parked`)."""
        exchange = self.reporter.exchange
        gate = self.gate
        by_shard: dict[int, list[Item]] = {}
        for item in items:
            by_shard.setdefault(item[0].lease.shard, []).append(item)
        got = 0
        last: int | None = None
        for i in range(len(shards)):
            shard = shards[(start + i) % len(shards)]
            group = by_shard.pop(shard, [])
            req = None
            if free > 0:
                req = LeaseRequest(
                    self.id,
                    free,
                    self.lease_ttl_ms,
                    tuple(self.options.queues),
                    tuple(self.options.tenants),
                    self.ledger.free_resources(),
                    self.tasks,
                )
            elif not group:
                continue
            try:
                leases, reported, unregistered = exchange(shard, group, req)
            except TRANSIENT as exc:
                gate.failed(shard, exc, "lease" if req else "report", time.monotonic())
                with self.ledger.lock:
                    self.parked += self.ledger.still_held(group)
                continue
            gate.ok(shard)
            if unregistered:
                self._unregistered(unregistered)
            if leases:
                # the slots first: the lines of the reported batch can wait for them
                self._dispatch(leases)
                got += len(leases)
                free -= len(leases)
                last = shard
            self.ledger.defer(reported)  # its lines: on the reporter thread
        open_now = set(gate.open(sorted(by_shard), time.monotonic()))
        for shard, group in by_shard.items():  # shards not visited: not polled, or failing
            if shard not in open_now:
                self.parked += group
                continue
            try:
                _, reported, _ = exchange(shard, group, None)
            except TRANSIENT as exc:
                gate.failed(shard, exc, "report", time.monotonic())
                with self.ledger.lock:
                    self.parked += self.ledger.still_held(group)
                continue
            gate.ok(shard)
            self.ledger.defer(reported)
        return got, last

    def _unregistered(self, names: list[str]) -> None:
        """Say once per task name that its instances wait here for another worker."""
        for name in names:
            if name in self.unregistered:
                continue
            self.unregistered.add(name)
            log.warning(
                "task %r is not registered on this worker (%s): its tasks are left "
                "ready, no attempt spent, for a worker that registers it; start one "
                "with the app that defines it (redcron inspect counts them as unrunnable)",
                name,
                _registered_text(self.tasks),
            )

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


def _registered_text(tasks: frozenset[str], shown: int = 10) -> str:
    """``registered: a, b, c and 4 more`` (``registers no task``)."""
    if not tasks:
        return "it registers no task"
    names = sorted(tasks)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return "registered: " + ", ".join(names[:shown]) + more
