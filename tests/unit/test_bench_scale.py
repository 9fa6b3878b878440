"""The pure parts of ``redcron bench scale`` and ``bench fairness --cluster``:
tenants spread over shards, the rotation model of shares across shards, the
share figures and the scale table (no Redis)."""

from __future__ import annotations

import click
import pytest

from redcron.cli.bench.fixtures import machine_busy_s, split_evenly, spread_tenants
from redcron.cli.bench.scale import Sample, cores, parse_counts, table
from redcron.cli.bench.shard_weights import (
    expected_shares,
    rotation_shares,
    share_error,
    shares_while_backlogged,
    tenant_on_shard,
    weight_shares,
)
from redcron.keys import shard_of


def test_spread_tenants_puts_as_many_on_every_shard() -> None:
    names = spread_tenants(12, 4)
    assert len(names) == len(set(names)) == 48
    per = [sum(1 for n in names if shard_of(n, 12) == s) for s in range(12)]
    assert per == [4] * 12
    assert spread_tenants(1, 3) == ["t0", "t1", "t2"]


def test_split_evenly() -> None:
    assert split_evenly(10, 3) == [4, 3, 3]
    assert split_evenly(2, 4) == [1, 1, 0, 0]
    assert sum(split_evenly(20_000, 48)) == 20_000


def test_tenant_on_shard() -> None:
    for shard in range(12):
        name = tenant_on_shard("w4", shard, 12)
        assert name.startswith("w4-") and shard_of(name, 12) == shard


def test_rotation_shares_are_equal_wherever_the_idle_shards_sit() -> None:
    assert rotation_shares([0, 4, 8]) == {0: 1 / 3, 4: 1 / 3, 8: 1 / 3}
    assert rotation_shares([0, 1, 2]) == {0: 1 / 3, 1: 1 / 3, 2: 1 / 3}
    assert rotation_shares([5]) == {5: 1.0}


def test_expected_shares_weigh_within_a_shard_only() -> None:
    weights = {"a": 1, "b": 2, "c": 4}
    spread = expected_shares({"a": 0, "b": 1, "c": 8}, weights)
    assert spread == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    together = expected_shares({"a": 3, "b": 3, "c": 3}, weights)
    assert together == pytest.approx(weight_shares(weights))
    assert together == pytest.approx({"a": 1 / 7, "b": 2 / 7, "c": 4 / 7})


def test_share_error_is_relative_to_the_expected_share() -> None:
    assert share_error({"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 0.5}) == 0.0
    assert share_error({"a": 0.3, "b": 0.7}, {"a": 0.25, "b": 0.75}) == pytest.approx(0.2)
    assert share_error({"b": 1.0}, {"a": 0.5, "b": 0.5}) == pytest.approx(1.0)


def test_shares_while_backlogged_stop_at_the_first_tenant_to_run_dry() -> None:
    leases = [(1, "a"), (2, "b"), (3, "b"), (4, "a"), (5, "b"), (6, "b"), (7, "b")]
    shares, window = shares_while_backlogged(leases)
    # a's last lease is at 4: the window is the leases before it
    assert window == 3
    assert shares == pytest.approx({"a": 1 / 3, "b": 2 / 3})


def test_cores_over_a_window() -> None:
    before = Sample(wall=10.0, done=100, workers=1.0, masters=(0.5, 0.5), bench=0.1)
    after = Sample(wall=12.0, done=2_100, workers=2.0, masters=(1.5, 0.7), bench=0.2, machine=3.0)
    got = cores(before, after)
    assert got["tasks_per_s"] == 1_000
    assert got["window_tasks"] == 2_000
    assert got["cpu_s"] == {"workers": 1.0, "redis": 1.2, "bench": 0.1}
    assert got["redis_cpu_s_per_master"] == [1.0, 0.2]
    assert got["cores"] == {"workers": 0.5, "redis": 0.6, "bench": 0.05}
    assert got["cores_total"] == 1.15
    assert got["machine_cores"] == 1.5


def test_table_has_a_line_per_row() -> None:
    row = {
        "servers": "3 masters",
        "shards": 4,
        "workers": 2,
        "tasks_per_s": 12_345,
        "cores": {"workers": 0.5, "redis": 0.6, "bench": 0.05},
        "redis_cpu_s_per_master": [1.0, 0.2, 0.0],
        "window_s": 2.0,
        "cores_total": 1.15,
        "machine_cores": 1.9,
    }
    lines = table({"rows": [row, row]}).splitlines()
    assert len(lines) == 3
    assert "tasks/s" in lines[0] and "12,345" in lines[1] and "0.50/0.10/0.00" in lines[1]


def test_parse_counts() -> None:
    assert parse_counts("1,4,12", "--shards") == [1, 4, 12]
    assert parse_counts(" 2 ", "--workers") == [2]
    for bad in ("", "0", "1,x", "-1"):
        with pytest.raises(click.BadParameter, match="comma"):
            parse_counts(bad, "--shards")


def test_machine_busy_seconds_grow() -> None:
    first = machine_busy_s()
    sum(i * i for i in range(200_000))  # some work of our own
    assert machine_busy_s() >= first > 0
