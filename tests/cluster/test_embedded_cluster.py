"""The local cluster the benchmarks and ``redcron chaos --cluster`` start: a
killed master stops only its own slots, and comes back with its data."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from redis_binary import redis_server_path  # tests/helpers

from redcron.embedded_cluster import SLOTS, EmbeddedCluster
from redcron.errors import ConfigError


def _key_on(client: redis.Redis, master: int, masters: int) -> str:
    """A key whose slot master ``master`` holds (the slots are split evenly, in order)."""
    per = SLOTS // masters
    for i in range(10_000):
        slot = int(client.execute_command("CLUSTER KEYSLOT", f"k{i}"))
        if min(slot // per, masters - 1) == master:
            return f"k{i}"
    raise AssertionError("no key found")


def test_a_killed_master_stops_only_its_slots_and_returns_with_its_data(tmp_path: Path) -> None:
    binary = redis_server_path()
    with EmbeddedCluster(tmp_path, masters=3, binary=binary, appendonly=True, fsync="always") as c:
        first = redis.Redis(port=c.ports[0])
        second = redis.Redis(port=c.ports[1])
        key0, key1 = _key_on(first, 0, 3), _key_on(first, 1, 3)
        first.set(key0, "kept")
        c.kill_master(0)
        assert c.pid(0) is None
        second.set(key1, "still served")  # the other masters go on
        assert second.get(key1) == b"still served"
        c.start_master(0)
        assert c.pid(0) is not None
        assert first.get(key0) == b"kept"
        first.close()
        second.close()


def test_a_cluster_needs_a_master(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least 1 master"):
        EmbeddedCluster(tmp_path, masters=0, binary=redis_server_path())


def test_replicas_are_a_count_per_master_and_promotion_needs_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="replicas is a count per master"):
        EmbeddedCluster(tmp_path, replicas=-1, binary=redis_server_path())
    plain = EmbeddedCluster(tmp_path, masters=3, binary=redis_server_path())
    assert plain.nodes == 3 and plain.url == "redis+cluster://"  # not started: no ports yet
    with pytest.raises(ConfigError, match="needs a cluster started with replicas"):
        plain.promote_replica(0)
