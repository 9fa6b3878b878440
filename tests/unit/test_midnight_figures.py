"""``redcron bench midnight``'s pure parts: percentile, Jain index, the burst's
Jain window, target marking, rates and the figures from instance rows (no Redis)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from redcron.cli.bench.fixtures import jain_index, p99, percentile
from redcron.cli.bench.midnight import (
    Instance,
    default_workers,
    due_jobs,
    jain_in_burst,
    mark_targets,
    rate_per_s,
    summarize,
)
from redcron.cli.main import main as cli
from redcron.schedule.timeutil import to_ms
from redcron.schedule.triggers import next_fire

T0 = 1_800_000_000_000


def test_percentile_is_nearest_rank_and_clamps() -> None:
    values = list(range(1, 101))  # 1..100
    assert percentile(values, 0.5) == 51
    assert percentile(values, 0.99) == 100 == p99(values)
    assert percentile(values, 0.0) == 1
    assert percentile(values, 1.0) == 100
    assert percentile([7], 0.5) == 7
    with pytest.raises(ValueError, match="empty"):
        percentile([], 0.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        percentile(values, 99)


def test_jain_index_bounds() -> None:
    assert jain_index([5, 5, 5, 5]) == 1.0
    assert jain_index([4, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([1, 2]) == pytest.approx(9 / 10)
    assert jain_index([]) == 1.0
    assert jain_index([0, 0]) == 1.0


def test_the_jain_window_ends_at_the_first_tenant_s_last_start() -> None:
    demand = {"a": 2, "b": 2, "c": 2}
    # a and b take turns; c is served only after a ran out of work
    starts = {"a": [1, 3], "b": [2, 4], "c": [5, 6]}
    # window: until a's last start (3): a 2, b 1, c 0
    assert jain_in_burst(starts, demand) == pytest.approx(jain_index([2, 1, 0]))
    # round robin: the first to finish has one start more than the others
    fair = {"a": [1, 4], "b": [2, 5], "c": [3, 6]}
    assert jain_in_burst(fair, demand) == pytest.approx(jain_index([2, 1, 1]))
    tenants = [f"t{i}" for i in range(100)]
    rr = {t: [r * 100 + i for r in range(10)] for i, t in enumerate(tenants)}
    assert jain_in_burst(rr, dict.fromkeys(tenants, 10)) == pytest.approx(
        jain_index([10] + [9] * 99)
    )
    # served one tenant after another: the first is done before most began
    serial = {t: [i * 10 + r for r in range(10)] for i, t in enumerate(tenants)}
    assert jain_in_burst(serial, dict.fromkeys(tenants, 10)) == pytest.approx(0.01)


def test_a_tenant_whose_work_never_started_counts_zero() -> None:
    assert jain_in_burst({"a": [1, 2]}, {"a": 2, "b": 2}) == pytest.approx(jain_index([2, 0]))


def test_no_jain_index_with_one_due_task_for_a_tenant() -> None:
    assert jain_in_burst({"a": [1, 2], "b": [3]}, {"a": 2, "b": 1}) is None
    assert jain_in_burst({}, {}) is None


def test_targets_are_marked_met_or_not() -> None:
    met = mark_targets(0.995, 0.97, 0)
    assert all(t["met"] for t in met.values())
    missed = mark_targets(0.98, 0.9, 1)
    assert not any(t["met"] for t in missed.values())
    edge = mark_targets(0.99, 0.95, 0)
    assert all(t["met"] for t in edge.values())
    unmeasured = mark_targets(1.0, None, 0)
    assert unmeasured["jain"] == {"value": None, "target": ">= 0.95", "met": None}
    assert missed["dropped"]["value"] == 1 and missed["jain"]["target"] == ">= 0.95"


def test_rates_run_from_the_nominal_fire_time_to_the_last_event() -> None:
    assert rate_per_s(1_000, T0, [T0 + 100, T0 + 500]) == pytest.approx(2_000)
    assert rate_per_s(0, T0, []) == 0.0
    assert rate_per_s(10, T0, [T0]) == pytest.approx(10_000)  # at least 1 ms


def _ti(tenant: str, created: int, ended: int | None, running: int | None = None) -> Instance:
    return Instance(tenant, created, created + 1, running, ended, ended is not None)


def test_summarize_counts_drops_and_starts_from_the_end_of_a_no_op() -> None:
    rows = [
        _ti("t0", T0 + 10, T0 + 20),
        _ti("t1", T0 + 10, T0 + 31_000, running=T0 + 30_500),  # a running mark wins
        _ti("t0", T0 + 15, None),  # never finished: dropped
        _ti("t1", T0 + 15, T0 + 40),
    ]
    out = summarize(rows, T0)
    assert out["dropped"] == 1 and out["fired"] == 4 and out["started"] == 3
    assert out["start_delay_max_ms"] == 30_500
    assert out["started_within_30s_pct"] == 50.0  # 2 of 4 due within 30 s
    assert out["targets"]["dropped"]["met"] is False
    assert out["targets"]["started_within_30s"]["met"] is False
    assert out["jain_index"] is not None  # two due tasks each


def test_due_jobs_collide_without_jitter() -> None:
    target = datetime(2026, 12, 1, 23, 59, 58, tzinfo=UTC)
    jobs = due_jobs(6, 3, target)
    assert [j.tenant for j in jobs] == ["t0", "t1", "t2"] * 2
    assert all(j.jitter_s == 0 and "H" not in (j.cron or "") for j in jobs)
    before = datetime(2026, 12, 1, 23, 59, 50, tzinfo=UTC)
    assert {to_ms(next_fire(j.trigger(), before)) for j in jobs} == {to_ms(target)}


def test_default_workers_leave_a_core_for_redis() -> None:
    assert default_workers(2) == 1
    assert default_workers(1) == 1
    assert default_workers(8) == 7


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--tenants", "0"], "--tenants"),
        (["--tenants", "10", "--due", "5"], "--due"),
        (["--tenants", "10", "--due", "40", "--schedules", "30"], "--schedules"),
        (["--workers", "0"], "--workers"),
        (["--shards", "0"], "--shards"),
        (["--cluster", "--redis", "redis://127.0.0.1:1"], "--cluster"),
        (["--cluster", "--masters", "0"], "--masters"),
    ],
)
def test_bad_options_are_refused_naming_the_option(args: list[str], option: str) -> None:
    result = CliRunner().invoke(cli, ["bench", "midnight", *args])
    assert result.exit_code == 2
    assert option in result.output
