"""``TestApp``: the ``App`` API over a fake Redis, for a user's unit tests."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from redcron import serde
from redcron.app import App, TaskDef
from redcron.beat.beat import Beat
from redcron.broker import Broker, Lease, TaskFilter, list_tasks
from redcron.broker.inspect import Inspection
from redcron.config import Settings
from redcron.errors import ConfigError, TaskFailed, TaskTimeout, ValidationError
from redcron.model import DlqEntry, RunRecord, TaskRecord
from redcron.model.jobs import JobSpec
from redcron.model.states import TaskState
from redcron.testing.fakeserver import FakeServer, TestClock
from redcron.testing.runner import Drained, InProcess, check_bound
from redcron.worker import capture
from redcron.worker.execute import Attempt, run_python

#: the URL the testing mode's settings carry (nothing connects to it)
TESTING_URL = "redis://redcron-testing.invalid:6379/0"
#: states of a task that is waiting to run (what ``assert_enqueued`` matches)
ENQUEUED = frozenset(
    {TaskState.READY, TaskState.SCHEDULED, TaskState.RETRY_WAIT, TaskState.HELD, TaskState.WAITING}
)
#: the most attempts one drain or clock steps one advance take: past them
#: the test is in a loop (a task that re-enqueues itself, an every-second job
#: over a day)
MAX_ATTEMPTS = 10_000
MAX_STEPS = 10_000
#: how long the testing beat's shard leases live (seconds of test time)
BEAT_HOLD_S = 10 * 365 * 86_400.0
#: tasks a listing reads at most
LIST_LIMIT = 100_000


class TestApp(App):
    """An :class:`~redcron.App` on an in-process fake Redis that runs the real
    Lua scripts, with a clock that moves only when the test says so.

    Args:
        app: an App whose tasks and declared jobs to test (its registry is
            shared; until :meth:`close`, its ``broker`` is this fake one, so
            code that enqueues through it lands here).  None: a fresh App;
            register tasks on the TestApp itself.
        now: where the test clock starts (an aware datetime); default the
            real time at creation.  It never moves by itself.
        allow_commands: run command and container tasks (subprocesses), as a
            worker started with ``--allow-commands``; else their attempts fail.
        seed: seeds the retry backoff's jitter (random in production), so
            a test's retry times are the same on every run.
        overrides: :class:`~redcron.Settings` fields (``max_retries``,
            ``retry_base``, ``shards``...).  The environment is never read.

    Raises:
        ConfigError: fakeredis (with its Lua runtime, lupa) is not installed:
            ``pip install 'redcron[testing]'``.
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(
        self,
        app: App | None = None,
        *,
        now: datetime | None = None,
        allow_commands: bool = False,
        seed: int = 0,
        **overrides: Any,
    ) -> None:
        base = app.settings if app is not None else Settings()
        settings = dataclasses.replace(base, redis_url=TESTING_URL, **overrides)
        super().__init__(settings=settings)
        self.clock = TestClock(now)
        self._fake = self._connect(settings)
        self._fake.ensure_meta(check_policy=False)  # fakeredis has no CONFIG GET
        self._fake.inspection = _NoWaiting(self._fake)
        self._wrapped = app
        self._wrapped_broker: Broker | None = None
        if app is not None:
            self.tasks = app.tasks
            self.declared_jobs = app.declared_jobs
            self._wrapped_broker = app._broker
            app._broker = self._fake
            app._pid = os.getpid()
        self._worker = InProcess(self._target, self._fake, allow_commands, seed)
        # the one beat holds its shards for as long as a test's clock may jump
        # (no "lost shard" at each advance); advance steps through every fire
        # time, so no fire is ever overdue and the catch-up window never applies
        self._beat = Beat(
            self._target,
            name="redcron-testing-beat",
            shard_ttl=BEAT_HOLD_S,
            catchup_window=2 * BEAT_HOLD_S,
            apply_declared=False,
        )
        #: the declared jobs (tenant, name) upserted so far
        self._applied: set[tuple[str, str]] = set()

    def _connect(self, settings: Settings) -> Broker:
        """The broker of a new fake server on :attr:`clock`.  (The parity suite
        overrides it to run the same helpers on a real server.)"""
        self.server = FakeServer(self.clock)
        return Broker(settings, client=self.server.client())

    @property
    def _target(self) -> App:
        """The App whose tasks run: the wrapped one, else this one."""
        return self._wrapped or self

    @property
    def broker(self) -> Broker:
        """The fake server's broker (the same one after a fork: one process only)."""
        return self._fake

    def close(self) -> None:
        """Give a wrapped App its own broker back."""
        if self._wrapped is not None and self._wrapped._broker is self._fake:
            self._wrapped._broker = self._wrapped_broker
        self._fake.close()

    def __enter__(self) -> TestApp:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- time ---------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        """The test clock, as an aware UTC datetime."""
        return self.clock.now()

    def advance(self, seconds: float = 0.0, *, to: datetime | None = None) -> TestApp:
        """Move the test clock forward ``seconds`` (or ``to`` an instant), as a
        beat and the maintenance would live through it: each cron or interval
        fire falls due in turn and creates its run, countdowns and retries
        that come due are made ready, expired leases are reaped.  Nothing runs:
        :meth:`drain` runs what is ready.

        Raises:
            ValueError: a negative step, or an instant in the past.
        """
        if to is not None:
            target = _ms(to)
        else:
            if seconds < 0:
                raise ValueError(f"advance: seconds must be >= 0, not {seconds}")
            target = self.clock.ms + round(seconds * 1000)
        self._move_to(target)
        return self

    def _settle(self) -> None:
        """What a beat and maintenance do at the current instant: fire what is
        due, make due timers ready, reap expired leases.  Jobs declared since
        the last time (``app.job``, ``@app.cron``) are upserted first, as a
        beat does when it starts."""
        declared = set(self._target.declared_jobs)
        if declared - self._applied:
            self._target.apply_declared()
            self._applied |= declared
        self._beat.tick()
        for shard in range(self._fake.shards):
            self._fake.maintenance.maintain(shard)

    def _follow(self) -> None:
        """Apply what reacts to the attempt just reported (its follow-ups:
        counters, the breaker, chained runs...), as a deployment's maintenance
        does within its interval: the next lease sees their effect."""
        for shard in range(self._fake.shards):
            while self._fake.maintenance.follow_up(shard)[1]:
                pass

    def _move_to(self, target: int) -> None:
        if target < self.clock.ms:
            raise ValueError(f"advance: {_iso(target)} is before the test clock ({self.now})")
        shards = list(range(self._fake.shards))
        for _ in range(MAX_STEPS):
            self._settle()
            now = self.clock.ms
            _server_now, heads = self._beat.store.next_due(shards)
            ahead = [h for h in heads if h is not None and now < h <= target]
            if not ahead:
                self.clock.set_ms(target)
                self._settle()
                return
            self.clock.set_ms(min(ahead))
        raise RuntimeError(
            f"advance: more than {MAX_STEPS} fire times fall before {_iso(target)}; "
            "advance in smaller steps"
        )

    def _next_timer(self) -> int | None:
        """The earliest countdown or retry due time of any shard (None: none)."""
        due = [self._fake.maintenance.promote(s).next_ms for s in range(self._fake.shards)]
        ahead = [d for d in due if d >= 0]
        return min(ahead) if ahead else None

    # -- running ------------------------------------------------------------------

    def drain(
        self,
        queue: str | None = None,
        *,
        with_scheduled: bool | datetime = False,
        with_recursion: bool = True,
    ) -> Drained:
        """Run ready tasks in this thread, one attempt at a time, in the order
        the dispatcher hands them out, through the worker's own code (lease,
        run, report); returns what the attempts did.

        Args:
            queue: only this queue (None: every queue).
            with_scheduled: also run what is scheduled (countdowns, retries in
                their backoff): the clock moves to each one's due time in turn,
                firing the cron and interval jobs due on the way, as
                :meth:`advance` does.  True: until nothing is scheduled; a
                datetime: up to that instant.
            with_recursion: keep running what the attempts make ready (a
                retry without backoff, a run's downstream tasks, tasks a task
                enqueues).  False: only the tasks ready when drain starts.

        Raises:
            ConfigError: ``with_scheduled`` without ``with_recursion``.
            RuntimeError: more than 10,000 attempts (a task that keeps
                re-enqueueing itself).
        """
        check_bound(with_scheduled, with_recursion)
        bound = None if isinstance(with_scheduled, bool) else _ms(with_scheduled)
        self._settle()
        worker = self._worker
        queues = worker.queues(queue)
        total = Drained()
        if not with_recursion:
            for lease in self._lease_all(queues):
                total.add(worker.run(lease))
                self._follow()
            return total
        while total.attempts < MAX_ATTEMPTS:
            leases = worker.lease(worker.queues(queue), 1)
            if leases:
                total.add(worker.run(leases[0]))
                self._follow()
                continue
            if with_scheduled is False:
                return total
            due = self._next_timer()
            if due is None or due <= self.clock.ms or (bound is not None and due > bound):
                return total
            self._move_to(due)
        raise RuntimeError(
            f"drain: stopped after {MAX_ATTEMPTS} attempts; is a task re-enqueueing itself?"
        )

    def _lease_all(self, queues: list[str]) -> list[Lease]:
        out: list[Lease] = []
        while True:
            got = self._worker.lease(queues, 256)
            if not got:
                return out
            out += got

    def perform(self, task: TaskDef[Any, Any] | str, *args: Any, **kwargs: Any) -> Any:
        """Run one call of ``task`` now, in this thread, and return its result,
        as a worker would: the arguments go through the real serializer and
        the function's signature check, the result through the serializer
        too (a tuple comes back a list), ``ctx`` is given when the function
        asks for it.  Nothing is enqueued; per-call options (``_tenant``,
        ``_queue``...) apply as with ``enqueue``.

        Raises:
            ValidationError: the arguments cannot be encoded or do not fit the
                function (as ``enqueue`` raises in production).
            TaskFailed: the attempt failed (the error carries the traceback,
                ``Retry: ...`` or ``Permanent: ...``), or its result cannot be
                encoded.
        """
        td = self._task(task)
        opts = {k: kwargs.pop(k) for k in list(kwargs) if k.startswith("_")}
        row = self._target._row(td.name, "python", [list(args), kwargs], td.options, opts)
        td.check_args(args, kwargs)
        lease = Lease(
            row.iid,
            "0",
            1,
            td.name,
            "python",
            row.args,
            row.timeout_ms,
            int(row.iid.partition("-")[0]),
            row.tenant,
            queue=row.queue,
            max_attempts=row.max_attempts,
        )
        attempt = Attempt(lease, capture.LineBuffer(self.settings.log_max_lines))
        capture.install()
        attempt.try_begin()
        outcome = run_python(self._target, attempt, self._fake)
        if not outcome.ok:
            raise TaskFailed(row.iid, outcome.outcome, outcome.error)
        return serde.loads(outcome.result)

    def _task(self, task: TaskDef[Any, Any] | str) -> TaskDef[Any, Any]:
        name = task if isinstance(task, str) else task.name
        td = self.tasks.get(name)
        if td is None:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise ValidationError("task", f"unknown task {name!r}; registered tasks: {known}")
        return td

    # -- what is there --------------------------------------------------------------

    def all_enqueued(
        self,
        task: TaskDef[Any, Any] | str | None = None,
        *,
        args: list[Any] | tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        tenant: str | None = None,
        queue: str | None = None,
        within: float | None = None,
    ) -> list[TaskRecord]:
        """The tasks waiting to run (ready, scheduled, in a retry's backoff, or
        held by an open breaker) that match, oldest first.

        Args:
            task: a registered task or its name (None: any).
            args: the positional arguments, as a list after the serializer's
                round trip (a tuple matches the same list).
            kwargs: the keyword arguments.
            tenant, queue: where it waits.
            within: due within this many seconds of the test clock (None: any
                due time; 0: due now).
        """
        name = None if task is None else (task if isinstance(task, str) else task.name)
        found = list_tasks(
            self._fake, TaskFilter(tenant=tenant, queue=queue, name=name), LIST_LIMIT
        )
        latest = None if within is None else self.clock.ms + round(within * 1000)
        out = []
        for rec in reversed(found):
            if rec.state not in ENQUEUED:
                continue
            if args is not None or kwargs is not None:
                got_args, got_kwargs = _call_of(rec)
                if args is not None and got_args != list(args):
                    continue
                if kwargs is not None and got_kwargs != kwargs:
                    continue
            if latest is not None and rec.due_at is not None and _ms(rec.due_at) > latest:
                continue
            out.append(rec)
        return out

    def assert_enqueued(
        self,
        task: TaskDef[Any, Any] | str | None = None,
        *,
        args: list[Any] | tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        tenant: str | None = None,
        queue: str | None = None,
        within: float | None = None,
    ) -> TaskRecord:
        """The first (oldest) waiting task that matches (see :meth:`all_enqueued`);
        AssertionError listing what does wait when none does."""
        got = self.all_enqueued(
            task, args=args, kwargs=kwargs, tenant=tenant, queue=queue, within=within
        )
        if not got:
            wanted = _describe(task, args, kwargs, tenant, queue, within)
            raise AssertionError(f"no enqueued task matches {wanted}; enqueued: {self._listing()}")
        return got[0]

    def refute_enqueued(
        self,
        task: TaskDef[Any, Any] | str | None = None,
        *,
        args: list[Any] | tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        tenant: str | None = None,
        queue: str | None = None,
        within: float | None = None,
    ) -> None:
        """AssertionError naming them when a waiting task matches."""
        got = self.all_enqueued(
            task, args=args, kwargs=kwargs, tenant=tenant, queue=queue, within=within
        )
        if got:
            wanted = _describe(task, args, kwargs, tenant, queue, within)
            listed = "; ".join(_line(r) for r in got)
            raise AssertionError(f"{len(got)} enqueued task(s) match {wanted}: {listed}")

    def _listing(self) -> str:
        waiting = self.all_enqueued()
        if not waiting:
            return "none"
        return "; ".join(_line(r) for r in waiting[:20]) + (" ..." if len(waiting) > 20 else "")

    def runs(self, job: JobSpec | str, tenant: str = "default") -> list[RunRecord]:
        """The runs of a job (a spec, or its name in ``tenant``), oldest first,
        each with its tasks (state, attempts)."""
        if isinstance(job, JobSpec):
            tenant, name = job.tenant, job.name
        else:
            name = job
        store = self.jobs
        job_id = store.job_id(name, tenant=tenant)
        return [store.run(r.id) for r in reversed(store.runs(job_id, LIST_LIMIT))]

    def dlq(self, tenant: str | None = None) -> list[DlqEntry]:
        """The dead-lettered tasks of ``tenant`` (None: every tenant)."""
        return self._fake.dlq.list(tenant, count=LIST_LIMIT)

    def logs(self, task_id: str, attempt: int = 1) -> list[str]:
        """What one attempt printed or logged (the worker captures it)."""
        return self._fake.inspection.log_lines(task_id, attempt, count=LIST_LIMIT)

    def tasks_in(self, state: str | None = None, tenant: str | None = None) -> Iterator[TaskRecord]:
        """Every task (in ``state``, of ``tenant``), oldest first."""
        where = TaskFilter(state=state, tenant=tenant)
        yield from reversed(list_tasks(self._fake, where, LIST_LIMIT))


class _NoWaiting(Inspection):
    """``TaskHandle.result()`` on a task that has not ended: nothing will run it
    while the test waits (no worker runs beside it), so say so at once rather
    than block."""

    def wait_done(self, iid: str, timeout_s: float) -> bool:
        state = self.watch(iid)
        raise TaskTimeout(
            f"task {iid} is {state}: in the testing mode nothing runs it while you "
            "wait; app.drain() runs what is ready (with_scheduled=True: what is "
            "scheduled too), app.advance() moves the clock"
        )


def _ms(when: datetime) -> int:
    if when.tzinfo is None:
        raise ConfigError(f"{when!r} has no time zone; pass an aware datetime (tzinfo=UTC)")
    return int(when.timestamp() * 1000)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def _call_of(rec: TaskRecord) -> tuple[list[Any], dict[str, Any]]:
    decoded = rec.decoded_args()
    if isinstance(decoded, list) and len(decoded) == 2 and isinstance(decoded[1], dict):
        return list(decoded[0]), dict(decoded[1])
    return [decoded], {}


def _line(rec: TaskRecord) -> str:
    args, kwargs = _call_of(rec)
    call = ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in kwargs.items())])
    return f"{rec.name}({call}) {rec.state} tenant={rec.tenant} queue={rec.queue}"


def _describe(
    task: TaskDef[Any, Any] | str | None,
    args: Any,
    kwargs: Any,
    tenant: str | None,
    queue: str | None,
    within: float | None,
) -> str:
    name = None if task is None else (task if isinstance(task, str) else task.name)
    given = {
        "task": name,
        "args": None if args is None else list(args),
        "kwargs": kwargs,
        "tenant": tenant,
        "queue": queue,
        "within": within,
    }
    return "{" + ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None) + "}"
