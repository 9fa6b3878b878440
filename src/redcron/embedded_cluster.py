"""A real local Redis Cluster of N masters, for the benchmarks, ``redcron chaos
--cluster`` and the tests.

N ``redis-server --cluster-enabled yes`` children on free loopback ports, the
16,384 slots split evenly with ``CLUSTER ADDSLOTS`` and joined with ``CLUSTER
MEET``; ready once every node reports ``cluster_state:ok`` and knows every
node.  ``replicas=R`` adds R replicas to each master (``CLUSTER REPLICATE``),
ready once each one's link to its master is up and the initial sync is done
(``master_link_status:up``): that is what ``durability="strict"`` waits on, and
what a failover promotes (:meth:`EmbeddedCluster.promote_replica`).  Each
node's cluster bus listens on its port + 10000, so a port is taken only when
both are free.

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
from redcron.slots import MOVE_SLOT_LUA

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


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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
        replicas: Replicas per master (0: none, as before).

    Raises:
        ConfigError: ``masters`` < 1, ``replicas`` < 0, or ``fsync`` is not a
            known policy.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        masters: int = 3,
        binary: str | None = None,
        appendonly: bool = False,
        fsync: str = "everysec",
        die_with_parent: bool = False,
        replicas: int = 0,
    ) -> None:
        if masters < 1:
            raise ConfigError(f"a cluster needs at least 1 master, got {masters}")
        if replicas < 0:
            raise ConfigError(f"replicas is a count per master (0 or more), got {replicas}")
        if fsync not in ("everysec", "always"):
            raise ConfigError(f"fsync must be 'everysec' or 'always', got {fsync!r}")
        self.root = Path(data_dir).resolve()
        self.masters = masters
        self.binary = binary or find_redis_server()
        self.appendonly = appendonly
        self.fsync = fsync
        self.die_with_parent = die_with_parent
        self.replicas = replicas
        #: the ports of the nodes started as masters, in slot order (master 0
        #: holds the lowest slots); a failover does not renumber them
        self.ports: list[int] = []
        #: the replicas' ports: master i's are ``replica_ports[i*replicas:(i+1)*replicas]``
        self.replica_ports: list[int] = []
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """The ``redis+cluster://`` URL naming every node as a seed (the masters
        first), so a client still finds the cluster with a master down."""
        nodes = [*self.ports, *self.replica_ports]
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in nodes)

    @property
    def nodes(self) -> int:
        """How many nodes the cluster has (masters and replicas)."""
        return self.masters * (1 + self.replicas)

    def replicas_of(self, master: int) -> list[int]:
        """The ports of the replicas started for master ``master``."""
        return self.replica_ports[master * self.replicas : (master + 1) * self.replicas]

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
        every = free_cluster_ports(self.nodes)
        self.ports, self.replica_ports = every[: self.masters], every[self.masters :]
        for port in every:
            self._spawn(port)
        clients = [redis.Redis(port=p, socket_timeout=5) for p in every]
        try:
            deadline = time.monotonic() + timeout
            for c in clients:
                self._until(deadline, c.ping)
            per = SLOTS // self.masters
            for i, c in enumerate(clients[: self.masters]):
                last = SLOTS if i == self.masters - 1 else (i + 1) * per
                c.execute_command("CLUSTER ADDSLOTS", *range(i * per, last))  # type: ignore[no-untyped-call]
            for c in clients[1:]:
                c.execute_command("CLUSTER MEET", "127.0.0.1", self.ports[0])  # type: ignore[no-untyped-call]
            if self.replicas:
                self._replicate(clients, deadline)
            for c in clients:
                self._until(deadline, partial(self._ready, c))
        except BaseException:
            self.stop()
            raise
        finally:
            for c in clients:
                c.close()

    def _replicate(self, clients: list[redis.Redis], deadline: float) -> None:
        """Make each replica node follow its master and wait for the initial syncs."""
        ids = [_text(c.execute_command("CLUSTER MYID")) for c in clients[: self.masters]]  # type: ignore[no-untyped-call]
        replicas = clients[self.masters :]
        for j, c in enumerate(replicas):
            # the replica must have heard of its master (gossip after MEET) first
            self._until(deadline, partial(self._follow, c, ids[j // self.replicas]))
        for c in replicas:
            self._until(deadline, partial(self._in_sync, c))

    @staticmethod
    def _follow(client: redis.Redis, master_id: str) -> bool:
        try:
            client.execute_command("CLUSTER REPLICATE", master_id)  # type: ignore[no-untyped-call]
        except redis.ResponseError as exc:
            if "Unknown node" in str(exc):
                return False
            raise
        return True

    @staticmethod
    def _in_sync(client: redis.Redis) -> bool:
        info = client.info("replication")
        return bool(info.get("role") == "slave" and info.get("master_link_status") == "up")

    def promote_replica(self, master: int, timeout: float = 30.0) -> int:
        """Fail master ``master`` over to its first replica now (``CLUSTER FAILOVER
        TAKEOVER``: no vote of the other masters, so it works with the master
        down and does not wait for ``cluster-node-timeout``); returns the
        promoted node's port once every live node serves all slots again.

        Raises:
            ConfigError: The cluster has no replicas, or did not settle in time.
        """
        if not self.replicas:
            raise ConfigError("promote_replica needs a cluster started with replicas=1 or more")
        port = self.replicas_of(master)[0]
        deadline = time.monotonic() + timeout
        with redis.Redis(port=port, socket_timeout=5) as c:
            promoted = _text(c.execute_command("CLUSTER MYID"))
            c.execute_command("CLUSTER FAILOVER", "TAKEOVER")
            self._until(deadline, lambda: c.info("replication").get("role") == "master")
        for p in self._live():
            with redis.Redis(port=p, socket_timeout=5) as live:
                self._until(deadline, partial(self._serving, live, promoted))
        return port

    def _live(self) -> list[int]:
        return [p for p, proc in self._procs.items() if proc.poll() is None]

    @staticmethod
    def _serving(client: redis.Redis, promoted: str) -> bool:
        """``client``'s node sees the cluster whole, with ``promoted`` a master of slots."""
        info = client.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]
        if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != str(SLOTS):
            return False
        # redis-py parses CLUSTER NODES: {"host:port": {"node_id", "flags", "slots"...}}
        nodes = client.execute_command("CLUSTER NODES")  # type: ignore[no-untyped-call]
        return any(
            n.get("node_id") == promoted and "master" in n.get("flags", "") and n.get("slots")
            for n in nodes.values()
        )

    def node_id(self, port: int) -> str:
        """The cluster node id of the node on ``port``."""
        with redis.Redis(port=port, socket_timeout=5) as c:
            return _text(c.execute_command("CLUSTER MYID"))

    def owner(self, slot: int) -> int:
        """The port of the master that serves ``slot`` (as master 0's node sees it)."""
        with redis.Redis(port=self._live()[0], socket_timeout=5) as c:
            for start, end, master, *_ in c.execute_command("CLUSTER SLOTS"):
                if int(start) <= slot <= int(end):
                    return int(master[1])
        raise ConfigError(f"slot {slot} is served by no node")

    def move_slot(
        self,
        slot: int,
        to_port: int,
        batch: int = 100,
        hold: Callable[[], None] | None = None,
    ) -> int:
        """Move ``slot`` and its keys to the master on ``to_port``, as a resharding
        does (``CLUSTER SETSLOT IMPORTING``/``MIGRATING``, ``MIGRATE ... KEYS`` in
        batches of ``batch``, then ``SETSLOT NODE`` on every master); returns how
        many keys moved.

        Unlike ``redis-cli --cluster reshard``, the ``MIGRATING`` state and every
        batch are one script call on the source (:data:`MOVE_SLOT_LUA`), so no
        command runs there while the slot's keys are split between the two
        nodes.  redcron's scripts need that: they declare one key of their shard
        and build the others in Lua, so mid-move a script could run on either
        node with part of the shard missing (docs/operations.md, "Resharding").
        Between that call and ``SETSLOT NODE`` (``hold``, if given, runs
        there), the source answers ``ASK`` and the target serves the slot to
        ``ASKING`` clients; a multi-key call meets ``TRYAGAIN`` until the end.
        """
        source = self.owner(slot)
        masters = [p for p in self._live() if self._is_master(p)]
        target_id, source_id = self.node_id(to_port), self.node_id(source)
        if source == to_port:
            return 0
        with redis.Redis(port=to_port, socket_timeout=30) as target:
            target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
            with redis.Redis(port=source, socket_timeout=30) as src:
                moved = int(
                    src.eval(MOVE_SLOT_LUA, 0, slot, "127.0.0.1", to_port, target_id, batch, 10_000)
                )
                if hold is not None:
                    hold()
                # the target first, then the source, then the others (the docs' order)
                target.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
                src.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
        for port in masters:
            if port not in (source, to_port):
                with redis.Redis(port=port, socket_timeout=5) as c:
                    c.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
        return moved

    @staticmethod
    def _is_master(port: int) -> bool:
        with redis.Redis(port=port, socket_timeout=5) as c:
            return bool(c.info("replication").get("role") == "master")

    def kill_master(self, master: int) -> None:
        """SIGKILL master ``master`` (an index into :attr:`ports`), as a crash would."""
        proc = self._procs.pop(self.ports[master], None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def start_master(self, master: int, timeout: float = 30.0) -> None:
        """Start master ``master`` again on its port and directory (its node id,
        slots and, with ``appendonly``, data come back) and wait until every
        node sees the cluster whole again.  If its replica was promoted while
        it was down (:meth:`promote_replica`), it comes back as that one's
        replica: then also until it is in sync."""
        port = self.ports[master]
        if port in self._procs and self._procs[port].poll() is None:
            return
        self._spawn(port)
        deadline = time.monotonic() + timeout
        for p in self.ports:
            with redis.Redis(port=p, socket_timeout=5) as c:
                self._until(deadline, partial(self._ready, c))
        with redis.Redis(port=port, socket_timeout=5) as c:
            if c.info("replication").get("role") == "slave":  # failed over meanwhile
                self._until(deadline, partial(self._in_sync, c))

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
            "--repl-diskless-sync-delay", "0",
            "--protected-mode", "no",
        ]  # fmt: skip

    def _ready(self, client: redis.Redis) -> bool:
        info = client.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]  # a dict
        return bool(
            info.get("cluster_state") == "ok"
            and info.get("cluster_known_nodes") == str(self.nodes)
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
