"""The beat: owns shards through fenced leases and turns due fire times into runs.

:class:`Beat` is the process loop; what it holds lives in one module each:

- :mod:`~redcron.beat.ownership`: the shards this beat owns (fair share,
  fenced leases renewed every ``shard_ttl / 3``), so two beats never both
  fire a shard.
- :mod:`~redcron.beat.planning`: due schedule rows read (never popped), job
  specs cached by version, and the fire.lua calls planned from them.
- :mod:`~redcron.beat.firing`: those calls sent (a page in flight while the
  next is planned), their results settled, a log line per fire time done.
- :mod:`~redcron.beat.parking`: a job that cannot be planned or fired leaves
  the schedule with a reason.
- :mod:`~redcron.beat.deadlines`: runs still going past their job's
  ``deadline_s`` marked late, once each.

"Now" is always the Redis server clock (invariant 8).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import threading
import time
from types import FrameType
from typing import Any

from redcron.app import App
from redcron.beat.deadlines import Deadlines
from redcron.beat.firing import Firer
from redcron.beat.ownership import Ownership, beats_key
from redcron.beat.planning import Planner
from redcron.clock import ulid
from redcron.engine import TRANSIENT, Backoff, Engine, Outage, ShardGate
from redcron.errors import ConfigError
from redcron.redact import masked_url

__all__ = ["Beat", "beats_key"]

log = logging.getLogger(__name__)

#: seconds of a tick spent at most loading the specs of jobs due soon
PREFETCH_BUDGET_S = 0.5
#: schedule pages a shard fires before the next owned shard's turn, so a burst
#: due on every shard fires on all of them together (bench midnight, 1M / 100,000
#: on a 12-shard cluster: Jain of starts per tenant 0.0998 when each shard fired
#: all its due jobs in turn, 0.9965 with 1 page a turn, 0.88 with 4)
TURN_PAGES = 1


class Beat:
    """A beat process: owns shards, fires what is due, runs promote/reap.

    Args:
        app: the App (its settings name the deployment).
        name: beat id (unique per process; default ``host:pid:random``).
        shard_ttl: seconds a shard lease lives unrenewed (renewed every third).
        catchup_window: fires overdue by at most this many seconds are all fired;
            must be longer than ``shard_ttl`` so that a failover loses nothing.
        batch: schedule entries read per round trip.
        apply_declared: upsert the App's declared jobs (``app.job``,
            ``@app.cron``) on start, after checking their task names against
            its registry; undeclared jobs are never deleted.
    """

    def __init__(
        self,
        app: App,
        *,
        name: str | None = None,
        shard_ttl: float = 10.0,
        catchup_window: float = 60.0,
        batch: int = 500,
        apply_declared: bool = True,
    ) -> None:
        # not (x > 0) rather than x <= 0: NaN fails every comparison
        if not (math.isfinite(shard_ttl) and shard_ttl > 0):
            raise ConfigError(f"shard_ttl: {shard_ttl!r} must be a finite number of seconds > 0")
        if not math.isfinite(catchup_window):
            raise ConfigError(f"catchup_window: {catchup_window!r} must be a finite number")
        if catchup_window <= shard_ttl:
            raise ConfigError(
                f"catchup_window: {catchup_window}s must be longer than shard_ttl {shard_ttl}s "
                "(a failover would otherwise collapse fires)"
            )
        if batch < 1:
            raise ConfigError("batch: must be >= 1")
        self.app = app
        self.id = name or f"{socket.gethostname()}:{os.getpid()}:{ulid()[-6:]}"
        self.ttl_ms = int(shard_ttl * 1000)
        self.window_ms = int(catchup_window * 1000)
        self.batch = batch
        self.apply_declared = apply_declared
        self._shards = Ownership(self.id, self.ttl_ms)
        self._planner = Planner(batch, self.window_ms)
        self._firer = Firer(self._shards, self._planner, batch)
        self._deadlines = Deadlines()
        self._started = False
        # (shard, exception type) already logged with its traceback
        self._failing: set[tuple[int, type[Exception]]] = set()
        self._stop = threading.Event()
        # shards whose last call failed (a cluster master down): left alone a while
        self._gate = ShardGate(
            0.2, 2.0, Outage(log, f"beat {self.id}"), lambda s: self.app.broker.shards_with(s)
        )
        # server time the last tick's fire pass read the schedule at
        self._tick_ms = 0
        # the last tick's prefetch left specs of jobs due soon to load
        self._ahead = False

    @property
    def owned(self) -> dict[int, str]:
        """Shards this beat holds, with their fencing epochs."""
        return dict(self._shards.owned)

    @property
    def engine(self) -> Engine:
        """The beat's Redis side: the App's current broker (a forked child gets its own)."""
        return self.app.broker

    # -- public ---------------------------------------------------------------

    def run(self) -> None:
        """Tick until :meth:`stop` (or SIGTERM/SIGINT on the main thread); then
        release the shards so another beat takes them at once."""
        old: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                old[sig] = signal.signal(sig, self._on_signal)
        log.info(
            "beat %s on %s starting (shard ttl %.1fs)",
            self.id,
            masked_url(self.app.settings.redis_url),
            self.ttl_ms / 1000,
        )
        # a steady 1 s, not a growing wait: its shard leases are renewed soon after Redis is back
        backoff = Backoff(1.0, 1.0, log, self._gate.outage)
        try:
            while not self._stop.is_set():
                try:
                    self.tick()
                    busy = self._firer.busy or self._ahead
                    delay = 0.0 if busy else self._idle_delay()
                    if not self._gate.failing:  # else the outage is not over
                        backoff.reset()
                except TRANSIENT as exc:
                    delay = backoff.failed(exc, "tick")
                self._stop.wait(delay)
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
            self.close()
            log.info("beat %s stopped", self.id)

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        """Release owned shards and leave the live-beats registry (best effort)."""
        try:
            self.engine.beat_own(list(self._shards.owned), self.id, self.ttl_ms, "release")
            self.engine.beat_unregister(self.id)
        except TRANSIENT as exc:
            log.warning("beat %s: could not release shards (%s); they expire", self.id, exc)
        self._shards.clear()
        self._firer.close()

    def tick(self) -> int:
        """One pass: ownership round (when due), fire what is due, maintenance.

        An error other than Redis failing (:data:`TRANSIENT`) in one shard's
        fire pass or prefetch is logged and the other shards go on.  Redis
        failing on one shard (its cluster master down) leaves that shard alone
        for its gate delay while the others go on; failing on every shard it
        tries, it raises (Redis is down: :meth:`run` backs off).
        Returns the number of fires that created (or recorded) a run.
        """
        if not self._started:
            if self.apply_declared and self.app.declared_jobs:
                self.app.apply_declared()
            self._started = True
        self._firer.busy = False
        now = self._tick_ms = self._server_ms()
        engine = self.engine
        self._shards.round(engine, now)
        budget = time.monotonic() + self.ttl_ms / 4000
        fired = 0
        owned = self._gate.open(sorted(self._shards.owned), time.monotonic())
        answered = False
        failure: Exception | None = None
        # several shards take turns, a page each, while any has due rows left
        self._firer.turn_pages = TURN_PAGES if len(owned) > 1 else None
        turn = owned
        while turn:
            for shard in turn:
                try:
                    fired += self._firer.fire_shard(engine, shard, now, budget)
                except TRANSIENT as exc:
                    # on a cluster, this shard's master is down: the others go on
                    self._firer.more.discard(shard)
                    self._gate.failed(shard, exc, "fire", time.monotonic())
                    failure = exc
                    continue
                except Exception as exc:  # one shard's fault must not stop every tenant's
                    self._firer.more.discard(shard)
                    self._shard_failed(shard, "fire", exc)
                answered = True
                self._gate.ok(shard)
            turn = [s for s in turn if s in self._firer.more and s in self._shards.owned]
        if failure is not None and not answered:
            raise failure  # every shard failing: Redis is down, run() backs off
        self._maintain()
        self._sweep_deadlines(now)
        self._ahead = False
        if not self._firer.busy:
            for shard in self._gate.open(sorted(self._shards.owned), time.monotonic()):
                try:
                    more = self._planner.prefetch(engine, shard, now, PREFETCH_BUDGET_S)
                    self._ahead = self._ahead or more
                except TRANSIENT as exc:
                    self._gate.failed(shard, exc, "prefetch", time.monotonic())
                except Exception as exc:  # the same loading as the fire pass
                    self._shard_failed(shard, "prefetch", exc)
        return fired

    def _shard_failed(self, shard: int, doing: str, exc: Exception) -> None:
        """Log an error the beat did not expect on one shard, with its traceback
        once per (shard, error kind), and go on: the shard is tried again at the
        next tick and keeps its lease, so no other beat takes it over and fails
        the same way (DESIGN §8a)."""
        kind = (shard, type(exc))
        if kind in self._failing:
            log.debug("beat %s: shard %d: %s failed again: %r", self.id, shard, doing, exc)
            return
        self._failing.add(kind)
        log.error(
            "beat %s: shard %d: %s failed (%s: %s); the other shards go on, this one is "
            "tried again each tick (logged once per shard and error kind)",
            self.id,
            shard,
            doing,
            type(exc).__name__,
            exc,
            exc_info=exc,
        )

    # -- maintenance and idling --------------------------------------------------

    def _server_ms(self) -> int:
        return self.app.broker.server_ms()

    def _maintain(self) -> None:
        engine = self.engine
        interval = self.app.settings.maintenance_interval
        for shard in self._gate.open(sorted(self._shards.owned), time.monotonic()):
            try:
                if engine.try_lock(shard, self.id, interval):
                    engine.maintain(shard, follow=False)
                # while fires are due the beat leaves the follow-ups to workers
                # (the burst's starts are theirs to make); an idle beat applies them
                if not self._firer.busy and engine.try_lock(shard, self.id, interval, "followups"):
                    engine.follow_all(shard)
            except TRANSIENT as exc:  # this shard's master down: the others go on
                self._gate.failed(shard, exc, "maintenance", time.monotonic())

    def _sweep_deadlines(self, now: int) -> None:
        """Mark late the runs past their deadline on each owned shard (at most
        every second per shard: :mod:`redcron.beat.deadlines`)."""
        owned = sorted(self._shards.owned)
        self._deadlines.forget(owned)
        for shard in self._gate.open(owned, time.monotonic()):
            try:
                self._deadlines.sweep(self.engine, [shard], now)
            except TRANSIENT as exc:  # this shard's master down: the others go on
                self._gate.failed(shard, exc, "deadlines", time.monotonic())
            except Exception as exc:  # one shard's fault must not stop every tenant's
                self._shard_failed(shard, "deadlines", exc)

    def _idle_delay(self) -> float:
        """Seconds until the earliest due score of an owned shard, the next
        ownership round, or 1 s, whichever comes first (server clock)."""
        shards = self._gate.open(sorted(self._shards.owned), time.monotonic())
        try:
            now, heads = self.engine.next_due(shards)
        except TRANSIENT:
            # a shard's master went down since the fire pass: look again soon
            return 0.25
        next_round = self._shards.next_round
        wake = min(now + 1000, next_round)
        for head in heads:
            if head is not None:
                wake = min(wake, head)
        # a due entry that made no progress (version change, unreadable spec)
        # is retried at the next round or second, not in a busy loop; one that
        # fell due after the fire pass read the schedule (while the tick went on
        # to maintenance and prefetch) is fired at once
        if wake <= now:
            if any(h is not None and h > self._tick_ms for h in heads):
                return 0.0
            wake = min(now + 1000, max(next_round, now + 50))
        return max(0.0, (wake - now) / 1000)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("beat %s: signal %d, stopping", self.id, signum)
        self.stop()
