"""The ``recent`` index behind ``task list``: enqueue adds, each call trims it
to the newest 100,000 ids (explicit ``now``, no SCAN)."""

from __future__ import annotations

from lua_ops import T0, Ops, new_id, row

CAP = 100_000  # RECENT_CAP in lua/lib/recent.lua


def test_enqueue_indexes_by_creation_time(ops: Ops) -> None:
    first, second = new_id(), new_id()
    ops.enqueue(row(first))
    ops.now += 5
    ops.enqueue(row(second))
    index = ops.k.recent(0)
    assert ops.r.zrevrange(index, 0, -1, withscores=True) == [
        (second.encode(), T0 + 5),
        (first.encode(), T0),
    ]


def test_the_index_is_trimmed_to_the_newest_cap_ids(ops: Ops) -> None:
    index = ops.k.recent(0)
    # a full index of older ids (their hashes need not exist for the trim)
    ops.r.zadd(index, {f"0-old{i:06d}": T0 - CAP + i for i in range(CAP)})
    iid = new_id()
    ops.enqueue(row(iid))
    assert ops.r.zcard(index) == CAP
    assert ops.r.zscore(index, "0-old000000") is None  # the oldest went
    assert ops.r.zscore(index, iid) == T0
