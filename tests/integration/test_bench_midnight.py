"""``redcron bench midnight`` end to end at a tiny size against the test Redis:
every due fire produced a finished task, the JSON carries every figure, and the
bench's keys are gone afterwards.  Figures are the bench's, never asserted."""

from __future__ import annotations

import json

import redis
from click.testing import CliRunner

from redcron.cli.main import main

#: the figures `bench midnight --json` prints (docs/benchmarks.md defines each)
FIELDS = {
    "schedules", "tenants", "due", "shards", "workers", "fired", "started", "dropped",
    "start_delay_p50_ms", "start_delay_p99_ms", "start_delay_max_ms", "fire_delay_p99_ms",
    "lease_delay_p99_ms", "started_within_30s_pct", "fires_per_s", "starts_per_s",
    "jain_index", "targets", "targets_met", "burst_s", "cpu_s", "redis_cpu_pct",
    "redis_used_memory_mb", "redis_used_memory_setup_mb", "setup_s", "timed_out",
}  # fmt: skip


def run_midnight(url: str, *extra: str) -> dict[str, object]:
    args = ["bench", "midnight", "--schedules", "200", "--tenants", "20", "--due", "100"]
    result = CliRunner().invoke(main, [*args, "--redis", url, "--json", *extra])
    assert result.exit_code == 0, result.output
    assert "midnight: registered 100/100 due schedules" in result.stderr
    out: dict[str, object] = json.loads(result.stdout)
    return out


def test_every_due_fire_starts_and_finishes(redis_url: str) -> None:
    out = run_midnight(redis_url, "--workers", "1")
    assert set(out) >= FIELDS
    assert out["due"] == out["fired"] == out["started"] == 100
    assert out["dropped"] == 0 and out["timed_out"] is False
    assert out["shards"] == 1 and out["workers"] == 1
    targets = out["targets"]
    assert isinstance(targets, dict)
    assert set(targets) == {"started_within_30s", "jain", "dropped"}
    assert targets["dropped"]["met"] is True
    assert isinstance(out["jain_index"], float)  # 5 due per tenant: measured
    assert set(out["cpu_s"]) == {"redis", "beat", "workers"}  # type: ignore[arg-type]
    client = redis.Redis.from_url(redis_url)
    try:
        assert not list(client.scan_iter(match="rcmid*", count=1000))  # cleaned up
    finally:
        client.close()
