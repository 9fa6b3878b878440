"""One ``redcron up`` per data directory.

Two ``up`` on one directory run two redis-servers on one AOF, and each
overwrites the other's ``redis.url`` and ``admin.token`` (then removes them at
its stop).  So ``up`` first takes an exclusive ``flock`` on
``<data dir>/up.lock``, before any port check and before Redis starts, and a
second ``up`` there is refused at once.

The kernel releases a ``flock`` when the last descriptor of it closes, however
its processes end: a lock file a killed ``up`` left blocks nobody, and there
is no stale pid to clean up.  The embedded redis-server gets the descriptor
too (:attr:`DataDirLock.fd`), so the directory stays taken while a server on
its AOF still runs (a killed ``up``'s server outlives it for its shutdown).
The file holds the pids, ``up``'s then the server's, one a line: only for the
message a second ``up`` prints.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from redcron.config import pid_running

#: in the data directory; never removed (unlinking a lock file lets a second
#: process lock a new file while the first still holds the old one)
LOCK_FILE = "up.lock"


@dataclass(frozen=True)
class Holder:
    """Who holds a data directory, as its lock file says (None: not written yet)."""

    up_pid: int | None
    server_pid: int | None


class DataDirBusy(Exception):
    """Another process holds the data directory's lock."""

    def __init__(self, data_dir: Path, holder: Holder) -> None:
        super().__init__(f"{data_dir} is locked by {holder}")
        self.data_dir = data_dir
        self.holder = holder


class DataDirLock:
    """The exclusive lock of one data directory, held from :meth:`acquire` to
    :meth:`release` (or the end of the process)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.path = self.data_dir / LOCK_FILE
        self.fd: int | None = None

    def acquire(self) -> None:
        """Create the directory if need be, take the lock, write our pid.

        Raises:
            DataDirBusy: Another process holds it; nothing was taken.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirBusy(self.data_dir, read_holder(self.path)) from None
        self.fd = fd
        self._write(os.getpid())

    def record_server(self, pid: int) -> None:
        """Add the embedded redis-server's pid, for the message of a second ``up``."""
        self._write(os.getpid(), pid)

    def _write(self, *pids: int) -> None:
        assert self.fd is not None
        text = "".join(f"{pid}\n" for pid in pids).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, text, 0)

    def release(self) -> None:
        """Let the directory go (the file stays: see :data:`LOCK_FILE`). Idempotent."""
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
        os.close(self.fd)
        self.fd = None


def read_holder(path: Path) -> Holder:
    """The pids a lock file records; None where a line is missing (its holder
    has not written it yet) or unreadable."""
    try:
        lines = path.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        lines = []
    pids = [int(line) if line.isdigit() else None for line in lines[:2]]
    pids += [None] * (2 - len(pids))
    return Holder(pids[0], pids[1])


def busy_message(busy: DataDirBusy, second_instance: str) -> str:
    """One line: who holds the directory, and how to stop it or run a second
    deployment beside it (``second_instance``: the flags for that)."""
    holder = busy.holder
    if holder.up_pid is None:
        who = "another `redcron up`"
        stop = "stop it"
    elif pid_running(holder.up_pid) or holder.server_pid is None:
        who = f"another `redcron up` (pid {holder.up_pid})"
        stop = f"stop it (Ctrl-C in its terminal, or kill {holder.up_pid})"
    else:  # up is gone, its server is still shutting down (or outlived it)
        who = (
            f"the redis-server (pid {holder.server_pid}) of a `redcron up` "
            f"(pid {holder.up_pid}) that has exited"
        )
        stop = f"wait for it to stop, or kill {holder.server_pid}"
    return (
        f"data directory {busy.data_dir} is in use by {who}; one deployment per data "
        f"directory: {stop}, or run a second one with a data directory and ports of "
        f"its own: {second_instance}"
    )
