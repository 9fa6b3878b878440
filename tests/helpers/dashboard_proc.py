"""A ``redcron dashboard`` process for tests that talk HTTP to a live server.
Imported by name (``tests/helpers`` is on ``sys.path``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


@contextmanager
def dashboard(redis_url: str, key_prefix: str, **env: str) -> Iterator[str]:
    """Run ``redcron dashboard --port 0`` under the test's prefix (``env``: more
    REDCRON_* settings); yields its base URL once it listens."""
    full = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "REDCRON_PREFIX": key_prefix.rstrip(":"),
        **env,
    }
    with subprocess.Popen(
        [sys.executable, "-m", "redcron.cli.main", "dashboard", "--port", "0",
         "--redis", redis_url],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=full,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("redcron dashboard listening on http://127.0.0.1:"), line
            yield line.split()[4].rstrip("/")
        finally:
            proc.terminate()
            proc.wait(10)
