"""Moving one shard to another master of a Redis Cluster, guarded
(``redcron cluster move-shard``).

A shard is one hash slot (every key of shard ``N`` carries ``{s<N>}``).  The
move is the one docs/operations.md ("Resharding") prescribes: ``SETSLOT
IMPORTING`` on the target, then on the source one script call that sets
``MIGRATING`` and ``MIGRATE``s every key of the slot (so nothing runs there
while the shard is split between the nodes: redcron's scripts build their keys
inside Lua), then ``SETSLOT NODE`` on the target, the source and every other
master.  :func:`plan_move` checks first, and refuses with the reason:

- the URL is no cluster, the shard is not the deployment's, the target is no
  master of the cluster or not connected;
- a master does not answer, or some node sees another as failing (a move
  during a failover could leave the slot with no owner);
- the slot is already being migrated or imported somewhere (a move half done:
  finish or undo it with ``redis-cli --cluster fix`` first);
- the slot holds more than ``max_keys`` keys: the source is busy for the whole
  copy (every shard on that master waits), so a big shard is moved only when
  asked for knowingly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis

from redcron.engine.connection import is_cluster, key_slot
from redcron.engine.core import Core
from redcron.errors import ConfigError, Conflict, ValidationError
from redcron.serde import text as _s
from redcron.slots import MOVE_SLOT_LUA

#: a slot with more keys than this is refused unless the caller raises it
MAX_KEYS = 100_000
#: ``MIGRATE`` keys per call inside the move script, and its timeout (ms)
BATCH = 100
MIGRATE_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class ShardMove:
    """What :func:`move_shard` does (or did): ``shard``'s ``slot`` from the
    master ``source`` to ``target`` (``host:port``), with ``keys`` keys in it;
    ``together``: the deployment's other shards in the same slot (they move too)."""

    shard: int
    slot: int
    source: str
    target: str
    keys: int
    together: list[int] = field(default_factory=list)

    @property
    def needed(self) -> bool:
        return self.source != self.target


def _masters(client: Any) -> list[Any]:
    return list(client.get_primaries())


def _myself(client: Any, node: Any) -> dict[str, Any]:
    """``node``'s own line of ``CLUSTER NODES`` (the only one that shows the
    slots it migrates or imports), parsed by redis-py."""
    view = client.execute_command("CLUSTER NODES", target_nodes=node)
    for info in view.values():
        if "myself" in info["flags"]:
            return dict(info)
    raise Conflict(f"master {node.name} did not describe itself in CLUSTER NODES")


def plan_move(core: Core, shard: int, target: str, max_keys: int = MAX_KEYS) -> ShardMove:
    """Check that ``shard`` can move to the master ``target`` (``host:port``) now.

    Raises:
        ConfigError: the deployment is not on a Redis Cluster.
        ValidationError: no such shard, or ``target`` is no master (field named).
        Conflict: the cluster is not healthy, the slot is mid-move, or it holds
            more than ``max_keys`` keys.
    """
    client: Any = core.client
    if not is_cluster(client):
        raise ConfigError("move-shard needs a Redis Cluster: give a redis+cluster:// URL")
    if not 0 <= shard < core.shards:
        raise ValidationError(
            "shard", f"{shard} is not a shard of this deployment (0..{core.shards - 1})"
        )
    client.nodes_manager.initialize()  # the slot map as the cluster has it now
    slot = key_slot(core.keys.shard(shard))
    masters = {m.name: m for m in _masters(client)}
    if target not in masters:
        raise ValidationError(
            "to", f"{target} is not a master of the cluster (masters: {', '.join(sorted(masters))})"
        )
    source = client.nodes_manager.get_node_from_slot(slot, False).name
    for name, node in masters.items():
        try:
            me = _myself(client, node)
            view = client.execute_command("CLUSTER NODES", target_nodes=node)
        except Exception as exc:
            raise Conflict(f"master {name} does not answer ({exc}); move nothing now") from exc
        # FAIL: the masters agreed the node is down (a failover follows); a lone
        # PFAIL (``fail?``: one node's missed pings, e.g. on a starved machine)
        # is no failover, and refusing on it made the command flaky
        failing = [addr for addr, info in view.items() if "fail" in info["flags"].split(",")]
        if failing:
            raise Conflict(
                f"master {name} sees {', '.join(failing)} failing: a failover may be under "
                "way; move nothing until the cluster is whole"
            )
        for migration in me["migrations"]:
            if int(migration["slot"]) == slot:
                raise Conflict(
                    f"slot {slot} (shard {shard}) is already {migration['state']} on {name}: "
                    "a move half done; finish or undo it first (redis-cli --cluster fix)"
                )
    keys = int(
        client.execute_command("CLUSTER COUNTKEYSINSLOT", slot, target_nodes=masters[source])
    )
    if keys > max_keys:
        raise Conflict(
            f"shard {shard} holds {keys} keys (more than {max_keys}): {source} is busy for the "
            "whole copy, every shard on it waiting; raise --max-keys to move it knowingly"
        )
    together = [
        s for s in range(core.shards) if s != shard and key_slot(core.keys.shard(s)) == slot
    ]
    return ShardMove(shard, slot, source, target, keys, together)


def move_shard(core: Core, move: ShardMove) -> int:
    """Do ``move`` (from :func:`plan_move`); returns the keys moved.  The source
    runs one script for the copy; then every master is told the slot's owner."""
    if not move.needed:
        return 0
    client: Any = core.client
    masters = {m.name: m for m in _masters(client)}
    source, target = masters[move.source], masters[move.target]
    target_id = _myself(client, target)["node_id"]
    source_id = _myself(client, source)["node_id"]
    client.execute_command(
        "CLUSTER SETSLOT", move.slot, "IMPORTING", source_id, target_nodes=target
    )
    host, port = move.target.rsplit(":", 1)
    auth: list[str] = []
    password = client.nodes_manager.connection_kwargs.get("password")
    if password:
        username = client.nodes_manager.connection_kwargs.get("username")
        auth = ["AUTH2", username, password] if username else ["AUTH", password]
    # the copy is one script call as long as the slot's keys take (the source
    # serves nothing else meanwhile): read its reply with no socket timeout
    # (redis-py's default, 5 s, gave up on a copy under load while the script
    # went on, and left the move half done)
    # (the node's own connection options, as redis-py builds them: TLS and auth)
    options = dict(client.nodes_manager.connection_kwargs)
    if options.pop("ssl", False):
        options.setdefault("connection_class", redis.SSLConnection)
    options.pop("retry", None)  # one try: a copy that failed is not simply sent again
    options.update(host=source.host, port=source.port, socket_timeout=None)
    with redis.Redis(connection_pool=redis.ConnectionPool(**options)) as direct:
        moved = direct.execute_command(
            "EVAL", MOVE_SLOT_LUA, 0, move.slot, host, port, target_id, BATCH,
            MIGRATE_TIMEOUT_MS, *auth,
        )  # fmt: skip
    # the target first, then the source, then the others (docs/operations.md)
    client.execute_command("CLUSTER SETSLOT", move.slot, "NODE", target_id, target_nodes=target)
    client.execute_command("CLUSTER SETSLOT", move.slot, "NODE", target_id, target_nodes=source)
    for name, node in masters.items():
        if name not in (move.source, move.target):
            client.execute_command(
                "CLUSTER SETSLOT", move.slot, "NODE", target_id, target_nodes=node
            )
    client.nodes_manager.initialize()
    return int(_s(moved))
