"""A workload to run through a Redis failover or outage: a beat subprocess firing
a job every second, a producer thread enqueuing tasks, and the checks of what
must have survived.  Imported by name (``tests/helpers`` is on ``sys.path``).
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from procs import ROOT, LoggedProc, closed_on_exit

from redcron import App
from redcron.errors import RedcronError
from redcron.model.jobs import Task
from redcron.model.records import epoch_ms

BEAT_CODE = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
from redcron import App
from redcron.beat.beat import Beat
Beat(App(), name=sys.argv[1], shard_ttl=1.0, catchup_window=60).run()
"""


class BeatProc(LoggedProc):
    """One beat subprocess (``Beat(App(), shard_ttl=1.0)``), its output in a log file."""

    def __init__(self, name: str, env: dict[str, str], log_path: Path) -> None:
        super().__init__(BEAT_CODE, [name], env, log_path)
        self.name = name


@contextmanager
def beat_spawner(
    redis_url: str, key_prefix: str, log_dir: Path, extra_env: dict[str, str] | None = None
) -> Iterator[Callable[[str], BeatProc]]:
    """Yield ``start(name)``, which runs a beat subprocess on the test's deployment;
    every beat is stopped on exit and its log printed (shown when the test failed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    env.update(
        PYTHONPATH=str(ROOT / "src"),
        REDCRON_REDIS_URL=redis_url,
        REDCRON_PREFIX=key_prefix.rstrip(":"),
        **(extra_env or {}),
    )
    beats: list[BeatProc] = []

    def start(name: str) -> BeatProc:
        b = BeatProc(name, env, log_dir / f"{name}.log")
        beats.append(b)
        return b

    with closed_on_exit(beats, tail=4000):
        yield start


def every_second_job(app: App) -> str:
    """A job firing every second; its task (``echo``, retried) runs on the workers."""
    job = app.jobs.put(
        "tick", tasks={"t": Task("echo", args=["tick"], retries=3)}, every="1s", overlap="allow"
    )
    return job.id


def fire_times(app: App, job_id: str) -> list[int]:
    """The job's runs' nominal fire times (ms), checked: one run per fire time, each
    run id derived from it, and none skipped between the first and the last."""
    runs = app.jobs.runs(job_id, limit=10_000)
    nominal = sorted(epoch_ms(r.scheduled_for) for r in runs)
    assert len(nominal) == len(set(nominal)), "two runs for one fire time"
    assert all(r.id == f"{job_id}@{epoch_ms(r.scheduled_for)}" for r in runs)
    gaps = [(a, b) for a, b in itertools.pairwise(nominal) if b - a != 1000]
    assert not gaps, f"fire times missed between {gaps}"
    return nominal


@dataclass
class Producer:
    """Enqueues ``flaky(0)`` (succeeds, returns its attempt number) every
    ``interval`` seconds in a thread, and records every acknowledged enqueue
    (the call returned) with when it returned (monotonic), and every refusal."""

    app: App
    interval: float = 0.05
    acked: list[tuple[str, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Producer:
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                handle = self.app.enqueue("flaky", 0)
                self.acked.append((handle.id, time.monotonic()))
            except RedcronError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


#: a worker's line for an attempt whose report landed (docs/operations.md)
_REPORTED = re.compile(r"task flaky (\S+) \(tenant [^)]*\) attempt (\d+)/\d+ succeeded in \S+$")


def reported_successes(log: str) -> dict[str, int]:
    """Task id -> the attempt a worker's log says it reported succeeded (acknowledged)."""
    out: dict[str, int] = {}
    for line in log.splitlines():
        m = _REPORTED.search(line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out
