"""``redcron bench scale`` and ``bench fairness --cluster`` at a small size on
the session's cluster: the rows and fields they print, and that every task
finished (no timed or ratio assertion: figures are the benchmark's business)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from redcron.cli.main import main


def test_bench_scale_drains_every_task_in_every_cell(cluster_url: str) -> None:
    res = CliRunner().invoke(
        main,
        [
            "bench",
            "scale",
            "--tasks",
            "300",
            "--shards",
            "1,4",
            "--workers",
            "1",
            "--redis",
            cluster_url,
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    rows = out["rows"]
    assert [(r["shards"], r["workers"]) for r in rows] == [(1, 1), (4, 1)]
    for row in rows:
        assert row["servers"] == "given"
        assert row["drained"] == row["tasks"] == 300
        assert row["tasks_per_s"] > 0 and row["drain_per_s"] > 0
        assert set(row["cores"]) == {"workers", "redis", "bench"}
        assert len(row["redis_cpu_s_per_master"]) == 3  # INFO cpu of each master


def test_bench_fairness_cluster_reports_shares_on_different_and_one_shard(
    cluster_url: str,
) -> None:
    res = CliRunner().invoke(
        main,
        [
            "bench",
            "fairness",
            "--cluster",
            "--tasks-per-weight",
            "30",
            "--redis",
            cluster_url,
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["shards"] == 12
    spread, together = out["different_shards"], out["one_shard"]
    for case in (spread, together):
        assert case["finished"] == case["tasks"] == 30 * 7
        assert set(case["tenants"]) == {"w1", "w2", "w4"}
        assert case["share_error_vs_weights_pct"] >= 0
        assert case["share_error_vs_rotation_pct"] >= 0
        for tenant in case["tenants"].values():
            assert {"name", "shard", "weight", "share", "weight_share", "rotation_share"} <= set(
                tenant
            )
    assert sorted(t["shard"] for t in spread["tenants"].values()) == [0, 1, 2]
    assert {t["shard"] for t in together["tenants"].values()} == {0}
    # the model's shares (not measured): a third each when spread, the weights on one shard
    assert [t["rotation_share"] for t in spread["tenants"].values()] == [0.3333] * 3
    assert [t["rotation_share"] for t in together["tenants"].values()] == [0.1429, 0.2857, 0.5714]
