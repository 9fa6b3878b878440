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
PR_SET_DUMPABLE = 4


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


def forbid_inspection() -> bool:
    """Make this process non-dumpable (Linux): other processes of the same user,
    such as the command tasks it starts, can then neither read its
    ``/proc/<pid>/environ`` (its Redis URL, its tokens) nor attach to it; only
    root can.  The cost: no core dumps, and py-spy or gdb need root.  True if
    it was applied."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
