"""The worker: pull leases in batches, run them, heartbeat, report in batches.

Threads (each with its own Redis connection from the pool):

- main (lease loop): leases up to the free slots plus the prefetch from every
  shard and dispatches; while busy, it sends the reports of the attempts that
  ended (logs, completions, failures) in the same pipeline as its next lease,
  one round trip per batch; when nothing is ready it blocks (≤ 1 s) on the
  wake lists.
- reporter: reports what ends while the lease loop blocks, backs off or has
  stopped, so no result waits on the wake lists.
- keeper: sends 'running' marks, heartbeats all leases every TTL/6 (one call
  per shard), enforces timeouts, kills revoked work, and runs promote/reap at
  most once per shard per interval across all workers (a short lock).

A slot is free as soon as its attempt ends; the lease stays held (and
heartbeated) until its report lands.

Redis going away never kills the worker: every loop backs off and retries,
and finished attempts wait in memory until they can be reported.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from redcron import serde
from redcron.broker import FailItem, FailResult, Lease, LeaseRequest
from redcron.broker.audit import AuditLog
from redcron.broker.retry import TRANSIENT, Backoff, Outage
from redcron.broker.workers import TTL_LEASES, Registration, WorkerRegistry
from redcron.clock import ulid
from redcron.errors import NotFound, NotReplicated
from redcron.redact import masked_url
from redcron.worker import capture
from redcron.worker.attempt_log import AttemptLog
from redcron.worker.audit import Audit
from redcron.worker.execute import Attempt, Outcome
from redcron.worker.hooks import AttemptHook, HookChain, Reports
from redcron.worker.options import WorkerOptions
from redcron.worker.pools import Pool, ProcessPool, ThreadPool

if TYPE_CHECKING:
    from redcron.app import App

log = logging.getLogger(__name__)

MAX_REPORT = 256


class Worker:
    """Run tasks from the given queues until stopped.

    Args:
        app: the application whose registered tasks this worker runs.
        options: how it runs (:class:`WorkerOptions`); or give the options'
            fields as keyword arguments instead: ``Worker(app, queues=["default"],
            concurrency=8)`` is ``Worker(app, WorkerOptions(queues=["default"],
            concurrency=8))``.
        hooks: attempt hooks (:class:`~redcron.worker.hooks.AttemptHook`), run
            after the worker's own (its log line, and the audit with ``audit``).
    """

    def __init__(
        self,
        app: App,
        options: WorkerOptions | None = None,
        *,
        hooks: Iterable[AttemptHook] = (),
        **kwargs: Any,
    ) -> None:
        if options is None:
            options = WorkerOptions(**kwargs)
        elif kwargs:
            raise TypeError(
                f"Worker: give options or their fields as keywords, not both ({', '.join(kwargs)})"
            )
        self.options = options
        self.queues = list(options.queues)
        self.tenants = list(options.tenants)
        self.app = app
        self.broker = app.broker
        self.settings = app.settings
        self.lease_ttl_ms = options.lease_ttl_ms(self.settings)
        self.concurrency = options.slots
        self.capacity = options.capacity
        self.cpus = options.cpus
        self.mem = options.mem_bytes
        self._cpu_used = 0.0
        self._mem_used = 0
        # leased attempts that have not finished (running or waiting for a slot);
        # a finished one frees its slot at once, while its report is on the way
        self._busy = 0
        # the lease loop waits for this many free slots (0: not waiting), so a
        # finishing task wakes it only when there is a batch worth leasing
        self._wake_at = 0
        self._wake_when_dry = False  # ... or as soon as the pool has nothing queued
        # A lease call has a fixed cost in Redis (the dispatcher's walk) of several
        # times one more task in its batch: with prefetched work queued, the slots
        # are busy anyway, so wait for half the capacity to be free and lease that.
        prefetch = options.capacity - options.slots
        self._min_batch = max(1, self.capacity // 2 if prefetch else self.capacity // 4)
        self.allow_commands = options.allow_commands
        self.commands = options.commands
        self.pass_env = tuple(options.pass_env)
        self.grace = options.grace
        self.id = options.name or f"{socket.gethostname()}:{os.getpid()}:{ulid()[-6:]}"
        # one for all the loops: an outage is one warning and one recovery line
        self._outage = Outage(log, f"worker {self.id}")
        # keyed by the whole token, not the task id: a task retried at once
        # (Retry(delay=0)) can be leased again here while its previous attempt
        # still waits to be reported, and each attempt holds its own slot
        self._active: dict[tuple[str, str], Attempt] = {}
        self._mutex = threading.RLock()
        self._lock = threading.Condition(self._mutex)
        # ended attempts waiting to be reported; the lease loop sends them with its
        # next lease while it is busy, the reporter thread when it is not
        self._done: list[tuple[Attempt, Outcome]] = []
        self._leaser_reports = False
        self._closing = False
        self._report_cv = threading.Condition(self._mutex)
        self._stopping = threading.Event()
        self._hard_stop = threading.Event()
        self._reporter_done = threading.Event()
        self.processed = 0
        self.pool: Pool
        if options.pool == "threads":
            self.pool = ThreadPool(app, self.concurrency, self._on_done, self.broker)
        else:
            assert options.app_path is not None
            self.pool = ProcessPool(
                app, self.concurrency, self._on_done, options.app_path, self.settings.log_max_lines
            )
        #: the attempt hooks, in order; fixed once :meth:`run` starts
        self.hooks: list[AttemptHook] = [AttemptLog()]
        if options.audit:
            self.hooks.append(Audit(AuditLog(self.broker), self.id, self._hard_stop))
        self.hooks.extend(hooks)
        self._hooks = HookChain()

    # -- public ---------------------------------------------------------------

    def stop(self, graceful: bool = True) -> None:
        """Stop leasing; running attempts finish within the grace period (or not at all)."""
        self._stopping.set()
        if not graceful:
            self._hard_stop.set()
        with self._lock:
            self._lock.notify_all()

    def run(self) -> None:
        """Serve until :meth:`stop` (or SIGTERM/SIGINT when on the main thread)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        capture.install()
        # The GIL switch interval is left at the interpreter's (5 ms): a shorter one
        # made 8 I/O-bound slots hand the GIL over more often for nothing (5-10%
        # more worker CPU per task on the incr benchmark), and with prefetched
        # work queued a busy thread does not keep a slot waiting.
        shards = self._connect()
        log.info(
            "worker %s on %s: %d %s slots, queues %s, shards %d, lease ttl %.1fs",
            self.id,
            masked_url(self.settings.redis_url),
            self.concurrency,
            type(self.pool).__name__,
            ",".join(self.queues),
            len(shards),
            self.lease_ttl_ms / 1000,
        )
        self._hooks = HookChain(self.hooks)
        self.pool.start(self._hooks)
        reporter = threading.Thread(target=self._report_loop, name="redcron-report", daemon=True)
        keeper = threading.Thread(
            target=self._keep_loop, args=(shards,), name="redcron-keeper", daemon=True
        )
        reporter.start()
        keeper.start()
        try:
            self._lease_loop(shards)
        finally:
            self._drain(shards)
            with self._lock:
                self._closing = True
                self._report_cv.notify()
            reporter.join(timeout=10)
            keeper.join(timeout=5)
            self.pool.shutdown()
            log.info("worker %s stopped after %d attempts", self.id, self.processed)

    # -- internals --------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping.is_set():
            log.warning("second signal: handing leases back now")
            self.stop(graceful=False)
        else:
            log.info("signal %d: draining (grace %.0fs)", signum, self.grace)
            self.stop(graceful=True)

    def _connect(self) -> list[int]:
        backoff = Backoff(0.1, 5.0, log, self._outage)
        while True:
            try:
                shards = list(range(self.broker.shards))
                backoff.reset()
                return shards
            except TRANSIENT as exc:
                if self._stopping.is_set():
                    raise
                time.sleep(backoff.failed(exc, "connecting to redis"))

    def _lease_loop(self, shards: list[int]) -> None:
        backoff = Backoff(0.1, 5.0, log, self._outage)
        start = 0
        while not self._stopping.is_set():
            with self._lock:
                self._leaser_reports = True
                free = self.capacity - self._busy
                if len(self._active) >= self.capacity + MAX_REPORT:
                    free = 0  # reports are not getting through: lease no more until they do
                if free <= 0 and not self._done:
                    self._wait_for_slots(1, 0.5)
                    continue
                if 0 < free < self._min_batch and self._busy:
                    if self.pool.queued():
                        # every slot has work: lease once a batch is free, or the
                        # queue runs dry (a slot would idle)
                        self._wait_for_slots(self._min_batch, 0.05, when_dry=True)
                    else:
                        # a lease call costs a round trip: gather a few free slots first
                        self._wait_for_slots(self._min_batch, 0.002)
                    free = self.capacity - self._busy
                items = self._take_done()
            try:
                got = self._exchange(shards, start, items, free)
                items = []
                start += 1
                if not got and free > 0:
                    # nothing ready: the reporter sends what ends while we block
                    self._set_leaser_reports(False)
                    self.broker.wait_for_work(shards, self.queues, 1.0)
                backoff.reset()
            except TRANSIENT as exc:
                with self._lock:  # a shard's reports that went through are forgotten
                    items = [it for it in items if _token(it[0]) in self._active]
                self._set_leaser_reports(False, unsent=items)
                self._stopping.wait(backoff.failed(exc, "lease"))
        self._set_leaser_reports(False)

    def _exchange(
        self, shards: list[int], start: int, items: list[tuple[Attempt, Outcome]], free: int
    ) -> int:
        """Report ``items`` and lease up to ``free`` attempts, one round trip per shard
        visited; returns how many were leased.  Shards are visited in rotation
        from ``start``; a shard with reports but no room left gets only those."""
        by_shard: dict[int, list[tuple[Attempt, Outcome]]] = {}
        for item in items:
            by_shard.setdefault(item[0].lease.shard, []).append(item)
        got = 0
        for i in range(len(shards)):
            shard = shards[(start + i) % len(shards)]
            group = by_shard.pop(shard, [])
            if free <= 0:
                if group:
                    self._send(shard, group, None)
                continue
            req = LeaseRequest(
                self.id,
                free,
                self.lease_ttl_ms,
                tuple(self.queues),
                tuple(self.tenants),
                self._free_resources(),
            )
            leases = self._send(shard, group, req)
            if leases:
                self._dispatch(shard, leases)
                got += len(leases)
                free -= len(leases)
        for shard, group in by_shard.items():  # shards this worker does not poll
            self._send(shard, group, None)
        return got

    def _wait_for_slots(self, need: int, timeout: float, when_dry: bool = False) -> None:
        """Wait (caller holds the lock) until ``need`` slots are free (or, with
        ``when_dry``, the pool has nothing queued), or ``timeout``."""
        self._wake_at = need
        self._wake_when_dry = when_dry
        try:
            self._lock.wait(timeout)
        finally:
            self._wake_at = 0
            self._wake_when_dry = False

    def _free_resources(self) -> tuple[float | None, int | None]:
        """What is left of the declared capacity (None: not declared)."""
        with self._lock:
            return (
                None if self.cpus is None else max(0.0, self.cpus - self._cpu_used),
                None if self.mem is None else max(0, self.mem - self._mem_used),
            )

    def _dispatch(self, shard: int, leases: list[Lease]) -> None:
        cap = self.settings.log_max_lines
        attempts = [Attempt(lease, capture.LineBuffer(cap)) for lease in leases]
        with self._lock:
            for attempt in attempts:
                self._active[_token(attempt)] = attempt
                self._busy += 1
                self._cpu_used += attempt.lease.cpu
                self._mem_used += attempt.lease.mem
        for attempt in attempts:
            if attempt.lease.kind != "python" and not self.allow_commands:
                self._on_done(
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
            if attempt.lease.kind != "python" and self.pass_env:
                attempt.passed_env = {n: os.environ[n] for n in self.pass_env if n in os.environ}
            if attempt.lease.kind != "python" and (self.commands.programs or self.commands.images):
                refusal = self._refusal(attempt)
                if refusal is not None:
                    self._on_done(
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
        refusal, attempt.executable = self.commands.check(attempt.lease.kind, payload)
        return refusal

    def _free_slot(self, attempt: Attempt) -> None:
        """Give back an attempt's slot and resources, once: it finished, ended before it
        began, or was handed back (caller holds the lock)."""
        if attempt.slot_freed:
            return
        attempt.slot_freed = True
        self._busy -= 1
        self._cpu_used -= attempt.lease.cpu
        self._mem_used -= attempt.lease.mem
        if self._wake_at and (
            self.capacity - self._busy >= self._wake_at
            or (self._wake_when_dry and not self.pool.queued())
        ):
            self._lock.notify()

    def _on_done(self, attempt: Attempt, outcome: Outcome) -> None:
        # The slot is free as soon as the attempt has ended, not once its report
        # has landed: the lease stays held (and heartbeated) until then, but the
        # next task need not wait a reporting round trip to start.
        if attempt.ended is None:  # ended by the worker, not by running to an outcome
            attempt.ended = time.monotonic()
        with self._lock:
            self._free_slot(attempt)
            self._done.append((attempt, outcome))
            if not self._leaser_reports:
                self._report_cv.notify()

    def _take_done(self) -> list[tuple[Attempt, Outcome]]:
        """Ended attempts to report, a batch at most (caller holds the lock)."""
        items = self._done[:MAX_REPORT]
        del self._done[:MAX_REPORT]
        return items

    def _set_leaser_reports(
        self, on: bool, unsent: list[tuple[Attempt, Outcome]] | None = None
    ) -> None:
        """Say whether the lease loop carries reports; when it stops, the reporter
        takes over what is waiting (``unsent`` first: a batch that failed to go)."""
        with self._lock:
            if unsent:
                self._done[:0] = unsent
            self._leaser_reports = on
            if not on and self._done:
                self._report_cv.notify()

    def _report_loop(self) -> None:
        """Report what ends while the lease loop is not about to (it carries reports
        with its next lease while busy): blocked on an empty queue, backing off,
        or stopped."""
        backoff = Backoff(0.1, 5.0, log, self._outage)
        while True:
            with self._lock:
                while not (self._done and (self._closing or not self._leaser_reports)):
                    if self._closing and not self._done:
                        return
                    self._report_cv.wait(1.0)
                items = self._take_done()
            try:
                self._report(items)
                backoff.reset()
            except TRANSIENT as exc:
                with self._lock:  # a shard's reports that went through are forgotten
                    self._done[:0] = [it for it in items if _token(it[0]) in self._active]
                delay = backoff.failed(exc, "report")
                if self._closing and self._hard_stop.is_set():
                    return
                time.sleep(delay)

    def _report(self, items: list[tuple[Attempt, Outcome]]) -> None:
        by_shard: dict[int, list[tuple[Attempt, Outcome]]] = {}
        for attempt, out in items:
            by_shard.setdefault(attempt.lease.shard, []).append((attempt, out))
        for shard, group in by_shard.items():
            self._send(shard, group, None)

    def _send(
        self, shard: int, group: list[tuple[Attempt, Outcome]], req: LeaseRequest | None
    ) -> list[Lease]:
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
            done, failed, leases = self.broker.report_and_lease(
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
        if group and self._hooks.after_report:
            reports = Reports(group, done, failed)
            for hook in self._hooks.after_report:
                hook(reports)
        with self._lock:
            for attempt, _out in group:
                self._active.pop(_token(attempt), None)
            self.processed += len(group)
            if self._stopping.is_set():
                self._lock.notify_all()  # the drain waits for the last report
        return leases

    def _rejected(
        self, group: list[tuple[Attempt, Outcome]], done: list[bool], failed: list[FailResult]
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

    def _keep_loop(self, shards: list[int]) -> None:
        hb_every = self.lease_ttl_ms / 1000 / 6
        next_hb = 0.0  # at once: nothing to renew yet, but the registry entry is published
        next_maint = 0.0
        registry = WorkerRegistry(self.broker)
        while not self._reporter_done.is_set():
            now = time.monotonic()
            self._enforce_timeouts(now)
            try:
                self._mark_running()
                if now >= next_hb:
                    self._heartbeat(shards)
                    self._register(registry)  # renewed with the leases
                    next_hb = now + hb_every
                if now >= next_maint:
                    for shard in shards:
                        if self.broker.try_maintenance_lock(
                            shard, self.id, self.settings.maintenance_interval
                        ):
                            self.broker.maintain(shard)
                    next_maint = now + self.settings.maintenance_interval * (
                        0.5 + random.random() / 2
                    )
            except TRANSIENT as exc:
                self._outage.failed(exc, "heartbeat/maintenance")
                next_hb = now + min(hb_every, 1.0)
                next_maint = now + 1.0
            if self._stopping.is_set() and not self._active:
                break
            time.sleep(0.05)
        self._register(registry, remove=True)

    def _register(self, registry: WorkerRegistry, remove: bool = False) -> None:
        """Publish this worker in the registry (``redcron workers list``), or take
        it out on a clean stop.  The entry lives a few lease TTLs: a worker that
        dies without a word drops out when its heartbeats stop renewing it."""
        if remove:
            try:
                registry.remove(self.id)
            except TRANSIENT as exc:  # on the way out: the entry expires anyway
                log.info("could not leave the worker registry (%s); it expires", exc)
            return
        with self._lock:
            running = sum(
                1 for j in self._active.values() if j.began is not None and not j.finished
            )
        registry.publish(
            Registration(
                id=self.id,
                host=socket.gethostname(),
                pid=os.getpid(),
                queues=self.queues,
                tenants=self.tenants,
                slots=self.concurrency,
                running=running,
                tasks=[*self.app.tasks, *(["redcron.command"] if self.allow_commands else [])],
            ),
            TTL_LEASES * self.lease_ttl_ms,
        )

    def _mark_running(self) -> None:
        """Send 'running' marks for attempts that began since the last tick.

        Off the lease path on purpose: a mark per batch would cost the hot
        loop a round trip; attempts that end within one tick (50 ms) go
        straight from leased to their outcome.
        """
        with self._lock:
            began = [
                j
                for j in self._active.values()
                if j.began is not None and not j.marked and not j.finished
            ]
        if not began:
            return
        by_shard: dict[int, list[tuple[str, str]]] = {}
        for attempt in began:
            by_shard.setdefault(attempt.lease.shard, []).append(
                (attempt.lease.iid, attempt.lease.epoch)
            )
        for shard, tokens in by_shard.items():
            self.broker.start(shard, self.id, tokens)
        for attempt in began:
            attempt.marked = True

    def _enforce_timeouts(self, now: float) -> None:
        with self._lock:
            overdue = [
                j
                for j in self._active.values()
                if j.deadline is not None
                and now > j.deadline
                and not j.finished
                and j.kill_reason is None
            ]
        for attempt in overdue:
            self._end_unkillable(
                attempt, "timed_out", f"timed out after {attempt.lease.timeout_ms / 1000}s"
            )

    def _end_unkillable(self, attempt: Attempt, reason: str, message: str) -> None:
        """Kill the attempt's process group; a Python thread is abandoned instead, and an
        attempt still waiting for a slot (prefetched) is ended without ever starting."""
        if attempt.kill(reason):
            return  # the pool sees the kill and reports the outcome
        with attempt.lock:
            if attempt.finished or attempt.abandoned:
                return
            began = attempt.began is not None
            if began and attempt.lease.kind != "python":
                return  # between start and spawn: run_command sees kill_reason, kills at once
            attempt.abandoned = True
        if began:
            log.warning("task %s %s; abandoning its thread", attempt.lease.iid, message)
            # only a thread that is running the task is lost to the pool: one that
            # never began keeps its slot, and a replacement would oversubscribe it
            self.pool.replace()
        else:
            log.info("task %s %s before it began; it will not run", attempt.lease.iid, message)
        outcome = "timed_out" if reason == "timed_out" else "cancelled"
        self._on_done(attempt, Outcome(ok=False, outcome=outcome, error=message))

    def _heartbeat(self, shards: list[int]) -> None:
        with self._lock:
            attempts = list(self._active.values())
        for shard in shards:
            # One token per task: the newest epoch.  An older attempt of the same
            # task (finished, its report on the way) lost its lease when the new one
            # was issued, and heartbeat answers by task id, so a second token for
            # the id would make the answer ambiguous.
            newest: dict[str, Attempt] = {}
            for j in attempts:
                if j.lease.shard != shard:
                    continue
                seen = newest.get(j.lease.iid)
                if seen is None or int(j.lease.epoch) > int(seen.lease.epoch):
                    newest[j.lease.iid] = j
            if not newest:
                continue
            tokens = [_token(j) for j in newest.values()]
            lost, revoked = self.broker.heartbeat(shard, self.id, self.lease_ttl_ms, tokens)
            for iid in lost:
                # a finished attempt's report may have landed since the heartbeat read
                # the map: only a lease lost under a running attempt is news
                if not newest[iid].finished:
                    log.warning("lease of %s lost; its result will be discarded", iid)
            for iid in revoked:
                attempt = newest.get(iid)
                if attempt is not None and attempt.kill_reason is None:
                    log.info("task %s cancelled; killing it", iid)
                    self._end_unkillable(attempt, "cancelled", "cancelled while running")

    def _drain(self, shards: list[int]) -> None:
        """Hand back what never began, wait up to the grace period for running
        attempts, then hand the rest back."""
        with self._lock:
            attempts = list(self._active.values())
        # Prefetched attempts go back at once, for another worker to run now; the
        # claim (under each attempt's lock) keeps a slot that frees meanwhile from
        # starting one that is being handed back.
        waiting = self._claim(attempts, unstarted_only=True)
        if waiting:
            log.info("handing back %d leases that had not started", len(waiting))
            self._hand_back(waiting)
        deadline = time.monotonic() + (0 if self._hard_stop.is_set() else self.grace)
        with self._lock:
            while self._active and not self._hard_stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._lock.wait(min(left, 0.2))
            attempts = list(self._active.values())
        # finished (or already ended) attempts are the reporter's to send, not to hand back
        left_over = self._claim(attempts, unstarted_only=False)
        if left_over:
            log.warning("handing back %d unfinished leases", len(left_over))
            for attempt in left_over:
                attempt.kill("handed back")
            self._hand_back(left_over)
        self._reporter_done.set()

    @staticmethod
    def _claim(attempts: list[Attempt], unstarted_only: bool) -> list[Attempt]:
        """Mark attempts abandoned (the pool will neither start nor report them)."""
        claimed = []
        for attempt in attempts:
            with attempt.lock:
                if attempt.finished or attempt.abandoned:
                    continue
                if unstarted_only and attempt.began is not None:
                    continue
                attempt.abandoned = True
            claimed.append(attempt)
        return claimed

    def _hand_back(self, attempts: list[Attempt]) -> None:
        by_shard: dict[int, list[tuple[str, str]]] = {}
        for attempt in attempts:
            by_shard.setdefault(attempt.lease.shard, []).append(_token(attempt))
        for shard, tokens in by_shard.items():
            # a few tries only: on the way out, and a lease not handed back expires anyway
            backoff = Backoff(0.2, 1.0, log)
            for tries in range(5):
                try:
                    self.broker.release(shard, self.id, tokens)
                    break
                except TRANSIENT as exc:
                    if tries == 4:
                        log.warning("hand-back failed (%s); the leases will expire", exc)
                    else:
                        time.sleep(backoff.failed(exc, "hand-back"))
        with self._lock:
            for attempt in attempts:
                self._active.pop(_token(attempt), None)
                self._free_slot(attempt)
            self._lock.notify_all()


def _token(attempt: Attempt) -> tuple[str, str]:
    """The lease token that names an attempt: (task id, epoch)."""
    return attempt.lease.iid, attempt.lease.epoch
