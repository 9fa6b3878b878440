"""A peer's worker process: started with the benchmark's Redis URL and
namespace in its environment (RCBENCH_URL, RCBENCH_NS), terminated with the
context (killed if it does not stop), and sent SIGTERM by the kernel if the
benchmark dies first (lifeline: the benchmark starts them from its main
thread, which lives for the run).  The checkout's root is put on their
PYTHONPATH: the Python peers' workers import ``bench.peers`` (the package is
not installed), whatever directory the benchmark was started from."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench.peers import EXTRA_HINT
from redcron.lifeline import terminate_with_parent

#: the directory holding the ``bench`` package (the checkout's root)
ROOT = str(Path(__file__).resolve().parents[2])


@contextmanager
def process(
    argv: Sequence[str], url: str, ns: str, grace: float = 10.0
) -> Iterator[subprocess.Popen[bytes]]:
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "RCBENCH_URL": url, "RCBENCH_NS": ns, "PYTHONPATH": path}
    quiet = subprocess.DEVNULL if not os.environ.get("RCBENCH_VERBOSE") else None
    proc = subprocess.Popen(
        list(argv), env=env, stdout=quiet, stderr=quiet, preexec_fn=terminate_with_parent
    )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def python(code: str) -> list[str]:
    """argv of this interpreter running ``code``."""
    return [sys.executable, "-c", code]


def version(dist: str) -> str:
    from importlib.metadata import version as _version

    return _version(dist)


def missing_python(module: str, dist: str, how: str = EXTRA_HINT) -> str | None:
    """None if ``module`` can be imported, else the note that says how to install it."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        return f"{dist} is not installed ({how})"
    return None
