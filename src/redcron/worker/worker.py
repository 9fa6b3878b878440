"""The worker: pull leases in batches, run them, heartbeat, report in batches.

A :class:`Worker` is made of roles, one module each, sharing a
:class:`~redcron.worker.ledger.Ledger` (the attempts it holds, its slots, the
reports waiting to go); each loop runs on its own thread, with its own Redis
connection from the pool:

- leasing (main thread, :mod:`~redcron.worker.leasing`): leases up to the free
  slots plus the prefetch from every shard and dispatches; while busy, it
  sends the reports of the attempts that ended (logs, completions, failures)
  in the same pipeline as its next lease, one round trip per batch; when
  nothing is ready it blocks (≤ 1 s) on the wake lists.
- reporting (:mod:`~redcron.worker.reporting`): reports what ends while the
  lease loop blocks, backs off or has stopped, so no result waits on the wake
  lists.
- keeping (:mod:`~redcron.worker.keeping`): sends 'running' marks, heartbeats
  all leases every TTL/6 (one call per shard), publishes the worker in the
  registry, enforces timeouts, kills revoked work, and runs promote/reap at
  most once per shard per interval across all workers (a short lock).

Attempts run in a pool (:mod:`~redcron.worker.pools`), ``async def`` tasks'
on the worker's event loop (:mod:`~redcron.worker.aio`), with the worker's
attempt hooks around them (:mod:`~redcron.worker.hooks`).  A slot is free as
soon as its attempt ends; the lease stays held (and heartbeated) until its
report lands.

Redis going away never kills the worker: every loop backs off and retries,
and finished attempts wait in memory until they can be reported.  On a Redis
Cluster a master that is down fails only its own shards: the roles leave
those alone for a while (a :class:`~redcron.engine.retry.ShardGate` they
share) and go on leasing, reporting and heartbeating on the others.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterable
from types import FrameType
from typing import TYPE_CHECKING, Any

from redcron import tracing
from redcron.clock import ulid
from redcron.engine import TRANSIENT, Backoff, Engine, Outage, ShardGate
from redcron.redact import masked_url
from redcron.store import AuditLog
from redcron.worker import capture
from redcron.worker.aio import coroutine_tasks
from redcron.worker.attempt_log import AttemptLog
from redcron.worker.audit import Audit
from redcron.worker.crew import Crew
from redcron.worker.execute import Attempt
from redcron.worker.hooks import AttemptHook, HookChain
from redcron.worker.keeping import Keeper
from redcron.worker.leasing import Leaser
from redcron.worker.ledger import Ledger, token
from redcron.worker.options import WorkerOptions
from redcron.worker.pools import Pool, ProcessPool, ThreadPool
from redcron.worker.progress import ProgressWriter
from redcron.worker.reporting import Reporter
from redcron.worker.tracing import Tracing

if TYPE_CHECKING:
    from redcron.app import App

log = logging.getLogger(__name__)

#: the longest a shard that failed (its cluster master down) is left alone
#: before the next try, seconds: how late its work resumes once it is back
GATE_CAP_S = 2.0


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
        self.app = app
        self.broker: Engine = app.broker
        self.settings = app.settings
        self.lease_ttl_ms = options.lease_ttl_ms(self.settings)
        self.id = options.name or f"{socket.gethostname()}:{os.getpid()}:{ulid()[-6:]}"
        # one for all the loops: an outage is one warning and one recovery line
        self._outage = Outage(log, f"worker {self.id}")
        self.ledger = Ledger(options)
        self.pool: Pool
        if options.pool == "threads":
            self.pool = ThreadPool(app, options.slots, self.ledger.ended, self.broker)
        else:
            assert options.app_path is not None
            self.pool = ProcessPool(
                app, options.slots, self.ledger.ended, options.app_path, self.settings.log_max_lines
            )
        self.ledger.queued = self.pool.queued
        #: writes what tasks say with ``ctx.progress`` (keeper and reporter)
        self.progress = ProgressWriter(self.broker, self.id)
        #: the attempt hooks, in order; fixed once :meth:`run` starts
        self.hooks: list[AttemptHook] = [AttemptLog()]
        if options.audit:
            self.hooks.append(Audit(AuditLog(app.broker), self.id, self.ledger.hard_stop))
        self.hooks.extend(hooks)

    @property
    def processed(self) -> int:
        """Attempts reported so far."""
        return self.ledger.processed

    # -- public ---------------------------------------------------------------

    def stop(self, graceful: bool = True) -> None:
        """Stop leasing; running attempts finish within the grace period (or not at all)."""
        self.ledger.stopping.set()
        if not graceful:
            self.ledger.hard_stop.set()
        with self.ledger.lock:
            self.ledger.lock.notify_all()

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
        options = self.options
        tracer = tracing.tracer()  # on: a span per attempt (worker/tracing.py)
        if tracer is not None and not any(isinstance(h, Tracing) for h in self.hooks):
            self.hooks.insert(0, Tracing(tracer))
        hooks = HookChain(self.hooks)
        coroutines = coroutine_tasks(self.app)
        plain = options.allow_commands or len(coroutines) < len(self.app.tasks)
        log.info(
            "worker %s on %s: %d %s slots%s, queues %s, shards %d, lease ttl %.1fs",
            self.id,
            masked_url(self.settings.redis_url),
            options.slots,
            type(self.pool).__name__ if plain else "event loop",
            f" (async def tasks on the event loop: {len(coroutines)})"
            if coroutines and plain
            else "",
            ",".join(options.queues),
            len(shards),
            self.lease_ttl_ms / 1000,
        )
        crew = Crew(
            self.app,
            self.id,
            options,
            self.lease_ttl_ms,
            self.ledger,
            self.pool,
            self._outage,
            ShardGate(0.1, GATE_CAP_S, self._outage, self.broker.shards_with),
            self.progress,
        )
        reporter = Reporter(crew, hooks)
        leaser = Leaser(crew, reporter)
        keeper = Keeper(crew)
        self.pool.start(hooks, plain)
        reporting = threading.Thread(target=reporter.run, name="redcron-report", daemon=True)
        keeping = threading.Thread(
            target=keeper.run, args=(shards,), name="redcron-keeper", daemon=True
        )
        reporting.start()
        keeping.start()
        try:
            leaser.run(shards)
        finally:
            self._drain()
            with self.ledger.lock:
                self.ledger.closing = True
                self.ledger.report_cv.notify()
            reporting.join(timeout=10)
            keeping.join(timeout=5)
            self.pool.shutdown()
            log.info("worker %s stopped after %d attempts", self.id, self.processed)

    # -- internals --------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.ledger.stopping.is_set():
            log.warning("second signal: handing leases back now")
            self.stop(graceful=False)
        else:
            log.info("signal %d: draining (grace %.0fs)", signum, self.options.grace)
            self.stop(graceful=True)

    def _connect(self) -> list[int]:
        backoff = Backoff(0.1, 5.0, log, self._outage)
        while True:
            try:
                shards = list(range(self.broker.shards))
                backoff.reset()
                return shards
            except TRANSIENT as exc:
                if self.ledger.stopping.is_set():
                    raise
                time.sleep(backoff.failed(exc, "connecting to redis"))

    def _drain(self) -> None:
        """Hand back what never began, wait up to the grace period for running
        attempts, then hand the rest back."""
        ledger = self.ledger
        with ledger.lock:
            attempts = list(ledger.active.values())
        # Prefetched attempts go back at once, for another worker to run now; the
        # claim (under each attempt's lock) keeps a slot that frees meanwhile from
        # starting one that is being handed back.
        waiting = self._claim(attempts, unstarted_only=True)
        if waiting:
            log.info("handing back %d leases that had not started", len(waiting))
            self._hand_back(waiting)
        deadline = time.monotonic() + (0 if ledger.hard_stop.is_set() else self.options.grace)
        with ledger.lock:
            while ledger.active and not ledger.hard_stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                ledger.lock.wait(min(left, 0.2))
            attempts = list(ledger.active.values())
        # finished (or already ended) attempts are the reporter's to send, not to hand back
        left_over = self._claim(attempts, unstarted_only=False)
        if left_over:
            log.warning("handing back %d unfinished leases", len(left_over))
            for attempt in left_over:
                attempt.kill("handed back")
            self._hand_back(left_over)
        ledger.reporter_done.set()

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
            by_shard.setdefault(attempt.lease.shard, []).append(token(attempt))
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
        with self.ledger.lock:
            for attempt in attempts:
                self.ledger.active.pop(token(attempt), None)
                self.ledger.free_slot(attempt)
            self.ledger.lock.notify_all()
