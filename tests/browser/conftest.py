"""Fixtures for the browser tests (tests/browser): headless Chromium, a live
``redcron dashboard`` process and a ``redcron worker -A browser_app:app``
process, all on the test's Redis and key prefix."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import browser_app  # tests/apps
import pytest
from browser_page import Browser, start_chromium  # tests/helpers
from dashboard_proc import dashboard
from procs import stop

from redcron import App

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture
def driver() -> Iterator[Any]:
    """Headless Chromium (skips without one, fails under CI)."""
    drv = start_chromium()
    try:
        yield drv
    finally:
        drv.quit()


@pytest.fixture
def admin_token() -> str:
    return secrets.token_urlsafe(32)


@pytest.fixture
def client(redis_url: str, key_prefix: str) -> Iterator[App]:
    """An App under the test's key prefix with ``browser_app``'s tasks registered."""
    app = App(redis_url, prefix=key_prefix.rstrip(":"))
    browser_app.register(app)
    yield app
    app.close()


@pytest.fixture
def live_dashboard(redis_url: str, key_prefix: str, admin_token: str) -> Iterator[str]:
    """The base URL of a ``redcron dashboard`` process (admin token in its env)."""
    with dashboard(redis_url, key_prefix, REDCRON_ADMIN_TOKEN=admin_token) as url:
        yield url


@pytest.fixture
def worker_process(redis_url: str, key_prefix: str, tmp_path: Path) -> Iterator[None]:
    """A ``redcron worker -A browser_app:app`` process; its log printed afterwards
    (pytest shows it only when the test failed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    env.update(
        PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT / 'tests' / 'apps'}",
        REDCRON_REDIS_URL=redis_url,
        REDCRON_PREFIX=key_prefix.rstrip(":"),
    )
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "redcron.cli.main", "worker", "-A", "browser_app:app",
             "-Q", "default", "-c", "4", "--grace", "2"],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            yield
        finally:
            stop(proc, 15)
    print(f"----- worker (pid {proc.pid}, exit {proc.returncode}) -----")
    print(log_path.read_text(errors="replace"))


@pytest.fixture
def browser(driver: Any, live_dashboard: str) -> Browser:
    shots = ARTIFACTS / "browser"
    shots.mkdir(parents=True, exist_ok=True)
    for old in shots.glob("*.png"):
        old.unlink()
    return Browser(driver, live_dashboard, shots)
