"""A real local Redis Cluster of N masters, for the benchmarks, ``redcron chaos
--cluster`` and the tests.

N ``redis-server --cluster-enabled yes`` children on free loopback ports (no
replicas), the 16,384 slots split evenly with ``CLUSTER ADDSLOTS`` and joined
with ``CLUSTER MEET``; ready once every node reports ``cluster_state:ok`` and
knows N masters.  Each node's cluster bus listens on its port + 10000, so a
port is taken only when both are free.

``cluster-require-full-coverage no`` is set so that a master that is down
stops only its own slots (its shards pause, the others go on), which is what
``docs/operations.md`` advises for redcron.  A master can be killed and started
again on the same port and directory (:meth:`EmbeddedCluster.kill_master`,
:meth:`EmbeddedCluster.start_master`): it keeps its node id and slots from its
``nodes.conf``, and, with ``appendonly``, its data from its AOF.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import TracebackType

import redis

from redcron.embedded import find_redis_server
from redcron.errors import ConfigError
from redcron.lifeline import terminate_with_parent

#: the slots of a Redis Cluster
SLOTS = 16384
_BUS_OFFSET = 10000


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports whose cluster bus ports (+10000) are free too."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + _BUS_OFFSET <= 65535 and port not in ports and _free(port + _BUS_OFFSET):
            ports.append(port)
    return ports


class EmbeddedCluster:
    """``masters`` cluster-enabled ``redis-server`` children under ``data_dir``.

    Args:
        data_dir: One sub-directory per master (``<port>/``: its
            ``nodes.conf``, AOF and log); created if missing.
        masters: How many masters (each gets an equal run of slots).
        binary: ``redis-server`` (or ``valkey-server``); found with
            :func:`~redcron.embedded.find_redis_server` when omitted.
        appendonly: Turn the AOF on, so a killed master comes back with its data.
        fsync: ``appendfsync`` with ``appendonly``: ``"everysec"`` or ``"always"``.
        die_with_parent: SIGTERM every master if the process that started it dies.

    Raises:
        ConfigError: ``masters`` < 1, or ``fsync`` is not a known policy.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        masters: int = 3,
        binary: str | None = None,
        appendonly: bool = False,
        fsync: str = "everysec",
        die_with_parent: bool = False,
    ) -> None:
        if masters < 1:
            raise ConfigError(f"a cluster needs at least 1 master, got {masters}")
        if fsync not in ("everysec", "always"):
            raise ConfigError(f"fsync must be 'everysec' or 'always', got {fsync!r}")
        self.root = Path(data_dir).resolve()
        self.masters = masters
        self.binary = binary or find_redis_server()
        self.appendonly = appendonly
        self.fsync = fsync
        self.die_with_parent = die_with_parent
        #: the masters' ports, in slot order (master 0 holds the lowest slots)
        self.ports: list[int] = []
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """The ``redis+cluster://`` URL naming every master as a seed."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def pid(self, master: int) -> int | None:
        """The pid of master ``master`` (an index into :attr:`ports`), None when down."""
        proc = self._procs.get(self.ports[master])
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self, timeout: float = 30.0) -> None:
        """Start every master, assign the slots and wait for ``cluster_state:ok``.

        Raises:
            ConfigError: The cluster did not come up within ``timeout`` (every
                master is stopped again).
        """
        self.ports = free_cluster_ports(self.masters)
        for port in self.ports:
            self._spawn(port)
        clients = [redis.Redis(port=p, socket_timeout=5) for p in self.ports]
        try:
            deadline = time.monotonic() + timeout
            for c in clients:
                self._until(deadline, c.ping)
            per = SLOTS // self.masters
            for i, c in enumerate(clients):
                last = SLOTS if i == self.masters - 1 else (i + 1) * per
                c.execute_command("CLUSTER ADDSLOTS", *range(i * per, last))  # type: ignore[no-untyped-call]
            for c in clients[1:]:
                c.execute_command("CLUSTER MEET", "127.0.0.1", self.ports[0])  # type: ignore[no-untyped-call]
            for c in clients:
                self._until(deadline, partial(self._ready, c))
        except BaseException:
            self.stop()
            raise
        finally:
            for c in clients:
                c.close()

    def kill_master(self, master: int) -> None:
        """SIGKILL master ``master`` (an index into :attr:`ports`), as a crash would."""
        proc = self._procs.pop(self.ports[master], None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def start_master(self, master: int, timeout: float = 30.0) -> None:
        """Start master ``master`` again on its port and directory (its node id,
        slots and, with ``appendonly``, data come back) and wait until every
        node sees the cluster whole again."""
        port = self.ports[master]
        if port in self._procs and self._procs[port].poll() is None:
            return
        self._spawn(port)
        deadline = time.monotonic() + timeout
        for p in self.ports:
            with redis.Redis(port=p, socket_timeout=5) as c:
                self._until(deadline, partial(self._ready, c))

    def stop(self) -> None:
        """SIGTERM every master, SIGKILL any still up after 10 s. Idempotent."""
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self._procs.clear()

    def _spawn(self, port: int) -> None:
        home = self.root / str(port)
        home.mkdir(parents=True, exist_ok=True)
        with (home / "redis.log").open("ab") as log:
            self._procs[port] = subprocess.Popen(
                self._argv(port, home), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=terminate_with_parent if self.die_with_parent else None,
            )  # fmt: skip

    def _argv(self, port: int, home: Path) -> list[str]:
        return [
            self.binary,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(home / "nodes.conf"),
            "--cluster-node-timeout", "2000",
            "--cluster-require-full-coverage", "no",
            "--dir", str(home),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.fsync,
            "--maxmemory-policy", "noeviction",
            "--protected-mode", "no",
        ]  # fmt: skip

    def _ready(self, client: redis.Redis) -> bool:
        info = client.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]  # a dict
        return bool(
            info.get("cluster_state") == "ok"
            and info.get("cluster_known_nodes") == str(self.masters)
            and info.get("cluster_slots_ok") == str(SLOTS)
        )

    @staticmethod
    def _until(deadline: float, ok: Callable[[], object]) -> None:
        while True:
            try:
                if ok():
                    return
            except (redis.ConnectionError, redis.TimeoutError):
                pass
            except redis.ResponseError as exc:  # LOADING while an AOF is read back
                if "LOADING" not in str(exc):
                    raise
            if time.monotonic() > deadline:
                raise ConfigError("the local Redis Cluster did not come up in time")
            time.sleep(0.05)

    def __enter__(self) -> EmbeddedCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
