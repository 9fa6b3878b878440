"""A ``redcron dashboard`` process for tests that talk HTTP to a live server.
Imported by name (``tests/helpers`` is on ``sys.path``)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
APPS = Path(__file__).resolve().parents[1] / "apps"


@contextmanager
def dashboard(
    redis_url: str,
    key_prefix: str,
    log_path: Path | None = None,
    args: Sequence[str] = (),
    **env: str,
) -> Iterator[str]:
    """Run ``redcron dashboard --port 0`` under the test's prefix (``env``: more
    REDCRON_* settings; ``args``: more options, e.g. ``-A module:app``, the module
    found in tests/apps); yields its base URL once it listens.  Its stderr goes
    to ``log_path`` (default: a temporary file), printed when it stops so a
    failing test shows the server's tracebacks."""
    with dashboard_process(redis_url, key_prefix, log_path, args, **env) as (url, _proc):
        yield url


@contextmanager
def dashboard_process(
    redis_url: str,
    key_prefix: str,
    log_path: Path | None = None,
    args: Sequence[str] = (),
    **env: str,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """:func:`dashboard`, yielding the process too (a test may stop it itself)."""
    full = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(APPS)]),
        "REDCRON_PREFIX": key_prefix.rstrip(":"),
        **env,
    }
    with contextlib.ExitStack() as stack:
        if log_path is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="redcron-dash-"))
            log_path = Path(tmp) / "dashboard.log"
        log = stack.enter_context(log_path.open("w"))
        proc = stack.enter_context(
            subprocess.Popen(
                [sys.executable, "-m", "redcron.cli.main", "dashboard", "--port", "0",
                 "--redis", redis_url, *args],
                stdout=subprocess.PIPE, stderr=log, text=True, env=full,
            )
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("redcron dashboard listening on http://127.0.0.1:"), line
            yield line.split()[4].rstrip("/"), proc
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait(10)
            log.flush()
            print(f"----- dashboard stderr -----\n{log_path.read_text(errors='replace')}")
