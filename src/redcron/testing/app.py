"""``TestApp``: the ``App`` API over a fake Redis, for a user's unit tests."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from datetime import datetime
from types import TracebackType
from typing import Any

from redcron import serde
from redcron.app import App, TaskDef, TaskHandle
from redcron.config import Settings
from redcron.engine import Broker, Lease, TaskFilter, list_tasks
from redcron.engine.inspect import Inspection
from redcron.errors import ConfigError, TaskFailed, TaskTimeout, ValidationError
from redcron.model import DlqEntry, RunRecord, TaskProgress, TaskRecord
from redcron.model.jobs import JobSpec
from redcron.model.states import TaskState
from redcron.testing.fakeserver import FakeServer, TestClock
from redcron.testing.runner import Drained, InProcess, check_bound
from redcron.testing.timeline import MAX_STEPS, SteppedBeat, Timeline
from redcron.worker import capture
from redcron.worker.execute import Attempt

#: the URL the testing mode's settings carry (nothing connects to it)
TESTING_URL = "redis://redcron-testing.invalid:6379/0"
#: states of a task that is waiting to run (what ``assert_enqueued`` matches)
ENQUEUED = frozenset(
    {TaskState.READY, TaskState.SCHEDULED, TaskState.RETRY_WAIT, TaskState.HELD, TaskState.WAITING}
)
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
        max_steps: instants (fire, countdown, retry and deadline times) one
            :meth:`advance` or ``drain(with_scheduled=...)`` steps through at
            most before it stops with an error (a minutely job's week is
            10,080): a bound on a test that asks for more than it means to.
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
        max_steps: int = MAX_STEPS,
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
        beat = SteppedBeat(
            self._target,
            name="redcron-testing-beat",
            shard_ttl=BEAT_HOLD_S,
            catchup_window=2 * BEAT_HOLD_S,
            apply_declared=False,
        )
        self._time = Timeline(
            self._fake, beat, self._worker, self.clock, self._apply_declared, max_steps
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
        self._worker.close()
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

    def advance(
        self, seconds: float = 0.0, *, to: datetime | None = None, run: bool = True
    ) -> Drained:
        """Move the test clock forward ``seconds`` (or ``to`` an instant) as a
        deployment lives through that time: at each instant something falls
        due on the way, in order (a cron or interval fire, a countdown, a
        retry's backoff, a breaker's cool-down, a run's deadline, an expired
        lease), the clock stops, the beat and maintenance do what is due
        there and what is then ready runs, as workers would run it at once;
        then on to the next.  What ran is returned.

        Args:
            seconds: how far (>= 0).
            to: an instant instead (an aware datetime, not before the clock).
            run: False: run nothing; fires only create their runs and what
                comes due is only made ready (:meth:`drain` runs it), the
                clock stopping at the fire times only.

        Raises:
            ValueError: a negative step, or an instant in the past.
            RuntimeError: more than ``max_steps`` instants on the way (see
                :class:`TestApp`), or a task re-enqueueing itself for ever.
        """
        if to is not None:
            target = _ms(to)
        else:
            if seconds < 0:
                raise ValueError(f"advance: seconds must be >= 0, not {seconds}")
            target = self.clock.ms + round(seconds * 1000)
        return self._time.live_to(target, run=run)

    def _apply_declared(self) -> bool:
        """Upsert the jobs declared since the last time (``app.job``,
        ``@app.cron``), as a beat does when it starts; whether there were any."""
        declared = set(self._target.declared_jobs)
        if not declared - self._applied:
            return False
        self._target.apply_declared()
        self._applied |= declared
        return True

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
            with_scheduled: also live through what is scheduled, as
                :meth:`advance` does: the clock stops at each countdown,
                retry, fire or deadline on the way, in order, and what is
                due there runs.  True: up to the last countdown or retry
                (those the attempts add included; a cron job's fires do not
                keep it going); a datetime: up to that instant, where the
                clock ends even when nothing is scheduled.
            with_recursion: keep running what the attempts make ready (a
                retry without backoff, a run's downstream tasks, tasks a task
                enqueues).  False: only the tasks ready when drain starts.

        Raises:
            ConfigError: ``with_scheduled`` without ``with_recursion``.
            RuntimeError: more than 10,000 attempts at one instant (a task
                that keeps re-enqueueing itself), or more than ``max_steps``
                instants on the way.
        """
        check_bound(with_scheduled, with_recursion)
        timeline = self._time
        if not with_recursion:
            timeline.settle(full=True)
            total = Drained()
            for lease in self._lease_all(self._worker.queues(queue)):
                total.add(self._worker.run(lease))
                timeline.follow()
            return total
        if isinstance(with_scheduled, datetime):
            return timeline.live_to(max(_ms(with_scheduled), self.clock.ms), queue=queue)
        return timeline.live_to(None if with_scheduled else self.clock.ms, queue=queue)

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
        asks for it, an ``async def`` task runs on the testing mode's event
        loop (its timeout cancelling it).  Nothing is enqueued; per-call options (``_tenant``,
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
            error_classes=row.error_classes,
        )
        attempt = Attempt(lease, capture.LineBuffer(self.settings.log_max_lines))
        capture.install()
        attempt.try_begin()
        outcome = self._worker.execute(attempt)
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

    def progress_of(self, handle: TaskHandle | str) -> TaskProgress | None:
        """What the task last said with ``ctx.progress`` (its ``recent`` messages
        too), as a worker would have written it by the attempt's end; None: it
        never said."""
        iid = handle if isinstance(handle, str) else handle.id
        return self._fake.task_info(iid).progress

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
