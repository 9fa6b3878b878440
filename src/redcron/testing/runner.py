"""Running tasks in the test's own thread, through the worker's own path.

:class:`InProcess` leases one attempt at a time with ``lease.lua`` (so the
order is the dispatcher's: priorities, tenant weights, caps, aging), marks it
running with ``start.lua``, runs it with the worker's
:func:`~redcron.worker.execute.run_python` (or ``run_command``), and reports
it with ``complete.lua``/``fail.lua``, as a worker with one slot would.
Retries, dead-lettering and a run's downstream tasks follow from the
scripts, not from anything here.

An ``async def`` task's attempt runs on an event loop of the testing mode's
own (one per :class:`InProcess`, on a thread, so a test that is itself a
coroutine may drain too), through the worker's own
:func:`~redcron.worker.aio.run_coroutine`: its timeout cancels it, in real
seconds, as on a worker.  One loop for every attempt, as a worker has one: a
client a task keeps in a module global stays on the loop it was made on.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from redcron.engine import FailItem, Lease
from redcron.errors import ConfigError
from redcron.keys import PRIORITIES
from redcron.serde import text as _s
from redcron.worker import capture
from redcron.worker.aio import LoopThread, is_coroutine_task, run_coroutine
from redcron.worker.execute import Attempt, Outcome, run_command, run_python
from redcron.worker.leasing import next_start

if TYPE_CHECKING:
    from redcron.app import App
    from redcron.engine import Broker

log = logging.getLogger(__name__)

#: the worker id the in-process attempts are leased under
WORKER = "redcron-testing"
#: the states a failed attempt leaves its task in when it will run again
#: (scheduled: a retry at once of a task with a rate, waiting for its turn)
RETRIED = ("retry_wait", "ready", "scheduled")


@dataclass
class Drained:
    """What a :meth:`~redcron.testing.TestApp.drain` ran, attempt by attempt.

    ``failed`` counts every attempt that did not succeed; each of those was
    ``retried`` (the task runs again), went ``dead`` (out of attempts, or a
    permanent error: in its tenant's DLQ) or was ``cancelled``.
    """

    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    dead: int = 0
    cancelled: int = 0

    @property
    def attempts(self) -> int:
        """Attempts run in all."""
        return self.succeeded + self.failed

    def add(self, other: Drained) -> None:
        self.succeeded += other.succeeded
        self.failed += other.failed
        self.retried += other.retried
        self.dead += other.dead
        self.cancelled += other.cancelled


class InProcess:
    """A one-slot worker that runs on the caller's thread, on demand."""

    def __init__(
        self, app: App, broker: Broker, allow_commands: bool = False, seed: int = 0
    ) -> None:
        self.app = app
        self.broker = broker
        self.allow_commands = allow_commands
        self._served = -1
        #: the queue names the last :meth:`lease_next` read
        self._known: list[str] = []
        #: the retry backoff's jitter (fail.lua takes the fraction from its
        #: caller): seeded, so a test's retry times are the same on every run
        self.jitter = random.Random(seed)
        #: the event loop of the ``async def`` tasks, started on the first one
        self._loop: LoopThread | None = None

    def close(self) -> None:
        """Stop the event loop, if an ``async def`` task started it."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    def queues(self, queue: str | None) -> list[str]:
        if queue is not None:
            return [queue]
        return sorted({q for s in range(self.broker.shards) for q in self._queue_names(s)})

    def _queue_names(self, shard: int) -> list[str]:
        return self.broker.inspection.queue_names(shard)

    def lease_next(self, queue: str | None) -> Lease | None:
        """The next ready attempt of ``queue`` (None: of every queue), as a
        worker slot serving those queues would lease it; None: nothing ready.

        ``lease.lua`` serves only the tenants on a ring of the queues it is
        given (a queue and class's ring holds its tenants with ready work;
        aged work is found through the lower classes' rings), so when none of
        those rings exists it hands out nothing: the queue names and the
        rings are read in one round trip, and the script, the dearest call
        of a drain, is called only when a ring may hold a tenant.  (A queue
        named for the first time is not looked at before that lease.)"""
        broker, keys = self.broker, self.broker.keys
        shards = range(broker.shards)
        known = [queue] if queue is not None else self._known
        pipe = broker.client.pipeline(transaction=False)
        if queue is None:
            for shard in shards:
                pipe.smembers(keys.queues(shard))
        for shard in shards:
            if known:
                pipe.exists(*(keys.ring(shard, q, p) for q in known for p in PRIORITIES))
        res = pipe.execute()
        queues = known
        if queue is None:
            named, res = res[: len(shards)], res[len(shards) :]
            queues = sorted({_s(q) for names in named for q in names})
            self._known = queues
        if queues == known and not any(res):
            return None
        leases = self.lease(queues, 1)
        return leases[0] if leases else None

    def lease(self, queues: list[str], n: int) -> list[Lease]:
        """Up to ``n`` ready attempts, shards visited in turn as a worker does."""
        shards = list(range(self.broker.shards))
        if not queues:
            return []
        ttl_ms = int(self.app.settings.lease_ttl * 1000)
        start = next_start(shards, self._served)
        got: list[Lease] = []
        for i in range(len(shards)):
            shard = shards[(start + i) % len(shards)]
            leases = self.broker.leases.lease(shard, WORKER, n - len(got), ttl_ms, queues)
            if leases:
                self._served = shard
                got += leases
            if len(got) >= n:
                break
        return got

    def run(self, lease: Lease) -> Drained:
        """Run one leased attempt and report it; what it did."""
        broker = self.broker
        broker.leases.start(lease.shard, WORKER, [(lease.iid, lease.epoch)])
        attempt = Attempt(lease, capture.LineBuffer(self.app.settings.log_max_lines))
        capture.install()
        attempt.try_begin()
        outcome = self.execute(attempt)
        attempt.finish()
        told = attempt.progress.take_rest(0.0) if attempt.progress is not None else None
        if told is not None:  # the last value, before the outcome (as a worker writes it)
            broker.leases.progress(lease.shard, WORKER, [(lease.iid, lease.epoch, told)])
        lines = outcome.lines or attempt.buffer.drain()
        logs = [(lease.iid, lease.attempt, lines)] if lines else []
        if outcome.ok:
            broker.leases.report(
                lease.shard, WORKER, [(lease.iid, lease.epoch, outcome.result)], [], logs
            )
            return Drained(succeeded=1)
        item = FailItem(
            lease.iid,
            lease.epoch,
            outcome.outcome,
            outcome.error,
            outcome.retryable,
            outcome.delay_ms,
            outcome.exit_code,
        )
        # logs first, so a dead-lettered attempt's DLQ entry carries its tail
        broker.leases.append_logs(lease.shard, logs)
        failed = broker.leases.fail(lease.shard, WORKER, [item], jitter=self.jitter.random())
        state = failed[0].state
        log.info(
            "%s attempt %d of %s: %s -> %s",
            lease.name,
            lease.attempt,
            lease.iid,
            outcome.outcome,
            state,
        )
        return Drained(
            failed=1,
            retried=int(state in RETRIED),
            dead=int(state == "dead"),
            cancelled=int(state == "cancelled"),
        )

    def execute(self, attempt: Attempt) -> Outcome:
        """The attempt's outcome, from the worker's own executors."""
        lease = attempt.lease
        if lease.kind == "python":
            task = self.app.tasks.get(lease.name)
            if task is not None and is_coroutine_task(task.fn):
                return self._run_coroutine(attempt)
            return run_python(self.app, attempt, self.broker)
        if not self.allow_commands:
            return Outcome(
                ok=False,
                outcome="failed",
                retryable=False,
                error=f"{lease.kind} task: the testing mode runs command and container "
                "tasks only with TestApp(allow_commands=True)",
            )
        timeout = lease.timeout_ms / 1000 if lease.timeout_ms > 0 else None
        return run_command(attempt, timeout, self.app.settings.container_runtime, self.broker)

    def _run_coroutine(self, attempt: Attempt) -> Outcome:
        if self._loop is None:
            self._loop = LoopThread("redcron-testing-asyncio")
        out = self._loop.run(run_coroutine(self.app, attempt, self.broker))
        if out is None:  # ended before it began: nothing in the testing mode ends one
            return Outcome(ok=False, outcome="cancelled", error="ended before it began")
        return out


def check_bound(with_scheduled: object, with_recursion: bool) -> None:
    """Refuse drain arguments that cannot mean anything."""
    if with_scheduled is not False and not with_recursion:
        raise ConfigError(
            "drain: with_scheduled runs tasks as they fall due, one after another; "
            "it needs with_recursion=True"
        )
