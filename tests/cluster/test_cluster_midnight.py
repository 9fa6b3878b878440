"""``redcron bench midnight`` on the session's 3-master cluster at a tiny size:
12 shards by default on a cluster URL, instances read on each one's own shard
(not shard 0), nothing dropped, Redis figures summed over the masters."""

from __future__ import annotations

import json

from click.testing import CliRunner

from redcron import App
from redcron.cli.main import main


def test_midnight_on_a_cluster_drops_nothing(cluster_url: str) -> None:
    args = ["bench", "midnight", "--schedules", "200", "--tenants", "20", "--due", "100"]
    result = CliRunner().invoke(main, [*args, "--redis", cluster_url, "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["shards"] == 12
    assert out["due"] == out["fired"] == out["started"] == 100
    assert out["dropped"] == 0 and out["timed_out"] is False
    assert out["redis_used_memory_mb"] > 0 and out["cpu_s"]["redis"] >= 0


def test_the_beat_reads_every_shard_s_next_due_time_on_a_cluster(capp: App) -> None:
    """The beat's idle wait (``Beat.run`` -> ``next_due``) asked TIME inside a
    cluster pipeline, which redis-py refuses: the beat process died on its
    first idle tick on a cluster, which the bench found (tests call tick())."""
    now, heads = capp.broker.beat.next_due(range(capp.broker.shards))
    assert now > 0 and heads == [None] * capp.broker.shards
