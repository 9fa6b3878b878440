"""``redcron chaos --cluster``'s pure parts: which master serves a shard, the
tenants spread over the masters, and the accounting of a master's outage."""

from __future__ import annotations

import redis.crc

from redcron.chaos import plan
from redcron.chaos.outage import (
    MasterOutage,
    account,
    describe,
    judge,
    master_of_slot,
    shard_masters,
    spread_tenants,
)
from redcron.embedded_cluster import SLOTS
from redcron.keys import Keys, shard_of


def test_slots_split_evenly_in_order_as_the_embedded_cluster_assigns_them() -> None:
    per = SLOTS // 3
    assert [master_of_slot(s, 3) for s in (0, per - 1, per, 2 * per - 1, 2 * per)] == [
        0, 0, 1, 1, 2,
    ]  # fmt: skip
    assert master_of_slot(SLOTS - 1, 3) == 2  # the remainder goes to the last one
    assert master_of_slot(SLOTS - 1, 1) == 0


def test_a_shard_lives_on_the_master_of_its_hash_tag_slot() -> None:
    where = shard_masters(12, 3)
    assert sorted(where) == list(range(12))
    for shard, master in where.items():
        slot = redis.crc.key_slot(Keys().ti(shard, "01X").encode())  # any key of the shard
        assert master_of_slot(slot, 3) == master
    assert set(where.values()) == {0, 1, 2}  # 12 shards reach every master


def test_spread_tenants_puts_tenant_i_on_master_i() -> None:
    names = spread_tenants(("acme", "globex", "initech"), 12, 3)
    where = shard_masters(12, 3)
    assert [where[shard_of(n, 12)] for n in names] == [0, 1, 2]
    assert all(
        n.split("-")[0] == base
        for n, base in zip(names, ("acme", "globex", "initech"), strict=True)
    )
    assert spread_tenants(("acme", "globex", "initech"), 12, 3) == names  # stable


def test_the_cluster_plan_kills_one_master_and_keeps_the_rest_of_the_plan() -> None:
    one, many = plan(11, 24, 1200), plan(11, 24, 1200, cluster=True)
    assert (one.masters, one.shards, many.masters, many.shards) == (0, 2, 3, 12)
    assert [e.what for e in many.events if e.what in ("redis", "master")] == ["master"]
    kill = next(e for e in many.events if e.what == "master")
    assert 0 <= kill.target < 3 and 4.0 <= kill.hold <= 8.0
    # the same draws otherwise: the workers' and beats' faults, the mix, the waves' sizes
    assert [e for e in one.events if e.what != "redis"] == [
        e for e in many.events if e.what != "master"
    ]
    assert one.mix == many.mix
    where = shard_masters(12, 3)
    assert {where[shard_of(t.name, 12)] for t in many.tenants} == {0, 1, 2}


WHERE = {0: 0, 1: 1, 2: 2, 3: 0, 4: 1, 5: 2}


def test_account_counts_ends_per_master_in_the_window_and_after_on_the_dead_one() -> None:
    ends = [
        (0, 900), (1, 950),  # before the outage, within as long a window
        (0, 1000), (3, 1500), (2, 2000),  # during: master 0 twice, master 2 once
        (4, 2100),  # after, on master 1 (the dead one)
        (1, 2600),  # after, on master 1
        (0, 2500),  # after, a live master: not counted
    ]  # fmt: skip
    got = account(ends, WHERE, master=1, down_ms=1000, up_ms=2000)
    assert got == MasterOutage(
        master=1,
        shards=(1, 4),
        down_s=1.0,
        finishes={0: 2, 1: 0, 2: 1},
        finishes_before={0: 1, 1: 1, 2: 0},
        finishes_after=2,
        resumed_after_s=0.1,
    )
    assert (got.finishes_live, got.finishes_dead) == (3, 0)
    assert judge(got) == []
    assert describe(got) == (
        "master 1 (shards 1,4) down 1 s: attempts ended during the outage on live masters 3, "
        "on the dead one 0 (per master, and in as long a window just before: 0: 2 (before 1), "
        "1: 0 (before 1), 2: 1 (before 0)); on its shards after it came back 2 (first 0.1 s after)"
    )


def test_judge_names_a_paused_live_master_a_dead_master_that_wrote_and_no_resumption() -> None:
    ends = [(0, 500), (2, 600), (5, 700), (1, 1500)]  # masters 0 and 2 ended work before
    got = account(ends, WHERE, master=1, down_ms=1000, up_ms=2000)
    found = judge(got)
    assert len(found) == 4
    assert found[0] == (
        "master 0: no attempt ended on its shards while master 1 was down (1 s), 1 in as long "
        "a window just before: a live master's shards paused too"
    )
    assert found[1].startswith("master 2: no attempt ended on its shards while master 1")
    assert found[2].startswith("master 1: 1 attempts ended on its shards while it was down")
    assert found[3] == "master 1: no attempt ended on its shards 1,4 after it came back: " \
        "work did not resume"  # fmt: skip
    assert "first never" in describe(got)


def test_a_live_master_that_ended_nothing_before_either_shows_nothing_either_way() -> None:
    got = account([(0, 1500), (1, 2500)], WHERE, master=1, down_ms=1000, up_ms=2000)
    assert got.finishes == {0: 1, 1: 0, 2: 0} and got.finishes_before == {0: 0, 1: 0, 2: 0}
    assert judge(got) == []  # master 2 was idle before too: no pause shown
