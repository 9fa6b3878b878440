"""A real 3-master Redis Cluster on free loopback ports, for the ``cluster`` tests.

Three ``redis-server --cluster-enabled yes`` processes (no replicas), the
16,384 slots split in three with ``CLUSTER ADDSLOTS`` and joined with
``CLUSTER MEET``; ready once every node reports ``cluster_state:ok`` and
sees three masters.  Each node's cluster bus listens on its port + 10000,
so a port is taken only when both are free.
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

SLOTS = 16384


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_ports(n: int) -> list[int]:
    """``n`` ports whose cluster bus ports (+10000) are free too."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + 10000 <= 65535 and port not in ports and _free(port + 10000):
            ports.append(port)
    return ports


@dataclass
class RedisCluster:
    """Masters started in ``root``; :meth:`start`, then :attr:`url`; :meth:`stop`."""

    root: Path
    binary: str
    masters: int = 3
    ports: list[int] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self, timeout: float = 30.0) -> None:
        self.ports = free_cluster_ports(self.masters)
        for port in self.ports:
            with (self.root / f"redis-{port}.log").open("wb") as log:
                self.procs.append(
                    subprocess.Popen(
                        self._argv(port),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        clients = [redis.Redis(port=p, socket_timeout=5) for p in self.ports]
        try:
            deadline = time.monotonic() + timeout
            for c in clients:
                self._until(deadline, c.ping)
            per = SLOTS // self.masters
            for i, c in enumerate(clients):
                last = SLOTS if i == self.masters - 1 else (i + 1) * per
                c.execute_command("CLUSTER ADDSLOTS", *range(i * per, last))
            for c in clients[1:]:
                c.execute_command("CLUSTER MEET", "127.0.0.1", self.ports[0])
            for c in clients:
                self._until(deadline, lambda c=c: self._ready(c))
        except BaseException:
            self.stop()
            raise
        finally:
            for c in clients:
                c.close()

    def _argv(self, port: int) -> list[str]:
        return [
            self.binary,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(self.root / f"nodes-{port}.conf"),
            "--cluster-node-timeout", "2000",
            "--dir", str(self.root),
            "--dbfilename", f"dump-{port}.rdb",
            "--save", "",
            "--appendonly", "no",
            "--maxmemory-policy", "noeviction",
        ]  # fmt: skip

    def _ready(self, client: redis.Redis) -> bool:
        info = client.execute_command("CLUSTER INFO")  # parsed into a dict by redis-py
        return info.get("cluster_state") == "ok" and info.get("cluster_known_nodes") == str(
            self.masters
        )

    @staticmethod
    def _until(deadline: float, ok: object) -> None:
        assert callable(ok)
        while True:
            try:
                if ok():
                    return
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the test Redis Cluster did not come up")
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.procs.clear()
