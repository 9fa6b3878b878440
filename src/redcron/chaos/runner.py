"""Run a :class:`~redcron.chaos.scenario.Scenario` against real processes.

The runner starts an embedded ``redis-server`` (AOF, ``appendfsync always``) in
a temporary directory, 4 worker processes (``Worker(audit=True)`` on the chaos
app) and 2 beats (``redcron beat``), then plays the plan's timeline: it submits
the one-off waves, cancels the "cancel" tasks once they run, and SIGKILLs or
SIGSTOPs (then SIGCONTs) workers, SIGKILLs beats (restarting what it killed at
once) and the Redis server (restarted after the planned outage).  Then it lets
the system settle: every process back, beats stopped, every task and run
ended, workers stopped; and hands what it saw to :func:`~redcron.chaos.checker.check`.

With a cluster scenario (``--cluster``) it starts a local 3-master Redis
Cluster instead (:class:`~redcron.embedded_cluster.EmbeddedCluster`, AOF,
``appendfsync always``) for a deployment of 12 shards, and the Redis fault is
one master SIGKILLed and restarted after the planned outage while the run goes
on; besides every invariant, :mod:`~redcron.chaos.outage` checks that only
that master's shards paused and that their work resumed.

This module is the run and its observation (the timeline, progress, settling,
the facts for the checker); the processes are in :mod:`~redcron.chaos.procs`,
the fault injection in :mod:`~redcron.chaos.faults`, the one-off submissions
in :mod:`~redcron.chaos.submissions` and what was done so far in
:mod:`~redcron.chaos.tally`.

Times the runner records itself (a process killed, the end of the fire window)
are wall-clock ms read on this machine, which is the Redis server's machine:
the embedded server's ``TIME`` reads the same clock, so they compare with the
server-stamped times of the audit and the instance hashes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import heapq
import itertools
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from redcron.app import App
from redcron.chaos.checker import ChaosReport, Facts, JobFacts, check
from redcron.chaos.faults import Faults
from redcron.chaos.outage import account, describe, judge, shard_masters
from redcron.chaos.procs import Fleet, now_ms
from redcron.chaos.scenario import Scenario
from redcron.chaos.submissions import Submissions
from redcron.chaos.tally import Tally
from redcron.chaos.tasks import register
from redcron.embedded import EmbeddedRedis
from redcron.embedded_cluster import EmbeddedCluster
from redcron.engine import TRANSIENT
from redcron.model import RunRecord
from redcron.model.records import epoch_ms
from redcron.model.states import TASK_TERMINAL
from redcron.store import AuditLog

#: seconds between progress lines
PROGRESS_EVERY = 5.0
#: seconds the beats go on after the chaos, so the last kill's backlog fires
BEAT_SETTLE_S = 3.0
#: runs each job keeps (all of them, for the checker), and so reads back
KEEP_RUNS = 100_000
#: fires due this close to the beats' stop may or may not have been fired
FIRE_SLACK_MS = 2500


class Runner:
    """Play ``scenario``; :meth:`run` returns the checker's report.

    ``say`` gets progress lines (the CLI prints them on stderr).  ``keep``: leave
    the data directory (AOF, process logs) in place; it is kept anyway when the
    check finds a violation, and its path is in the report.
    """

    def __init__(
        self,
        scenario: Scenario,
        say: Callable[[str], None] | None = None,
        keep: bool = False,
        settle_timeout: float = 120.0,
    ) -> None:
        self.sc = scenario
        self.say = say or (lambda _line: None)
        self.keep = keep
        self.settle_timeout = settle_timeout
        self.tally = Tally()
        self.dir = Path(tempfile.mkdtemp(prefix=f"redcron-chaos-{scenario.seed}-"))
        self.server: EmbeddedRedis | EmbeddedCluster
        if scenario.cluster:
            self.server = EmbeddedCluster(
                self.dir / "cluster", masters=scenario.masters, appendonly=True, fsync="always"
            )
        else:
            self.server = EmbeddedRedis(self.dir / "redis", fsync="always")
        # the cluster's URL is known once it runs (free ports): both made in _setup
        self.fleet: Fleet | None = None
        self.faults: Faults | None = None
        self.load: Submissions | None = None
        self._t0 = 0.0
        self.app: App | None = None
        self.jobs: list[JobFacts] = []

    def _elapsed(self) -> float:
        return time.monotonic() - self._t0

    def _note(self, text: str) -> None:
        """A progress line: ``chaos:``, the seconds since the run began, ``text``."""
        self.say(f"chaos: {self._elapsed():5.1f}s  {text}")

    # -- the timeline -------------------------------------------------------------------

    def _progress(self) -> None:
        t = self.tally
        ended = "?"
        if self.app is not None:
            with contextlib.suppress(*TRANSIENT):
                ended = str(AuditLog(self.app.broker).attempts_ended())
        self._note(
            f"kills {t.worker_kills + t.beat_kills} "
            f"(workers {t.worker_kills}, beats {t.beat_kills}) stops {t.worker_stops}  "
            f"redis restarts {t.redis_restarts}  tasks {t.enqueued}/{self.sc.tasks}  "
            f"attempts ended {ended}"
        )

    def _play(self) -> None:
        assert self.load is not None
        timeline: list[tuple[float, int, Callable[[], None]]] = []
        seq = itertools.count()

        def at(when: float, fn: Callable[[], None]) -> None:
            heapq.heappush(timeline, (when, next(seq), fn))

        def later(delay: float, fn: Callable[[], None]) -> None:
            at(self._elapsed() + delay, fn)

        for when, wave in self.sc.waves:
            at(when, functools.partial(self.load.submit, wave))
        assert self.faults is not None
        for ev in self.sc.events:
            at(ev.at, functools.partial(self.faults.apply, ev, later))
        next_tick = 0.0
        next_progress = PROGRESS_EVERY
        while True:
            now = self._elapsed()
            while timeline and timeline[0][0] <= now:
                heapq.heappop(timeline)[2]()
            if now >= next_tick:
                self.load.flush()
                self.load.cancel_running()
                next_tick = now + 0.2
            if now >= next_progress:
                self._progress()
                next_progress += PROGRESS_EVERY
            if now >= self.sc.duration:
                # what is left (a frozen worker's SIGCONT) is done by _settle; a
                # master still down is restarted now
                self.faults.wait_restarted()
                break
            time.sleep(max(0.0, min(0.05, (timeline[0][0] - now) if timeline else 0.05)))

    # -- settling -----------------------------------------------------------------------

    def _settle(self) -> tuple[int, float]:
        """Every process back, beats stopped, all work ended, workers stopped.
        Returns (the end of the fire window, ms; seconds it took to go idle)."""
        assert self.app is not None and self.load is not None and self.fleet is not None
        exited = self.fleet.revive_workers()
        if exited:
            self._note(f"workers that exited on their own, restarted: {', '.join(exited)}")
        while self.load.pending:
            self.load.flush()
            time.sleep(0.1)
        self.load.cancel_running(all_left=True)
        time.sleep(BEAT_SETTLE_S)
        fire_end = now_ms()
        for b in self.fleet.beats:
            b.terminate()
        self._note("chaos over; waiting for every task and run")
        t0 = time.monotonic()
        audit = AuditLog(self.app.broker)
        left = list(self.tally.acked)
        while time.monotonic() - t0 < self.settle_timeout:
            try:
                self.load.cancel_running(all_left=True)
                left = self._not_ended(audit, left)
                runs_open = self._runs_open()
            except TRANSIENT:
                time.sleep(0.5)
                continue
            if not left and not runs_open:
                break
            time.sleep(0.5)
        idle_s = time.monotonic() - t0
        for w in self.fleet.workers:
            w.terminate()
        return fire_end, round(idle_s, 1)

    # -- what Redis holds ---------------------------------------------------------------

    def _not_ended(self, audit: AuditLog, iids: list[str]) -> list[str]:
        states = audit.states(iids)
        return [i for i in iids if states.get(i, "") not in TASK_TERMINAL]

    def _runs(self) -> Iterator[RunRecord]:
        """Every run of the scenario's jobs (each keeps up to ``KEEP_RUNS``)."""
        assert self.app is not None
        for job in self.jobs:
            yield from self.app.jobs.runs(job.id, limit=KEEP_RUNS)

    def _runs_open(self) -> int:
        return sum(1 for r in self._runs() if not r.ended_at)

    def _snapshot_runs(self) -> None:
        with contextlib.suppress(*TRANSIENT):
            for run in self._runs():
                self.tally.runs_before_kill.add(run.id)

    # -- the whole run ------------------------------------------------------------------

    def _setup(self) -> None:
        self.server.start()
        self.fleet = Fleet(self.sc, self.server.url, self.dir)
        self.faults = Faults(self.fleet, self.server, self.tally, self._note, self._snapshot_runs)
        self.app = register(
            App(
                self.server.url,
                shards=self.sc.shards,
                lease_ttl=self.sc.lease_ttl,
                min_lease_ttl=self.sc.min_lease_ttl,
            )
        )
        for t in self.sc.tenants:
            self.app.tenants.set(t.name, weight=t.weight, max_in_flight=t.cap)
        for j in self.sc.jobs:
            rec = self.app.jobs.put(
                j.name, tenant=j.tenant, tasks=j.tasks, every=j.every, overlap="allow",
                keep_runs=KEEP_RUNS,
            )  # fmt: skip
            assert rec.next_fire is not None
            self.jobs.append(JobFacts(rec.id, j.name, j.every, epoch_ms(rec.next_fire)))
        self.load = Submissions(self.app, self.tally)
        self.fleet.start()

    def run(self) -> ChaosReport:
        started = time.monotonic()
        self._t0 = started
        ok = False
        try:
            self._setup()
            where = (
                f"a {self.sc.masters}-master cluster, {self.sc.shards} shards"
                if self.sc.cluster
                else "one redis-server"
            )
            self.say(
                f"chaos: seed {self.sc.seed}, {self.sc.duration:g}s, {self.sc.tasks} tasks, "
                f"{len(self.sc.workers)} workers, {self.sc.beats} beats on {where}, "
                f"data in {self.dir}"
            )
            self._play()
            fire_end, idle_s = self._settle()
            assert self.app is not None
            t = self.tally
            facts = Facts(
                acked=tuple(t.acked),
                acked_before_kill=t.acked_before_kill,
                cancelled=frozenset(t.cancelled),
                runs_before_kill=frozenset(t.runs_before_kill),
                jobs=tuple(self.jobs),
                fire_end_ms=fire_end - FIRE_SLACK_MS,
                worker_ends=self.fleet.worker_ends() if self.fleet else {},
            )
            self._note("checking")
            report = check(self.app, self.sc, facts)
            if self.sc.cluster:
                report = self._judge_outage(report)
            report = report.with_run(
                worker_kills=t.worker_kills,
                worker_stops=t.worker_stops,
                beat_kills=t.beat_kills,
                redis_restarts=t.redis_restarts,
                cancels=t.cancels,
                settle_s=idle_s,
                elapsed_s=round(time.monotonic() - started, 1),
                data_dir=str(self.dir),
            )
            ok = report.ok
            return report
        finally:
            if self.fleet is not None:
                self.fleet.terminate_all(5)
            if self.app is not None:
                self.app.close()
            self.server.stop()
            if ok and not self.keep:
                shutil.rmtree(self.dir, ignore_errors=True)

    def _judge_outage(self, report: ChaosReport) -> ChaosReport:
        """The master outage's accounting and violations added to ``report``."""
        assert self.app is not None
        t = self.tally
        if t.master_killed is None or t.redis_kill_ms is None or t.master_up_ms is None:
            sentence = "the planned master kill and restart did not both happen"
            return dataclasses.replace(
                report,
                cluster=True,
                violations=(*report.violations, sentence),
                invariant_violations=report.invariant_violations + 1,
            )
        where = shard_masters(self.sc.shards, self.sc.masters, self.app.settings.prefix)
        found = account(
            self._attempt_ends(), where, t.master_killed, t.redis_kill_ms, t.master_up_ms
        )
        self._note(describe(found))
        broken = judge(found)
        return dataclasses.replace(
            report,
            cluster=True,
            outage=found,
            violations=(*report.violations, *broken),
            invariant_violations=report.invariant_violations + len(broken),
        )

    def _attempt_ends(self) -> Iterator[tuple[int, int]]:
        """``(shard, ended ms)`` of every attempt that ended, from the histories."""
        assert self.app is not None
        log = AuditLog(self.app.broker)
        for shard in range(self.sc.shards):
            for rec in log.task_infos(shard, list(log.instance_ids(shard))).values():
                for a in rec.attempts:
                    if a.ended_at is not None:
                        yield shard, epoch_ms(a.ended_at)


def run_scenario(
    scenario: Scenario, say: Callable[[str], None] | None = None, keep: bool = False
) -> ChaosReport:
    """Run ``scenario`` (see :class:`Runner`) and return the checker's report."""
    return Runner(scenario, say, keep).run()
