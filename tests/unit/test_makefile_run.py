"""``make run ARGS="..."`` passes its flags on to ``redcron up`` (a dry run of
the Makefile: nothing is installed or started)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_run_passes_args_through() -> None:
    done = subprocess.run(
        ["make", "-n", "run", 'ARGS=--dashboard-port 8001 --concurrency 2'],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if "redcron up" in x]
    assert line.endswith("redcron up -A examples.tasks:app --dashboard-port 8001 --concurrency 2")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_run_without_args_runs_the_example_app() -> None:
    done = subprocess.run(
        ["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    (line,) = [x for x in done.stdout.splitlines() if "redcron up" in x]
    assert line.rstrip().endswith("redcron up -A examples.tasks:app")
