"""The chaos runner's fault injection: one planned :class:`~redcron.chaos.scenario.Event`
at a time, it SIGKILLs or SIGSTOPs (then SIGCONTs) a worker, SIGKILLs a beat (a
killed process is restarted in its slot at once), SIGKILLs the Redis server
and restarts it after the planned outage, or (``--cluster``) SIGKILLs one
master of the cluster and restarts it after the planned outage, the run going
on meanwhile; each is counted in the tally."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from redcron.chaos.procs import Fleet, now_ms
from redcron.chaos.scenario import Event
from redcron.chaos.tally import Tally
from redcron.embedded import EmbeddedRedis
from redcron.embedded_cluster import EmbeddedCluster

#: schedules a call ``delay`` seconds from now on the runner's timeline
Later = Callable[[float, Callable[[], None]], None]


@dataclass
class Faults:
    """Inject ``Event``s into ``fleet`` and ``server`` (an embedded Redis, or a
    cluster), counted in ``tally``."""

    fleet: Fleet
    server: EmbeddedRedis | EmbeddedCluster
    tally: Tally
    #: gets a progress line
    note: Callable[[str], None]
    #: runs just before the server is killed (the runner notes the runs that exist)
    before_redis_kill: Callable[[], None]
    #: the cluster master that is down, to restart
    down: int | None = None
    _restarting: threading.Thread | None = None

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
        elif ev.what == "master":
            self._kill_master(ev, later)
        elif ev.what == "redis":
            assert isinstance(self.server, EmbeddedRedis)
            self.before_redis_kill()
            self.tally.acked_before_kill = len(self.tally.acked)
            self.server.kill()
            self.tally.redis_kill_ms = now_ms()
            self.note(f"redis-server SIGKILLed, down {ev.hold}s")
            time.sleep(ev.hold)
            self.server.start(timeout=60)
            self.tally.redis_restarts += 1

    def _kill_master(self, ev: Event, later: Later) -> None:
        """SIGKILL master ``ev.target``; restart it ``ev.hold`` seconds later, the
        timeline going on meanwhile (the other masters serve their shards)."""
        cluster = self.server
        assert isinstance(cluster, EmbeddedCluster)
        self.before_redis_kill()
        self.tally.acked_before_kill = len(self.tally.acked)
        cluster.kill_master(ev.target)
        self.tally.redis_kill_ms = now_ms()
        self.tally.master_killed = ev.target
        port = cluster.ports[ev.target]
        self.note(f"master {ev.target} (port {port}) SIGKILLed, down {ev.hold}s")
        self.down = ev.target
        later(ev.hold, self.restart_master)

    def restart_master(self) -> None:
        """Start the killed master again (a no-op when none is down), on a thread
        of its own: it takes a few seconds to rejoin, and the run goes on
        meanwhile.  The run calls it at its end too, should the chaos end before
        the planned restart, then :meth:`wait_restarted`."""
        if self.down is None:
            return
        assert isinstance(self.server, EmbeddedCluster)
        cluster, master, self.down = self.server, self.down, None
        self.tally.master_up_ms = now_ms()

        def rejoin() -> None:
            cluster.start_master(master, timeout=60)
            self.tally.redis_restarts += 1
            self.note(f"master {master} back")

        self._restarting = threading.Thread(target=rejoin, name="chaos-restart", daemon=True)
        self._restarting.start()

    def wait_restarted(self) -> None:
        """Wait for a master's restart to be over (it raises in its thread if the
        master does not rejoin in time; then the run finds it still down)."""
        self.restart_master()
        if self._restarting is not None:
            self._restarting.join(90)
