"""``redcron bench leases`` at a tiny size: every figure is there, no live
lease is lost or reaped, and every lease of the killed workers is reaped.
How fast is the benchmark's to say (docs/benchmarks.md), never asserted."""

from __future__ import annotations

from redcron.cli.bench.leases import LeaseBenchOptions, lease_bench

#: a run of a few seconds: 1 s heartbeats, a 2.5 s TTL (above the 2 s minimum)
TINY = LeaseBenchOptions(
    leases=400, heartbeat_s=1.0, ttl_s=2.5, seconds=1.0, per_worker=20, kill_fraction=0.25,
    tenants=8,
)  # fmt: skip

FIELDS = {
    "leases", "workers", "shards", "heartbeats_per_s", "heartbeat_calls_per_s",
    "redis_cpu_pct", "heartbeat_cpu_pct", "reaper_cpu_pct", "heartbeat_script_pct",
    "reaper_script_pct", "heartbeat_us_per_lease", "killed_leases", "reaped",
    "reap_late_p50_ms", "reap_late_p99_ms", "reap_late_max_ms", "reap_bound_ms",
    "cpu_target_met", "reap_target_met", "lost_live_leases", "expired_live_leases",
}  # fmt: skip


def test_a_tiny_lease_bench_reaps_every_killed_lease_and_no_live_one(redis_url: str) -> None:
    # four shards on one server: the leases, heartbeats and reaps of every shard
    out = lease_bench(TINY, redis_url, shards=4)
    assert out.keys() >= FIELDS
    assert out["leases"] == 400 and out["shards"] == 4
    assert out["workers"] >= 400 // 20  # at most 20 leases a worker, each on one shard
    assert out["lost_live_leases"] == 0  # a worker that heartbeats never loses one
    assert out["expired_live_leases"] == 0
    assert 0 < out["killed_leases"] < 400
    assert out["reaped"] == out["killed_leases"]
    assert out["reap_late_p50_ms"] >= 0  # never before its deadline
    assert out["heartbeats_per_s"] > 0 and out["redis_cpu_pct"] >= 0
    assert isinstance(out["cpu_target_met"], bool) and isinstance(out["reap_target_met"], bool)
