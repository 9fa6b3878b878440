"""The chaos runner's fault injection: one planned :class:`~redcron.chaos.scenario.Event`
at a time, it SIGKILLs or SIGSTOPs (then SIGCONTs) a worker, SIGKILLs a beat (a
killed process is restarted in its slot at once) or SIGKILLs the Redis server
and restarts it after the planned outage; each is counted in the tally."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from redcron.chaos.procs import Fleet, now_ms
from redcron.chaos.scenario import Event
from redcron.chaos.tally import Tally
from redcron.embedded import EmbeddedRedis

#: schedules a call ``delay`` seconds from now on the runner's timeline
Later = Callable[[float, Callable[[], None]], None]


@dataclass
class Faults:
    """Inject ``Event``s into ``fleet`` and ``server``, counted in ``tally``."""

    fleet: Fleet
    server: EmbeddedRedis
    tally: Tally
    #: gets a progress line
    note: Callable[[str], None]
    #: runs just before the server is killed (the runner notes the runs that exist)
    before_redis_kill: Callable[[], None]

    def apply(self, ev: Event, later: Later) -> None:
        if ev.what == "worker":
            w = self.fleet.workers[ev.target]
            if w.stopped:
                return  # already frozen: leave it to its planned SIGCONT
            if ev.action == "kill":
                w.kill()
                self.tally.worker_kills += 1
                self.fleet.replace_worker(ev.target)
            else:
                w.stop()
                self.tally.worker_stops += 1
                later(ev.hold, w.cont)
        elif ev.what == "beat":
            self.fleet.beats[ev.target].kill()
            self.tally.beat_kills += 1
            self.fleet.replace_beat(ev.target)
        elif ev.what == "redis":
            self.before_redis_kill()
            self.tally.acked_before_kill = len(self.tally.acked)
            self.server.kill()
            self.tally.redis_kill_ms = now_ms()
            self.note(f"redis-server SIGKILLed, down {ev.hold}s")
            time.sleep(ev.hold)
            self.server.start(timeout=60)
            self.tally.redis_restarts += 1
