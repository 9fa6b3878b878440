"""Child processes ``redcron up`` starts and watches: each child's spec and
start (:class:`ChildSpec`), the SIGINT/SIGTERM/SIGHUP counter (:class:`Stopper`),
waiting for a child to listen, watching for a death, and stopping them all
(SIGTERM, then SIGKILL past a deadline or on a second Ctrl-C).

Nothing here knows which children ``up`` runs: that is ``up.child_specs``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import click

from redcron.cli.common import fail
from redcron.embedded import EmbeddedRedis
from redcron.lifeline import terminate_with_parent

log = logging.getLogger(__name__)

#: seconds children get after a forwarded second signal before SIGKILL
FORWARDED_KILL_S = 10.0


@dataclass
class ChildSpec:
    """One supervised child process."""

    name: str
    argv: list[str]
    where: str
    #: set in the child's environment on top of ours (secrets go here, never in argv)
    env: dict[str, str] = field(default_factory=dict, repr=False)
    #: the port it listens on (``up`` waits for it before saying it is up)
    port: int | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        env = {**os.environ, **self.env} if self.env else None
        # its only stdout line says where it listens, which the summary says too
        stdout = subprocess.DEVNULL if self.port is not None else None
        # a session of its own: the terminal's Ctrl-C reaches only up, which stops
        # the children in order; and if up itself is killed, they get SIGTERM
        self.proc = subprocess.Popen(
            self.argv, env=env, stdout=stdout, start_new_session=True,
            preexec_fn=terminate_with_parent,
        )  # fmt: skip


#: what stops ``up`` gracefully: Ctrl-C, SIGTERM, and the terminal closing (SIGHUP,
#: whose default action killed ``up`` at once, and with it, through
#: PR_SET_PDEATHSIG, Redis at the same moment as the beat and the worker)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopper:
    """Counts SIGINT/SIGTERM/SIGHUP: the first asks for a graceful stop, a second
    SIGINT or SIGTERM forces it."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.count = 0
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        # a hang-up may come twice (the shell passes the terminal's on to its jobs,
        # the kernel signals the foreground group as the session ends): it never
        # forces the stop, only someone pressing Ctrl-C again does
        if signum != signal.SIGHUP or not self.event.is_set():
            self.count += 1
        self.event.set()

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


def supervise(children: list[ChildSpec], server: EmbeddedRedis | None, stopper: Stopper) -> int:
    """Wait for a stop signal (0) or an unexpected death (1)."""
    while not stopper.event.wait(0.2):
        for child in children:
            assert child.proc is not None
            rc = child.proc.poll()
            if rc is not None:
                say(
                    f"{child.name} (pid {child.proc.pid}) exited unexpectedly "
                    f"with code {rc}; shutting down",
                    err=True,
                )
                return 1
        if server is not None and not server.running():
            say(
                f"redis-server exited unexpectedly (log: {server.log_path}); shutting down",
                err=True,
            )
            return 1
    say("stopping (Ctrl-C again to kill)...")
    return 0


def say(message: str, err: bool = False) -> None:
    """``click.echo`` for what ``up`` prints as it stops. Once its terminal has
    closed (SIGHUP) every write to it fails (EIO): that must not cut the stop
    short, so the failing stream, and the other one if it is the same terminal,
    is pointed at /dev/null, where the next lines and the flush at exit go."""
    try:
        click.echo(message, err=err)
    except OSError:
        try:
            gone = os.fstat((sys.stderr if err else sys.stdout).fileno())
            devnull = os.open(os.devnull, os.O_WRONLY)
        except (OSError, ValueError):  # not a file (a test's captured stream)
            return
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                if os.path.samestat(os.fstat(fd), gone):
                    os.dup2(devnull, fd)
        os.close(devnull)


def terminate(
    children: list[ChildSpec], timeout: float, stopper: Stopper, forward_second: bool = False
) -> None:
    """SIGTERM every child (last started first), SIGKILL what outlives ``timeout``.

    A second SIGINT/SIGTERM kills them at once; with ``forward_second`` it is
    passed on as a second SIGTERM instead (a worker then hands its leases back
    without waiting for its grace), and what still runs :data:`FORWARDED_KILL_S`
    later is killed."""
    alive = [c for c in reversed(children) if c.proc is not None and c.proc.poll() is None]
    for child in alive:
        assert child.proc is not None
        child.proc.send_signal(signal.SIGTERM)
    stopper.count = min(stopper.count, 1)
    deadline = time.monotonic() + timeout
    forwarded = False
    while any(c.proc is not None and c.proc.poll() is None for c in alive):
        if stopper.count > 1 and forward_second and not forwarded:
            forwarded = True
            for child in alive:
                if child.proc is not None and child.proc.poll() is None:
                    child.proc.send_signal(signal.SIGTERM)
            deadline = min(deadline, time.monotonic() + FORWARDED_KILL_S)
        elif time.monotonic() > deadline or (stopper.count > 1 and not forward_second):
            for child in alive:
                if child.proc is not None and child.proc.poll() is None:
                    log.warning("%s pid=%d did not stop; killing", child.name, child.proc.pid)
                    child.proc.kill()
                    child.proc.wait()
            break
        time.sleep(0.1)


def wait_listening(child: ChildSpec, stopper: Stopper, host: str, timeout: float) -> None:
    """Return once ``child`` accepts connections on its port (if it has one) on
    ``host``; fail if it dies first or is not listening after ``timeout`` seconds."""
    if child.port is None:
        return
    assert child.proc is not None
    deadline = time.monotonic() + timeout
    while not port_in_use(child.port, host):
        rc = child.proc.poll()
        if rc is not None:
            fail(f"{child.name} (pid {child.proc.pid}) exited with code {rc} before listening")
        if stopper.event.is_set():
            return  # Ctrl-C while starting: stop quietly
        if time.monotonic() > deadline:
            fail(
                f"{child.name} (pid {child.proc.pid}) is not listening on port {child.port} "
                f"after {timeout:.0f}s"
            )
        time.sleep(0.05)


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
