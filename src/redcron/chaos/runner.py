"""Run a :class:`~redcron.chaos.scenario.Scenario` against real processes.

The runner starts an embedded ``redis-server`` (AOF, ``appendfsync always``) in
a temporary directory, 4 worker processes (``Worker(audit=True)`` on the chaos
app) and 2 beats (``redcron beat``), then plays the plan's timeline: it submits
the one-off waves, cancels the "cancel" tasks once they run, and SIGKILLs or
SIGSTOPs (then SIGCONTs) workers, SIGKILLs beats (restarting what it killed at
once) and the Redis server (restarted after the planned outage).  Then it lets
the system settle: every process back, beats stopped, every task and run
ended, workers stopped; and hands what it saw to :func:`~redcron.chaos.checker.check`.

Times the runner records itself (a process killed, the end of the fire window)
are wall-clock ms read on this machine, which is the Redis server's machine:
the embedded server's ``TIME`` reads the same clock, so they compare with the
server-stamped times of the audit and the instance hashes.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redcron
from redcron.app import App
from redcron.broker import TRANSIENT, AuditLog, EnqueueRow
from redcron.chaos.checker import ChaosReport, Facts, JobFacts, check
from redcron.chaos.scenario import Event, OneOff, Scenario, WorkerPlan
from redcron.chaos.tasks import register
from redcron.embedded import EmbeddedRedis
from redcron.errors import Conflict
from redcron.keys import shard_of_id
from redcron.model.records import epoch_ms
from redcron.model.states import TASK_TERMINAL

APP_PATH = "redcron.chaos.tasks:chaos_app()"
WORKER_CODE = """
import json, logging, sys
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
from redcron.chaos.tasks import chaos_app
from redcron.worker import Worker
Worker(chaos_app(), **json.loads(sys.argv[1])).run()
"""
#: seconds between progress lines
PROGRESS_EVERY = 5.0
#: seconds the beats go on after the chaos, so the last kill's backlog fires
BEAT_SETTLE_S = 3.0
#: fires due this close to the beats' stop may or may not have been fired
FIRE_SLACK_MS = 2500


def now_ms() -> int:
    """Wall-clock ms on this machine (the embedded server's clock, see the module doc)."""
    return time.time_ns() // 1_000_000


class Proc:
    """One worker or beat subprocess, its output in a log file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._out = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            argv, env=env, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        self.stopped = False
        #: when the process stopped running anything (killed or exited), wall ms
        self.ended_ms: int | None = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait(10)
        self.ended_ms = now_ms()
        self._out.close()

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGSTOP)
        self.stopped = True

    def cont(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)
        self.stopped = False

    def terminate(self, wait: float = 20.0) -> None:
        """SIGCONT, then SIGTERM (a worker finishes what runs within its grace)."""
        if self.alive():
            self.cont()
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.ended_ms is None:
            self.ended_ms = now_ms()
        if not self._out.closed:
            self._out.close()


@dataclass
class Tally:
    """What the runner did so far."""

    worker_kills: int = 0
    worker_stops: int = 0
    beat_kills: int = 0
    redis_restarts: int = 0
    enqueued: int = 0
    cancels: int = 0
    redis_kill_ms: int | None = None
    acked: list[str] = field(default_factory=list)
    #: the ids a cancel was accepted for: each must end cancelled
    cancelled: list[str] = field(default_factory=list)
    acked_before_kill: int = 0
    runs_before_kill: set[str] = field(default_factory=set)


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
        self.server = EmbeddedRedis(self.dir / "redis", fsync="always")
        self.workers: list[Proc] = []
        self.beats: list[Proc] = []
        self.retired: list[Proc] = []
        self._gen = itertools.count()
        self._pending: list[list[EnqueueRow]] = []  # row groups (one shard each) to enqueue
        self._to_cancel: list[str] = []
        self._t0 = 0.0
        self.app: App | None = None
        self.env: dict[str, str] = {}
        self.jobs: list[JobFacts] = []

    # -- processes ----------------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
        src = str(Path(redcron.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
        env.update(
            REDCRON_REDIS_URL=self.server.url,
            REDCRON_SHARDS=str(self.sc.shards),
            REDCRON_LEASE_TTL=str(self.sc.lease_ttl),
            REDCRON_MIN_LEASE_TTL=str(self.sc.min_lease_ttl),
        )
        return env

    def _start_worker(self, slot: int) -> Proc:
        plan: WorkerPlan = self.sc.workers[slot]
        name = f"w{slot}.{next(self._gen)}"
        kwargs = {
            "pool": plan.pool,
            "concurrency": plan.concurrency,
            "prefetch": plan.prefetch,
            "name": name,
            "grace": 5.0,
            "audit": True,
            "app_path": APP_PATH,
        }
        argv = [sys.executable, "-c", WORKER_CODE, json.dumps(kwargs)]
        return Proc(name, argv, self.env, self.dir)

    def _start_beat(self, slot: int) -> Proc:
        name = f"b{slot}.{next(self._gen)}"
        argv = [sys.executable, "-m", "redcron.cli.main", "beat", "--shard-ttl", "1",
                "--catchup-window", "60", "--name", name, "--loglevel", "warning"]  # fmt: skip
        return Proc(name, argv, self.env, self.dir)

    def _replace(self, group: list[Proc], slot: int, start: Callable[[int], Proc]) -> None:
        self.retired.append(group[slot])
        group[slot] = start(slot)

    # -- the timeline -------------------------------------------------------------------

    def _elapsed(self) -> float:
        return time.monotonic() - self._t0

    def _submit(self, wave: tuple[OneOff, ...]) -> None:
        assert self.app is not None
        by_shard: dict[int, list[EnqueueRow]] = {}
        for job in wave:
            opts: dict[str, Any] = {"_tenant": job.tenant, "_priority": job.priority}
            if job.timeout is not None:
                opts["_timeout"] = job.timeout
            if job.retries is not None:
                opts["_retries"] = job.retries
            defaults = self.app.tasks[job.task].options
            row = self.app._row(job.task, "python", [list(job.args), {}], defaults, opts)
            by_shard.setdefault(shard_of_id(row.iid), []).append(row)
            if job.kind == "cancel":
                self._to_cancel.append(row.iid)
        self._pending.extend(by_shard.values())
        self._flush()

    def _flush(self) -> None:
        """Enqueue the row groups not yet acknowledged, the same rows again after an
        error (each group is one atomic call: a Conflict on a retry means the
        first call wrote it, and its answer was lost with the connection)."""
        assert self.app is not None
        while self._pending:
            rows = self._pending[0]
            try:
                self.app.broker.enqueue(rows)
            except Conflict:
                pass
            except TRANSIENT:
                return
            self._pending.pop(0)
            self.tally.acked += [r.iid for r in rows]
            self.tally.enqueued += len(rows)

    def _cancel_running(self, all_left: bool = False) -> None:
        assert self.app is not None
        if not self._to_cancel:
            return
        audit = AuditLog(self.app.broker)
        left: list[str] = []
        try:
            states = audit.states(self._to_cancel)
            for iid in self._to_cancel:
                state = states.get(iid, "")
                if state in TASK_TERMINAL:
                    continue
                if state == "running" or (all_left and state):
                    if self.app.broker.cancel(iid).cancelled:
                        self.tally.cancelled.append(iid)
                    self.tally.cancels += 1
                else:
                    left.append(iid)
        except TRANSIENT:
            return
        self._to_cancel = left

    def _chaos(self, ev: Event, later: Callable[[float, Callable[[], None]], None]) -> None:
        if ev.what == "worker":
            w = self.workers[ev.target]
            if w.stopped:
                return  # already frozen: leave it to its planned SIGCONT
            if ev.action == "kill":
                w.kill()
                self.tally.worker_kills += 1
                self._replace(self.workers, ev.target, self._start_worker)
            else:
                w.stop()
                self.tally.worker_stops += 1
                later(ev.hold, w.cont)
        elif ev.what == "beat":
            self.beats[ev.target].kill()
            self.tally.beat_kills += 1
            self._replace(self.beats, ev.target, self._start_beat)
        elif ev.what == "redis":
            self._snapshot_runs()
            self.tally.acked_before_kill = len(self.tally.acked)
            self.server.kill()
            self.tally.redis_kill_ms = now_ms()
            self.say(f"chaos: {self._elapsed():5.1f}s  redis-server SIGKILLed, down {ev.hold}s")
            time.sleep(ev.hold)
            self.server.start(timeout=60)
            self.tally.redis_restarts += 1

    def _snapshot_runs(self) -> None:
        assert self.app is not None
        with contextlib.suppress(*TRANSIENT):
            for job in self.jobs:
                for run in self.app.jobs.runs(job.id, limit=100_000):
                    self.tally.runs_before_kill.add(run.id)

    def _progress(self) -> None:
        t = self.tally
        ended = "?"
        if self.app is not None:
            with contextlib.suppress(*TRANSIENT):
                ended = str(AuditLog(self.app.broker).attempts_ended())
        self.say(
            f"chaos: {self._elapsed():5.1f}s  kills {t.worker_kills + t.beat_kills} "
            f"(workers {t.worker_kills}, beats {t.beat_kills}) stops {t.worker_stops}  "
            f"redis restarts {t.redis_restarts}  tasks {t.enqueued}/{self.sc.tasks}  "
            f"attempts ended {ended}"
        )

    def _play(self) -> None:
        timeline: list[tuple[float, int, Callable[[], None]]] = []
        seq = itertools.count()

        def at(when: float, fn: Callable[[], None]) -> None:
            heapq.heappush(timeline, (when, next(seq), fn))

        def later(delay: float, fn: Callable[[], None]) -> None:
            at(self._elapsed() + delay, fn)

        for when, wave in self.sc.waves:
            at(when, functools.partial(self._submit, wave))
        for ev in self.sc.events:
            at(ev.at, functools.partial(self._chaos, ev, later))
        next_tick = 0.0
        next_progress = PROGRESS_EVERY
        while True:
            now = self._elapsed()
            while timeline and timeline[0][0] <= now:
                heapq.heappop(timeline)[2]()
            if now >= next_tick:
                self._flush()
                self._cancel_running()
                next_tick = now + 0.2
            if now >= next_progress:
                self._progress()
                next_progress += PROGRESS_EVERY
            if now >= self.sc.duration:
                break  # what is left (a frozen worker's SIGCONT) is done by _settle
            time.sleep(max(0.0, min(0.05, (timeline[0][0] - now) if timeline else 0.05)))

    # -- settling -----------------------------------------------------------------------

    def _settle(self) -> tuple[int, float]:
        """Every process back, beats stopped, all work ended, workers stopped.
        Returns (the end of the fire window, ms; seconds it took to go idle)."""
        assert self.app is not None
        for slot, w in enumerate(self.workers):
            if w.stopped:
                w.cont()
            if not w.alive():
                self._replace(self.workers, slot, self._start_worker)
        while self._pending:
            self._flush()
            time.sleep(0.1)
        self._cancel_running(all_left=True)
        time.sleep(BEAT_SETTLE_S)
        fire_end = now_ms()
        for b in self.beats:
            b.terminate()
        self.say(f"chaos: {self._elapsed():5.1f}s  chaos over; waiting for every task and run")
        t0 = time.monotonic()
        audit = AuditLog(self.app.broker)
        left = list(self.tally.acked)
        while time.monotonic() - t0 < self.settle_timeout:
            try:
                self._cancel_running(all_left=True)
                left = self._not_ended(audit, left)
                runs_open = self._runs_open()
            except TRANSIENT:
                time.sleep(0.5)
                continue
            if not left and not runs_open:
                break
            time.sleep(0.5)
        idle_s = time.monotonic() - t0
        for w in self.workers:
            w.terminate()
        return fire_end, round(idle_s, 1)

    def _not_ended(self, audit: AuditLog, iids: list[str]) -> list[str]:
        states = audit.states(iids)
        return [i for i in iids if states.get(i, "") not in TASK_TERMINAL]

    def _runs_open(self) -> int:
        assert self.app is not None
        n = 0
        for job in self.jobs:
            n += sum(1 for r in self.app.jobs.runs(job.id, limit=100_000) if not r.ended_at)
        return n

    # -- the whole run ------------------------------------------------------------------

    def _setup(self) -> None:
        self.server.start()
        self.env = self._environment()
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
                keep_runs=100_000,
            )  # fmt: skip
            assert rec.next_fire is not None
            self.jobs.append(JobFacts(rec.id, j.name, j.every, epoch_ms(rec.next_fire)))
        self.workers = [self._start_worker(i) for i in range(len(self.sc.workers))]
        self.beats = [self._start_beat(i) for i in range(self.sc.beats)]

    def run(self) -> ChaosReport:
        started = time.monotonic()
        self._t0 = started
        ok = False
        try:
            self._setup()
            self.say(
                f"chaos: seed {self.sc.seed}, {self.sc.duration:g}s, {self.sc.tasks} tasks, "
                f"{len(self.sc.workers)} workers, {self.sc.beats} beats, data in {self.dir}"
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
                worker_ends={
                    p.name: p.ended_ms
                    for p in [*self.retired, *self.workers]
                    if p.ended_ms is not None and p.name.startswith("w")
                },
            )
            self.say(f"chaos: {self._elapsed():5.1f}s  checking")
            report = check(self.app, self.sc, facts)
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
            for p in [*self.workers, *self.beats]:
                p.terminate(5)
            if self.app is not None:
                self.app.close()
            self.server.stop()
            if ok and not self.keep:
                shutil.rmtree(self.dir, ignore_errors=True)


def run_scenario(
    scenario: Scenario, say: Callable[[str], None] | None = None, keep: bool = False
) -> ChaosReport:
    """Run ``scenario`` (see :class:`Runner`) and return the checker's report."""
    return Runner(scenario, say, keep).run()
