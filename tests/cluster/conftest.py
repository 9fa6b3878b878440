"""A real 3-master Redis Cluster for the session (``redcron.embedded_cluster``),
and a deployment of 12 shards on it per test, under the test's own key prefix.

Every test here is marked ``cluster``; ``-m 'not cluster'`` leaves them out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import chaos_app  # tests/apps, put on sys.path by tests/conftest.py
import pytest
import redis
import redis.cluster
from redis_binary import redis_server_path  # tests/helpers

from redcron import App
from redcron.embedded_cluster import EmbeddedCluster

#: shards of the deployments here: four per master, as docs/operations.md advises
SHARDS = 12


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    cluster = EmbeddedCluster(tmp_path_factory.mktemp("cluster"), binary=redis_server_path())
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster_url(redis_cluster: EmbeddedCluster) -> str:
    return redis_cluster.url


@pytest.fixture
def rc(redis_cluster: EmbeddedCluster) -> Iterator[redis.cluster.RedisCluster]:
    """A plain redis-py cluster client (bytes), for looking from outside."""
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=redis_cluster.ports[0])
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def cprefix(rc: redis.cluster.RedisCluster) -> Iterator[str]:
    """A unique key prefix (no colon); its keys on every master are deleted after."""
    prefix = f"c{uuid.uuid4().hex[:8]}"
    yield prefix
    pipe = rc.pipeline(transaction=False)
    for key in rc.scan_iter(match=f"{prefix}:*", count=1000):
        pipe.unlink(key)
    pipe.execute()


@pytest.fixture
def capp(cluster_url: str, cprefix: str) -> Iterator[App]:
    """The chaos app on the cluster with :data:`SHARDS` shards."""
    a = App(cluster_url, prefix=cprefix, shards=SHARDS, min_lease_ttl=0.5)
    chaos_app.register(a)
    yield a
    a.close()
