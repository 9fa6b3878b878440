"""Shared helpers for tests that run ``chaos_app`` workers against a real Redis.

Imported by name (``from worker_procs import ...``): ``tests/conftest.py`` puts
``tests/helpers`` and ``tests/apps`` (for ``chaos_app``) on ``sys.path``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import chaos_app
import pytest
from polling import wait_for  # noqa: F401 (re-exported for the tests)
from procs import ROOT, LoggedProc, closed_on_exit

from redcron import App
from redcron.model import TaskRecord
from redcron.worker import Worker

APPS = ROOT / "tests" / "apps"

WORKER_CODE = """
import json, logging, sys
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
import chaos_app
from redcron.worker import Worker
Worker(chaos_app.app, **json.loads(sys.argv[1])).run()
"""


def outcomes(info: TaskRecord) -> list[str]:
    """The outcome of every attempt of a task, in order ("" while it runs)."""
    return [a.outcome or "" for a in info.attempts]


@contextmanager
def chaos_app_client(redis_url: str, key_prefix: str) -> Iterator[App]:
    """An App under the test's key prefix with every ``chaos_app`` task registered."""
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)
    chaos_app.register(a)
    try:
        yield a
    finally:
        a.close()


class WorkerProc(LoggedProc):
    """One ``chaos_app`` worker subprocess, its output in a log file."""

    def __init__(self, env: dict[str, str], log_path: Path, kwargs: dict[str, Any]) -> None:
        super().__init__(WORKER_CODE, [json.dumps(kwargs)], env, log_path)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def close(self) -> None:
        if self.proc.poll() is None:
            # SIGCONT first: a stopped process would hold the SIGTERM; the second
            # SIGTERM (stop's) makes the worker hand its leases back without the grace wait.
            for sig in (signal.SIGCONT, signal.SIGTERM):
                with contextlib.suppress(ProcessLookupError):
                    self.signal(sig)
                time.sleep(0.1)
        super().close()


@contextmanager
def worker_spawner(
    redis_url: str,
    key_prefix: str,
    log_dir: Path,
    extra_env: dict[str, str] | None = None,
    **defaults: Any,
) -> Iterator[Callable[..., WorkerProc]]:
    """Yield ``start(**kwargs)``, which runs a worker subprocess (``Worker(chaos_app.app,
    **kwargs)``, ``defaults`` filling in what is not given; ``extra_env`` added to its
    environment, e.g. ``REDCRON_DURABILITY``). Every worker is stopped (or killed) on
    exit, then its log printed: pytest shows it only when the test failed.
    """
    workers: list[WorkerProc] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    env.update(
        PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{APPS}",
        REDCRON_REDIS_URL=redis_url,
        REDCRON_PREFIX=key_prefix.rstrip(":"),
        REDCRON_MIN_LEASE_TTL="0.5",
    )
    env.update(extra_env or {})

    def start(**kwargs: Any) -> WorkerProc:
        for name, value in defaults.items():
            kwargs.setdefault(name, value)
        w = WorkerProc(env, log_dir / f"worker{len(workers)}.log", kwargs)
        workers.append(w)
        return w

    with closed_on_exit(workers):
        yield start


@contextmanager
def thread_workers(app: App, name: str = "test-worker") -> Iterator[Callable[..., Worker]]:
    """Start in-process workers (threads pool); stopped and joined on exit."""
    running: list[tuple[Worker, threading.Thread]] = []

    def start(**kwargs: Any) -> Worker:
        kwargs.setdefault("lease_ttl", 2.0)
        kwargs.setdefault("grace", 1.0)
        w = Worker(app, **kwargs)
        t = threading.Thread(target=w.run, name=name, daemon=True)
        t.start()
        running.append((w, t))
        return w

    try:
        yield start
    finally:
        # also when the test failed: a worker left running would go on calling
        # Redis and `random` (jitter) beside the process's next tests (a later
        # Hypothesis test then failed as "data generation depends on external state")
        for w, _t in running:
            w.stop(graceful=False)
        for _w, t in running:
            t.join(15)
            assert not t.is_alive(), "worker thread did not stop"


def lifeline_sleeper(lifeline: Any) -> None:
    """A spawned child that only watches its lifeline (no death signal armed): the
    portable fallback of the processes pool, on its own."""
    from redcron.worker.pools import watch_lifeline

    os.setsid()
    watch_lifeline(lifeline)
    time.sleep(60)


# Fixtures shared by the tests that run in-process workers against the chaos
# app; a module takes them with ``from worker_procs import app_fixture,
# start_worker_fixture`` (pytest registers them as ``app`` and ``start_worker``).


@pytest.fixture(name="app")
def app_fixture(redis_url: str, key_prefix: str) -> Iterator[App]:
    """The chaos app's client under the test's key prefix."""
    with chaos_app_client(redis_url, key_prefix) as a:
        yield a


@pytest.fixture(name="start_worker")
def start_worker_fixture(app: App) -> Iterator[Callable[..., Worker]]:
    """Start in-process workers (threads pool); they are stopped and joined afterwards."""
    with thread_workers(app, "test-worker") as start:
        yield start
