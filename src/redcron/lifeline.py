"""Children that must not outlive the process that started them.

On Linux, ``prctl(PR_SET_PDEATHSIG)`` asks the kernel to signal a process when
the *thread* that started it ends, so a parent killed with SIGKILL (no chance
to stop its children) leaves no orphans.  Start such children from a
long-lived thread.  Elsewhere these are no-ops.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1


def signal_on_parent_death(sig: int) -> None:
    """In the child: have ``sig`` sent to this process when its parent ends."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def terminate_with_parent() -> None:
    """A ``preexec_fn``: SIGTERM (a clean stop) when the parent ends."""
    signal_on_parent_death(signal.SIGTERM)
