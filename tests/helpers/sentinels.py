"""A Redis master, its replica and three sentinels on free loopback ports, for
failover tests.  Imported by name (``tests/helpers`` is on ``sys.path``).

Every server runs in the foreground of a child process of the test, in its own
directory under the test's tmp dir; :meth:`Topology.stop` stops them all.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
from polling import wait_for
from procs import stop
from redis_binary import redis_server_path

from redcron.embedded import free_port

MASTER = "mymaster"


class Node:
    """One redis-server (data node or sentinel) child process."""

    def __init__(self, name: str, root: Path, port: int, args: list[str]) -> None:
        self.name = name
        self.port = port
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.dir / "redis.log"

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.args, cwd=self.dir, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip

    def client(self) -> redis.Redis:
        return redis.Redis(
            "127.0.0.1",
            self.port,
            socket_timeout=5,
            socket_connect_timeout=1,
            decode_responses=True,
        )

    def ping(self) -> bool:
        c = self.client()
        try:
            return bool(c.ping())
        except redis.RedisError:
            return False
        finally:
            c.close()

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"


def _data_node(binary: str, name: str, root: Path, port: int, replica_of: int | None) -> Node:
    d = root / name
    args = [
        binary,
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(d),
        "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
        "--maxmemory-policy", "noeviction", "--daemonize", "no",
        "--logfile", str(d / "redis.log"), "--protected-mode", "no",
        "--repl-ping-replica-period", "1",
    ]  # fmt: skip
    if replica_of is not None:
        args += ["--replicaof", "127.0.0.1", str(replica_of)]
    return Node(name, root, port, args)


def _sentinel(binary: str, name: str, root: Path, port: int, master_port: int) -> Node:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    conf = d / "sentinel.conf"  # sentinels rewrite their config: one file each
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {d}\nlogfile {d / 'redis.log'}\n"
        "protected-mode no\ndaemonize no\n"
        f"sentinel monitor {MASTER} 127.0.0.1 {master_port} 2\n"
        f"sentinel down-after-milliseconds {MASTER} 1000\n"
        f"sentinel failover-timeout {MASTER} 10000\n"
        f"sentinel parallel-syncs {MASTER} 1\n"
    )
    return Node(name, root, port, [binary, str(conf), "--sentinel"])


class Topology:
    """A master, a replica, three sentinels."""

    def __init__(self, root: Path) -> None:
        binary = redis_server_path()
        master_port, replica_port = free_port(), free_port()
        self.data = [
            _data_node(binary, "node0", root, master_port, None),
            _data_node(binary, "node1", root, replica_port, master_port),
        ]
        self.sentinels = [
            _sentinel(binary, f"sentinel{i}", root, free_port(), master_port) for i in range(3)
        ]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    def start(self) -> None:
        for node in self.data:
            node.start()
        for node in self.data:
            wait_for(node.ping, f"{node.name} answers", 10)
        wait_for(self.replica_synced, "the replica synced", 15)
        for node in self.sentinels:
            node.start()
        wait_for(self.sentinels_ready, "the sentinels know each other and the replica", 20)

    def master_port(self) -> int:
        c = self.sentinels[0].client()
        try:
            _host, port = c.sentinel_get_master_addr_by_name(MASTER)
            return int(port)
        finally:
            c.close()

    def node(self, port: int) -> Node:
        return next(n for n in self.data if n.port == port)

    def replica_synced(self) -> bool:
        master = next(n for n in self.data if n.port == self._role_master())
        c = master.client()
        try:
            info = c.info("replication")
            return bool(info.get("connected_slaves")) and info["slave0"]["state"] == "online"
        finally:
            c.close()

    def _role_master(self) -> int:
        for n in self.data:
            c = n.client()
            try:
                if c.info("replication")["role"] == "master":
                    return n.port
            finally:
                c.close()
        raise AssertionError("no master")

    def sentinels_ready(self) -> bool:
        for s in self.sentinels:
            c = s.client()
            try:
                state = c.sentinel_master(MASTER)
                if int(state["num-other-sentinels"]) < 2 or int(state["num-slaves"]) < 1:
                    return False
            except redis.RedisError:
                return False
            finally:
                c.close()
        return True

    def failover(self, timeout: float = 30) -> tuple[int, int]:
        """Force a failover (``SENTINEL FAILOVER``); wait until the sentinels name
        the new master, it answers as one, and the old one replicates from it.
        Returns (old master port, new master port)."""
        old = self.master_port()
        c = self.sentinels[0].client()
        try:
            c.execute_command("SENTINEL", "FAILOVER", MASTER)
        finally:
            c.close()
        new = wait_for(
            lambda: self.master_port() if self.master_port() != old else None,
            "the sentinels name a new master",
            timeout,
        )
        wait_for(lambda: self._role_master() == new, "the new master answers as master", timeout)
        wait_for(self.replica_synced, "the old master replicates from the new one", timeout)
        return old, new

    def stop(self) -> None:
        for node in [*self.sentinels, *self.data]:
            node.stop()

    def logs(self) -> str:
        return "\n".join(f"----- {n.name} -----\n{n.log()}" for n in [*self.data, *self.sentinels])


@contextmanager
def sentinel_topology(root: Path) -> Iterator[Topology]:
    """A started :class:`Topology`; stopped afterwards (its logs printed: pytest
    shows them when the test failed)."""
    topo = Topology(root)
    try:
        topo.start()
        yield topo
    finally:
        topo.stop()
        print(topo.logs())
