"""The pure parts of ``redcron bench leases``: how the leases, heartbeat phases
and killed workers are laid out, and how Redis time is split (no Redis)."""

from __future__ import annotations

import pytest

from redcron.cli.bench.lease_figures import (
    Usage,
    hb_offsets,
    interleave,
    killed,
    percentiles,
    profile,
    split,
    tenant_counts,
    usage_of,
    warm_up_s,
)
from redcron.cli.bench.leases import LeaseBenchOptions


def test_tenant_counts_spread_every_lease() -> None:
    assert tenant_counts(10, 3) == [4, 3, 3]
    assert sum(tenant_counts(150_000, 100)) == 150_000
    assert tenant_counts(2, 5) == [1, 1, 0, 0, 0]


def test_heartbeat_phases_are_even_over_the_period() -> None:
    assert hb_offsets(4, 10.0) == [0.0, 2.5, 5.0, 7.5]
    offsets = hb_offsets(2_344, 10.0)
    assert offsets[0] == 0 and offsets[-1] < 10.0
    assert offsets == sorted(offsets)


def test_interleave_spreads_each_group_over_the_whole() -> None:
    assert interleave([["a", "b"], ["x", "y"]]) == ["a", "x", "b", "y"]
    # the small group is not bunched at one end
    assert interleave([list("aaaa"), list("xx")]) == list("axaaxa")
    assert interleave([[], ["only"]]) == ["only"]


def test_killed_is_the_asked_fraction_spread_out() -> None:
    dead = killed(235, 0.1)
    assert len(dead) == 24  # ceil(23.5)
    assert dead[0] == 0 and dead[-1] > 200  # over the whole list, not its head
    assert killed(3, 0.1) == [0]  # at least one
    assert len(set(killed(1_000, 0.5))) == 500


def test_percentiles() -> None:
    assert percentiles([]) == {"p50": None, "p99": None, "max": None}
    values = list(range(1, 201))
    assert percentiles(values) == {"p50": 101, "p99": 199, "max": 200}
    assert percentiles([5]) == {"p50": 5, "p99": 5, "max": 5}


def test_usage_sums_every_master() -> None:
    cpu = [{"used_cpu_sys": 1.5, "used_cpu_user": 2.0}, {"used_cpu_sys": 0.5, "used_cpu_user": 0}]
    stats = [{"cmdstat_evalsha": {"calls": 10, "usec": 2_000_000}}, {"cmdstat_get": {"calls": 1}}]
    u = usage_of(cpu, stats)
    assert (u.cpu, u.scripts, u.script_calls) == (4.0, 2.0, 10)
    assert u.commands == {"evalsha": 2.0, "get": 0.0}
    less = u.minus(Usage(1.0, 0.5, 4, {"evalsha": 0.5}))
    assert (less.cpu, less.scripts, less.script_calls) == (3.0, 1.5, 6)
    assert less.commands == {"evalsha": 1.5, "get": 0.0}


def test_profile_ranks_commands_as_a_share_of_a_core() -> None:
    both = Usage(commands={"evalsha": 9.0, "xclaim": 2.0, "hset": 1.0, "xautoclaim": 3.0})
    alone = Usage(commands={"evalsha": 4.0, "xclaim": 1.0, "hset": 0.5})
    # heartbeats alone over 5 s; evalsha is the scripts' sum, left out
    assert profile(alone, 5.0) == {"xclaim": 20.0, "hset": 10.0}
    # the reaper: the window (10 s) less the heartbeats' rate
    assert profile(both, 10.0, alone, 5.0) == {"xautoclaim": 30.0}


def test_split_gives_heartbeats_their_window_and_the_reaper_the_difference() -> None:
    both = Usage(cpu=3.0, scripts=2.0, script_calls=100)  # over 10 s
    alone = Usage(cpu=1.0, scripts=0.75, script_calls=10)  # over 5 s
    assert split(both, 10.0, alone, 5.0) == {
        "redis_cpu_pct": 30.0,
        "heartbeat_cpu_pct": 20.0,
        "reaper_cpu_pct": 10.0,
        "heartbeat_script_pct": 15.0,
        "reaper_script_pct": 5.0,
    }


@pytest.mark.parametrize(
    ("opts", "names"),
    [
        (LeaseBenchOptions(leases=0), "--leases"),
        (LeaseBenchOptions(heartbeat_s=10, ttl_s=10), "--ttl"),
        (LeaseBenchOptions(per_worker=300), "--per-worker"),
        (LeaseBenchOptions(kill_fraction=1.0), "--kill"),
        (LeaseBenchOptions(tenants=0), "--tenants"),
    ],
)
def test_options_that_cannot_make_a_run_are_refused_by_name(
    opts: LeaseBenchOptions, names: str
) -> None:
    with pytest.raises(ValueError, match=names):
        opts.check()


def test_the_default_ttl_is_one_and_a_half_heartbeats() -> None:
    assert LeaseBenchOptions(heartbeat_s=10).ttl == 15.0
    assert LeaseBenchOptions(heartbeat_s=10, ttl_s=60).ttl == 60.0
    LeaseBenchOptions().check()


def test_the_warm_up_lasts_until_the_reaper_has_looked_at_every_stream() -> None:
    assert warm_up_s(10.0, 15.0, 2.0) == 19.0  # first looks one TTL in, then per min TTL
    assert warm_up_s(10.0, 60.0, 2.0) == 64.0
    assert warm_up_s(30.0, 31.0, 0.1) == 31.2
