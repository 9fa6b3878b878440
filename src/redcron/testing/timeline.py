"""Test time, lived as a deployment lives it.

In production the beat fires each job when it falls due, maintenance makes
countdowns and retries ready when theirs do, and workers run what is ready
at once.  :class:`Timeline` does the same on the test clock: it reads every
shard's earliest due times (:class:`Due`: the schedule, the timers, the run
deadlines; and, apart, the leases held outside its worker), moves the clock
to the next one, does what falls due there (:meth:`Timeline.settle`) and
runs what is then ready (:meth:`Timeline.run_ready`), and goes on to the
next: an hourly job advanced three hours runs three times, and a retry's
backoff elapses between its attempts.  With ``run=False`` it stops at the
fire times only and runs nothing (``advance`` before it ran anything).

What is due is read, one round trip, before anything is done at an instant:
the beat ticks only when a fire or a run deadline is due, promote runs only
on a shard with a due timer, reap only where a lease held elsewhere has
expired, the follow-ups only where some wait.  That is the work a beat and
its maintenance would find to do, without the calls that would find none
(each a script on fakeredis, 0.1-1 ms); a full pass (every shard, due or
not) ends each call, as a deployment's periodic one would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from redcron.beat.beat import Beat
from redcron.beat.deadlines import Deadlines
from redcron.engine import MAX_MAINTENANCE
from redcron.keys import GROUP
from redcron.testing.fakeserver import TestClock
from redcron.testing.runner import Drained, InProcess

if TYPE_CHECKING:
    from redcron.engine import Broker

T = TypeVar("T")

#: attempts run at one instant at most: past them a task is re-enqueueing
#: itself (with no countdown) for ever
MAX_ATTEMPTS = 10_000
#: instants one advance (or drain with_scheduled) steps through by default: a
#: minutely job's fires over two weeks, with room for retries
MAX_STEPS = 20_000
#: promote, reap or follow-up calls per shard at one instant at most (as a
#: deployment's maintenance pass: each call does up to 500)
PASSES = 20


@dataclass(frozen=True)
class ShardDue:
    """One shard's earliest due times (ms since the epoch; None: none)."""

    fire: int | None  # the schedule: cron, interval and one-off jobs
    timer: int | None  # countdowns, retries, breaker cool-downs, parked tenants
    deadline: int | None  # a run's deadline_s, to mark it late
    followups: bool  # follow-ups wait to be applied


@dataclass(frozen=True)
class Due:
    """Every shard's :class:`ShardDue`, as read at one instant."""

    shards: tuple[ShardDue, ...]

    def fire(self, now: int) -> bool:
        """A fire is due at ``now``."""
        return any(_at(s.fire, now) for s in self.shards)

    def deadline(self, now: int) -> bool:
        """A run deadline is due at ``now``."""
        return any(_at(s.deadline, now) for s in self.shards)

    def timer(self, now: int) -> bool:
        """A timer is due at ``now``."""
        return any(_at(s.timer, now) for s in self.shards)

    def next_fire(self, now: int, target: int) -> int | None:
        """The earliest fire time after ``now``, up to ``target``."""
        return _earliest([s.fire for s in self.shards], now, target)

    def next_timer(self, now: int) -> int | None:
        """The earliest timer after ``now`` (a countdown, a retry...)."""
        return _earliest([s.timer for s in self.shards], now, None)

    def next_event(self, now: int, target: int) -> int | None:
        """The earliest fire, timer or deadline after ``now``, up to ``target``."""
        heads = [h for s in self.shards for h in (s.fire, s.timer, s.deadline)]
        return _earliest(heads, now, target)


def _at(head: int | None, now: int) -> bool:
    return head is not None and head <= now


def _earliest(heads: Sequence[int | None], now: int, last: int | None) -> int | None:
    ahead = [h for h in heads if h is not None and h > now and (last is None or h <= last)]
    return min(ahead) if ahead else None


def _head(reply: Any) -> int | None:
    return int(reply[0][1]) if reply else None


class _Inline(ThreadPoolExecutor):
    """An executor that runs what it is given at once, in the caller's thread
    (it never starts one)."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed back through the future, as a pool does
            done.set_exception(exc)
        return done


class SteppedBeat(Beat):
    """The beat of the testing mode: fires, and marks late the runs past their
    deadline when the :class:`Timeline` saw one due (a beat sweeps every
    second; the timeline stops the clock at each deadline instead).  Its
    maintenance pass is the timeline's, done where something is due (a
    beat's own would run promote and reap at every tick).

    A beat sends a page of fires from a thread of its own while it plans the
    next; here a page is sent in the test's thread (a test's page is a fire
    or two: the hand-over to a thread and back cost more than it saved)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadlines = Deadlines(every_ms=0)
        self._firer._sender = _Inline(1)
        #: a run deadline is due at this tick
        self.deadline_due = False

    def _maintain(self) -> None:
        return None

    def _sweep_deadlines(self, now: int) -> None:
        if self.deadline_due:
            super()._sweep_deadlines(now)


class Timeline:
    """What a beat, its maintenance and one worker slot do as test time passes.

    Args:
        broker: the TestApp's broker (fake, or the parity suite's real one).
        beat: the beat that fires (one, holding every shard).
        worker: the in-process worker slot.
        clock: the test clock.
        before: called at each instant before anything is done (the TestApp
            writes the jobs declared since the last instant); True: it wrote
            something.
        max_steps: instants one call of :meth:`live_to` steps through at most.
    """

    def __init__(
        self,
        broker: Broker,
        beat: SteppedBeat,
        worker: InProcess,
        clock: TestClock,
        before: Callable[[], bool],
        max_steps: int = MAX_STEPS,
    ) -> None:
        self.broker = broker
        self.beat = beat
        self.worker = worker
        self.clock = clock
        self.before = before
        self.max_steps = max_steps
        #: :meth:`held_leases`, as last read
        self._held: dict[int, int] = {}

    # -- looking ------------------------------------------------------------------

    def due(self) -> Due:
        """Every shard's earliest due times, in one round trip."""
        keys = self.broker.keys
        shards = range(self.broker.shards)
        pipe = self.broker.client.pipeline(transaction=False)
        for shard in shards:
            pipe.zrange(keys.schedule(shard), 0, 0, withscores=True)
            pipe.zrange(keys.timers(shard), 0, 0, withscores=True)
            pipe.zrange(keys.deadlines(shard), 0, 0, withscores=True)
            pipe.xlen(keys.followups(shard))
        res = pipe.execute()
        return Due(
            tuple(
                ShardDue(_head(res[i]), _head(res[i + 1]), _head(res[i + 2]), int(res[i + 3]) > 0)
                for i in range(0, len(res), 4)
            )
        )

    def held_leases(self) -> dict[int, int]:
        """When the reaper next looks at a lease held outside this worker (one
        a test took by hand): per shard, the earliest such look (ms).

        The reaper's index (pending: ready stream -> its next look) keeps a
        stream until a pass finds nothing pending in it, so the streams this
        worker leased from stay there, at their leases' deadlines, after it
        acknowledged them: those are no reason to stop the clock or to reap
        (the full pass at the end of each advance or drain drops them).  Only
        this worker leases while the timeline runs, and it acknowledges at
        once, so what is held is read when a call starts and after a reap."""
        keys, client = self.broker.keys, self.broker.client
        held: dict[int, int] = {}
        for shard in range(self.broker.shards):
            index: Any = client.zrange(keys.pending(shard), 0, -1, withscores=True)
            if not index:
                continue
            pipe = client.pipeline(transaction=False)
            for stream, _score in index:
                pipe.xpending(stream, GROUP)
            looks = [
                int(score)
                for (_stream, score), got in zip(index, pipe.execute(), strict=True)
                if got["pending"]
            ]
            if looks:
                held[shard] = min(looks)
        return held

    # -- doing --------------------------------------------------------------------

    def settle(self, due: Due | None = None, *, full: bool = False) -> None:
        """What the beat and the maintenance do at the current instant: fire
        what is due and mark late the runs past their deadline, make due
        timers ready, reap expired leases, apply the follow-ups.

        Args:
            due: what is due, read at this instant (None: read it).
            full: all of it on every shard, due or not (and prune the
                listing index), as a deployment's periodic pass would.
        """
        if self.before() or due is None:
            due = self.due()
        now = self.clock.ms
        maintenance = self.broker.maintenance
        acted = any(s.followups for s in due.shards)
        if full or due.fire(now) or due.deadline(now):
            self.beat.deadline_due = full or due.deadline(now)
            self.beat.tick()
            acted = True
        for shard, head in enumerate(due.shards):
            if full:
                maintenance.maintain(shard)
                acted = True
                continue
            if _at(head.timer, now):
                acted = True
                for _ in range(PASSES):
                    if maintenance.promote(shard).promoted < MAX_MAINTENANCE:
                        break
            if _at(self._held.get(shard), now):
                acted = True
                for _ in range(PASSES):
                    if not maintenance.reap(shard).due:
                        break
                self._held = self.held_leases()
        if acted:
            self.follow()

    def follow(self) -> None:
        """Apply what reacts to what was just done (the follow-ups of an
        attempt's end: counters, the breaker, a run's end, chained runs...),
        those they write included, as a deployment's maintenance does within
        its interval: the next lease sees their effect."""
        maintenance = self.broker.maintenance
        for shard in range(self.broker.shards):
            for _ in range(PASSES):
                if not maintenance.follow_up(shard)[1]:
                    break

    def run_ready(self, queue: str | None = None) -> Drained:
        """Run what is ready now, one attempt at a time, and what those make
        ready (a run's downstream tasks, tasks they enqueue); the clock
        stands still.

        Raises:
            RuntimeError: more than :data:`MAX_ATTEMPTS` attempts at this
                instant (a task that keeps re-enqueueing itself).
        """
        worker = self.worker
        total = Drained()
        while (lease := worker.lease_next(queue)) is not None:
            total.add(worker.run(lease))
            self.follow()
            self._bound(total)
        return total

    def _bound(self, total: Drained) -> None:
        if total.attempts >= MAX_ATTEMPTS:
            raise RuntimeError(
                f"drain: {MAX_ATTEMPTS:,} attempts at {_iso(self.clock.ms)} and still "
                "more ready; is a task re-enqueueing itself?"
            )

    def instant(self, due: Due | None, run: bool, queue: str | None) -> tuple[Drained, Due]:
        """Do what is due at the current instant and (``run``) run what is
        then ready; what ran, and what is due after."""
        total = Drained()
        self.settle(due)
        now = self.clock.ms
        if not run:
            return total, self.due()
        while True:
            ran = self.run_ready(queue)
            total.add(ran)
            self._bound(total)
            due = self.due()
            # a timer the attempts made due at once (a cool-down they ended,
            # a task enqueued for now): promoted, then run, at this instant
            if not (ran.attempts and due.timer(now)):
                break
            self.settle(due)
        return total, due

    def live_to(self, target: int | None, *, run: bool = True, queue: str | None = None) -> Drained:
        """Move the clock to ``target`` as a deployment lives through the time:
        at each fire, timer, run deadline or lease expiry on the way, in
        order, do what falls due and (``run``) run what is then ready.

        Args:
            target: where the clock ends (ms); None: at the last countdown
                or retry (timers the attempts on the way add included).
            run: False: stop at the fire times only and run nothing (what
                ``advance`` did before it ran anything).
            queue: run only this queue's tasks.

        Raises:
            ValueError: ``target`` is before the test clock.
            RuntimeError: more than :attr:`max_steps` instants on the way.
        """
        clock = self.clock
        if target is not None and target < clock.ms:
            raise ValueError(f"advance: {_iso(target)} is before the test clock ({clock.now()})")
        total = Drained()
        start = clock.now()
        due: Due | None = None
        self._held = self.held_leases()
        for _ in range(self.max_steps):
            ran, due = self.instant(due, run, queue)
            total.add(ran)
            now = clock.ms
            last = due.next_timer(now) if target is None else target
            if last is None:
                break
            if run:
                step = _earliest([due.next_event(now, last), *self._held.values()], now, last)
            else:
                step = due.next_fire(now, last)
            if step is None:
                break
            clock.set_ms(step)  # nothing else changed: what was due still is
        else:
            end = "the last countdown or retry" if target is None else _iso(target)
            raise RuntimeError(
                f"advance: more than {self.max_steps:,} instants (fire, countdown, retry, "
                f"deadline times) fall between {start.isoformat()} and {end}; "
                f"TestApp(max_steps=...) raises that cap ({self.max_steps:,} now), or "
                "advance in smaller steps"
            )
        if target is not None and clock.ms < target:
            clock.set_ms(target)
        self.settle(full=True)
        if run:
            total.add(self.instant(None, run, queue)[0])
        return total


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()
