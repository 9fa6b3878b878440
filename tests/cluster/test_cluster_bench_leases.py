"""``redcron bench leases --cluster`` at a tiny size on the session's cluster:
12 shards over 3 masters; Redis time is summed over every master; every lease
of the killed workers is reaped on whichever shard it lives."""

from __future__ import annotations

from conftest import SHARDS  # tests/cluster/conftest.py
from redcron.cli.bench.leases import LeaseBenchOptions, lease_bench

TINY = LeaseBenchOptions(
    leases=480, heartbeat_s=1.0, ttl_s=2.5, seconds=1.0, per_worker=20, kill_fraction=0.25,
    tenants=24,
)  # fmt: skip


def test_a_tiny_lease_bench_on_the_cluster_reaps_every_killed_lease(cluster_url: str) -> None:
    out = lease_bench(TINY, cluster_url, cluster=True)
    assert out["shards"] == SHARDS and out["masters"] == 3
    assert out["leases"] == 480
    assert out["lost_live_leases"] == 0 and out["expired_live_leases"] == 0
    assert out["killed_leases"] > 0 and out["reaped"] == out["killed_leases"]
    assert out["heartbeats_per_s"] > 0
    assert out["redis_cpu_pct"] > 0  # INFO cpu summed over the masters
