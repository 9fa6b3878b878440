"""Child processes of a test: stopping one, and a Python child whose output goes
to a log file.  Imported by name (``tests/helpers`` is on ``sys.path``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def stop(proc: subprocess.Popen[Any] | None, timeout: float = 10.0) -> None:
    """SIGTERM ``proc`` and wait up to ``timeout`` seconds for it; SIGKILL it (and
    reap it) if it is still running then.  Nothing to do for an ended process or None."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class LoggedProc:
    """``python -c code *args`` run from the repo root, stdout and stderr in ``log_path``."""

    def __init__(self, code: str, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._out = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            env=env,
            cwd=ROOT,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def sigkill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def close(self) -> None:
        """Stop the process (:func:`stop`) and close its log."""
        stop(self.proc)
        self._out.close()


@contextmanager
def closed_on_exit(procs: Sequence[LoggedProc], tail: int = 0) -> Iterator[None]:
    """On exit, also when the test failed: close every process in ``procs`` (the list
    the caller keeps adding to), then print each one's log, its last ``tail``
    characters if given (pytest shows them only when the test failed)."""
    try:
        yield
    finally:  # no process outlives the test
        for p in procs:
            p.close()
        for p in procs:
            head = f"----- {p.log_path.stem} (pid {p.proc.pid}, exit {p.proc.returncode}) -----"
            print(f"{head}\n{p.log()[-tail:]}")
