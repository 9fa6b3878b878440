"""What the worker's loops share: the attempts it holds, its slots and resources,
the ended attempts waiting to be reported, and its stop flags.

One lock (``mutex``) guards all of it, with two conditions on it: ``lock``,
which the lease loop waits on for free slots (and the drain for the last
reports), and ``report_cv``, which the reporter waits on for reports to send.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from redcron.worker.execute import Attempt, Outcome
from redcron.worker.hooks import Reports
from redcron.worker.options import WorkerOptions

#: reports sent in one batch at most; also how far the held attempts may run
#: ahead of the capacity while reports are not getting through
MAX_REPORT = 256

Item = tuple[Attempt, Outcome]


def token(attempt: Attempt) -> tuple[str, str]:
    """The lease token that names an attempt: (task id, epoch)."""
    return attempt.lease.iid, attempt.lease.epoch


class Ledger:
    """The attempts a worker holds and the slots they take.

    Args:
        options: the worker's (capacity, cpus, mem).
    """

    def __init__(self, options: WorkerOptions) -> None:
        self.capacity = options.capacity
        # A lease call has a fixed cost in Redis (the dispatcher's walk) of several
        # times one more task in its batch: with prefetched work queued, the slots
        # are busy anyway, so wait for half the capacity to be free and lease that.
        prefetch = options.capacity - options.slots
        self.min_batch = max(1, self.capacity // 2 if prefetch else self.capacity // 4)
        self.cpus = options.cpus
        self.mem = options.mem_bytes
        #: how many attempts wait in the pool for a slot: the worker sets its
        #: pool's (the pool is built with :meth:`ended`, so it comes second)
        self.queued: Callable[[], int] = lambda: 0
        self.cpu_used = 0.0
        self.mem_used = 0
        # leased attempts that have not finished (running or waiting for a slot);
        # a finished one frees its slot at once, while its report is on the way
        self.busy = 0
        # the lease loop waits for this many free slots (0: not waiting), so a
        # finishing task wakes it only when there is a batch worth leasing
        self.wake_at = 0
        self.wake_when_dry = False  # ... or as soon as the pool has nothing queued
        # keyed by the whole token, not the task id: a task retried at once
        # (Retry(delay=0)) can be leased again here while its previous attempt
        # still waits to be reported, and each attempt holds its own slot
        self.active: dict[tuple[str, str], Attempt] = {}
        self.mutex = threading.RLock()
        self.lock = threading.Condition(self.mutex)
        # ended attempts waiting to be reported; the lease loop sends them with its
        # next lease while it is busy, the reporter thread when it is not
        self.done: list[Item] = []
        self.leaser_reports = False
        #: batches the lease loop reported, for the reporter thread to settle
        #: (hooks, then forget): the line per attempt is off the lease loop
        self.settling: list[Reports] = []
        self.closing = False
        self.report_cv = threading.Condition(self.mutex)
        self.stopping = threading.Event()
        self.hard_stop = threading.Event()
        self.reporter_done = threading.Event()
        self.processed = 0

    def hold(self, attempts: list[Attempt]) -> None:
        """Take a slot and the resources of each newly leased attempt."""
        with self.lock:
            for attempt in attempts:
                self.active[token(attempt)] = attempt
                self.busy += 1
                self.cpu_used += attempt.lease.cpu
                self.mem_used += attempt.lease.mem

    def free_resources(self) -> tuple[float | None, int | None]:
        """What is left of the declared capacity (None: not declared)."""
        with self.lock:
            return (
                None if self.cpus is None else max(0.0, self.cpus - self.cpu_used),
                None if self.mem is None else max(0, self.mem - self.mem_used),
            )

    def wait_for_slots(self, need: int, timeout: float, when_dry: bool = False) -> None:
        """Wait (caller holds the lock) until ``need`` slots are free (or, with
        ``when_dry``, the pool has nothing queued), or ``timeout``."""
        self.wake_at = need
        self.wake_when_dry = when_dry
        try:
            self.lock.wait(timeout)
        finally:
            self.wake_at = 0
            self.wake_when_dry = False

    def free_slot(self, attempt: Attempt) -> None:
        """Give back an attempt's slot and resources, once: it finished, ended before it
        began, or was handed back (caller holds the lock)."""
        if attempt.slot_freed:
            return
        attempt.slot_freed = True
        self.busy -= 1
        self.cpu_used -= attempt.lease.cpu
        self.mem_used -= attempt.lease.mem
        if self.wake_at and (
            self.capacity - self.busy >= self.wake_at or (self.wake_when_dry and not self.queued())
        ):
            self.lock.notify()

    def ended(self, attempt: Attempt, outcome: Outcome) -> None:
        """``attempt`` ended with ``outcome``: free its slot, queue its report."""
        # The slot is free as soon as the attempt has ended, not once its report
        # has landed: the lease stays held (and heartbeated) until then, but the
        # next task need not wait a reporting round trip to start.
        if attempt.ended is None:  # ended by the worker, not by running to an outcome
            attempt.ended = time.monotonic()
        with self.lock:
            self.free_slot(attempt)
            self.done.append((attempt, outcome))
            if not self.leaser_reports:
                self.report_cv.notify()

    def defer(self, reports: Reports) -> None:
        """Have the reporter thread settle a batch the lease loop reported
        (:meth:`~redcron.worker.reporting.Reporter.settle`)."""
        with self.lock:
            self.settling.append(reports)
            self.report_cv.notify()

    def take_done(self) -> list[Item]:
        """Ended attempts to report, a batch at most (caller holds the lock)."""
        items = self.done[:MAX_REPORT]
        del self.done[:MAX_REPORT]
        return items

    def set_leaser_reports(self, on: bool, unsent: list[Item] | None = None) -> None:
        """Say whether the lease loop carries reports; when it stops, the reporter
        takes over what is waiting (``unsent`` first: a batch that failed to go)."""
        with self.lock:
            if unsent:
                self.done[:0] = unsent
            self.leaser_reports = on
            if not on and self.done:
                self.report_cv.notify()

    def still_held(self, items: list[Item]) -> list[Item]:
        """Of a batch that failed to go, what is still to report (caller holds the
        lock): a shard's reports that went through were forgotten."""
        return [it for it in items if token(it[0]) in self.active]

    def forget(self, group: Sequence[Item]) -> None:
        """The reports of ``group`` landed: the attempts are no longer held."""
        with self.lock:
            for attempt, _out in group:
                self.active.pop(token(attempt), None)
            self.processed += len(group)
            if self.stopping.is_set():
                self.lock.notify_all()  # the drain waits for the last report

    def leased(self, limit: int) -> list[str]:
        """Instance ids of up to ``limit`` attempts held now (begun or waiting)."""
        with self.lock:
            held = [j.lease.iid for j in self.active.values() if not j.finished]
        return sorted(held)[:limit]

    def running(self) -> int:
        """Attempts executing now (begun, not finished)."""
        with self.lock:
            return sum(1 for j in self.active.values() if j.began is not None and not j.finished)
