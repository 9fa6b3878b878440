"""The worker's rotation over shards: each lease round starts after the shard
that leased last, so every backlogged shard gets one round in turn wherever the
idle shards sit (pure: no Redis)."""

from __future__ import annotations

from redcron.worker.leasing import next_start


def test_a_round_starts_after_the_shard_that_leased_last() -> None:
    shards = list(range(12))
    assert next_start(shards, -1) == 0  # nothing leased yet
    assert next_start(shards, 0) == 1
    assert next_start(shards, 11) == 0  # wraps around


def test_a_shard_left_out_of_the_round_is_stepped_over() -> None:
    # shard 3's master is failing (its gate is closed): the round after shard 3
    # leased starts at the next open one
    assert next_start([0, 1, 2, 4, 5], 3) == 3  # index of shard 4
    assert next_start([0, 1, 2, 4, 5], 5) == 0


def test_backlogged_shards_take_equal_turns_wherever_the_idle_ones_sit() -> None:
    """Simulate rounds: each round leases from the first backlogged shard from
    its start on; shards 0, 1 and 2 of 12 are backlogged, 3 to 11 idle (the
    placement a one-place-a-round rotation served 10 : 1 : 1)."""
    shards, busy = list(range(12)), {0, 1, 2}
    served, turns = -1, dict.fromkeys(sorted(busy), 0)
    for _ in range(300):
        start = next_start(shards, served)
        served = next(s for s in shards[start:] + shards[:start] if s in busy)
        turns[served] += 1
    assert turns == {0: 100, 1: 100, 2: 100}
