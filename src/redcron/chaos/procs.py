"""The chaos run's processes: a :class:`Proc` wraps one worker or beat
subprocess (its output in a log file), a :class:`Fleet` holds the worker and
beat slots of a scenario and restarts a slot's process in place.

Workers are ``Worker(audit=True)`` on the chaos app, started with ``python -c``
(the processes pool needs an importable app: ``APP_PATH``); beats are
``redcron beat``.  Both get the environment the runner's App was built from
(``REDCRON_REDIS_URL``, ``REDCRON_SHARDS``...) and nothing else of ``REDCRON_*``.

Times recorded here are wall-clock ms on this machine (:func:`now_ms`), which is
the embedded Redis server's machine, so they compare with server-stamped times.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redcron
from redcron.chaos.scenario import Scenario, WorkerPlan

APP_PATH = "redcron.chaos.tasks:chaos_app()"
WORKER_CODE = """
import json, logging, sys
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
from redcron.chaos.tasks import chaos_app
from redcron.worker import Worker
Worker(chaos_app(), **json.loads(sys.argv[1])).run()
"""


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

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        self._signal(signal.SIGSTOP)
        self.stopped = True

    def cont(self) -> None:
        self._signal(signal.SIGCONT)
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


class Fleet:
    """The scenario's worker and beat slots, their processes logging to ``log_dir``.

    ``start`` fills every slot; ``replace_worker`` / ``replace_beat`` retire a
    slot's process (killed or exited) and start a new one in its place, under a
    new name (``w<slot>.<n>``, ``b<slot>.<n>``)."""

    def __init__(self, scenario: Scenario, redis_url: str, log_dir: Path) -> None:
        self.sc = scenario
        self.redis_url = redis_url
        self.log_dir = log_dir
        self.env: dict[str, str] = {}
        self.workers: list[Proc] = []
        self.beats: list[Proc] = []
        self.retired: list[Proc] = []
        self._gen = itertools.count()

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
        src = str(Path(redcron.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
        env.update(
            REDCRON_REDIS_URL=self.redis_url,
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
        return Proc(name, argv, self.env, self.log_dir)

    def _start_beat(self, slot: int) -> Proc:
        name = f"b{slot}.{next(self._gen)}"
        argv = [sys.executable, "-m", "redcron.cli.main", "beat", "--shard-ttl", "1",
                "--catchup-window", "60", "--name", name, "--loglevel", "warning"]  # fmt: skip
        return Proc(name, argv, self.env, self.log_dir)

    def start(self) -> None:
        """Start a process in every worker slot, then in every beat slot, each with
        this process's environment, ``REDCRON_*`` replaced by the scenario's."""
        self.env = self._environment()
        self.workers = [self._start_worker(i) for i in range(len(self.sc.workers))]
        self.beats = [self._start_beat(i) for i in range(self.sc.beats)]

    def replace_worker(self, slot: int) -> None:
        self.retired.append(self.workers[slot])
        self.workers[slot] = self._start_worker(slot)

    def replace_beat(self, slot: int) -> None:
        self.retired.append(self.beats[slot])
        self.beats[slot] = self._start_beat(slot)

    def revive_workers(self) -> list[str]:
        """SIGCONT every frozen worker; restart every slot whose process is gone.
        Returns the names of those that exited on their own (their logs say why)."""
        exited = []
        for slot, w in enumerate(self.workers):
            if w.stopped:
                w.cont()
            if not w.alive():
                w.terminate()  # already gone: notes when, closes its log
                exited.append(f"{w.name} (exit status {w.proc.returncode})")
                self.replace_worker(slot)
        return exited

    def worker_ends(self) -> dict[str, int]:
        """When each worker process, past and present, stopped running anything."""
        return {
            p.name: p.ended_ms
            for p in [*self.retired, *self.workers]
            if p.ended_ms is not None and p.name.startswith("w")
        }

    def terminate_all(self, wait: float) -> None:
        for p in [*self.workers, *self.beats]:
            p.terminate(wait)
