"""Rate limits (issue 32 §5, lua/lib/rate.lua) on explicit ``now``: turns spread
one per unit/n, never more than n releases in any window of one unit however
late promote runs, groups and tenants apart, a retry taking a turn of its own,
a waiting instance cancelled, and nothing over its rate in the ready streams."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from lua_ops import T0, Ops, Tok, new_id, row

from redcron.engine import Broker
from redcron.engine.argv import EnqueueRow
from redcron.errors import Rejected


def rated(iid: str, n: int, unit_ms: int = 1000, group: str = "", **kw: Any) -> EnqueueRow:
    """An enqueue row of task ``job`` with a rate of ``n`` per ``unit_ms``."""
    base = row(iid, **kw)
    return base._replace(
        rate_ms=unit_ms, rate_n=n, rate_key="cust" if group else "", rate_group=group
    )


def most_in_a_window(times: Sequence[int], window: int) -> int:
    """The most of ``times`` in any half-open window ``[t, t + window)``."""
    ts = sorted(times)
    return max((sum(1 for u in ts if t <= u < t + window) for t in ts), default=0)


def test_an_instance_with_a_rate_waits_on_the_timers_until_promote_gives_it_a_turn(
    ops: Ops,
) -> None:
    ids = [new_id() for _ in range(4)]
    ops.enqueue(*[rated(i, 2) for i in ids])
    # enqueue hands none to the stream: promote gives the turns
    assert ops.ready() == 0
    assert {ops.info(i)["state"] for i in ids} == {"scheduled"}
    ops.promote()
    assert ops.ready() == 1
    assert ops.info(ids[0])["state"] == "ready"
    # the others: one turn every unit / n, as their due and rate_at say
    for i, at in zip(ids[1:], (500, 1000, 1500), strict=True):
        f = ops.info(i)
        assert (f["state"], f["loc"], f["due"], f["rate_at"]) == (
            "scheduled", "timer", str(T0 + at), str(T0 + at),
        )  # fmt: skip
    assert ops.r.hget(ops.k.counters(0), "rate_waits") == b"3"
    ops.now = T0 + 499
    assert ops.promote()[0] == 0
    ops.now = T0 + 500
    assert ops.promote()[0] == 1
    assert ops.info(ids[1])["state"] == "ready"
    assert "rate_at" not in ops.info(ids[1]) and "due" not in ops.info(ids[1])


def test_a_late_promote_never_hands_over_more_than_n_in_a_window(ops: Ops) -> None:
    ids = [new_id() for _ in range(4)]
    ops.enqueue(*[rated(i, 2) for i in ids])
    ops.promote()  # the first at T0; turns at +500, +1000, +1500
    ops.now = T0 + 1600  # maintenance ran late: three turns are due at once
    ops.promote()
    states = [ops.info(i)["state"] for i in ids]
    assert states[:3] == ["ready", "ready", "ready"]
    # the window [T0 + 1600, T0 + 2600) holds two already: the fourth waits for room
    f = ops.info(ids[3])
    assert (f["state"], f["rate_at"]) == ("scheduled", str(T0 + 2600))


def test_a_keyed_rate_is_never_exceeded_across_three_workers_and_groups_do_not_wait_on_each_other(
    ops: Ops,
) -> None:
    rng = random.Random(7)
    hot = [new_id() for _ in range(30)]
    cold = [new_id() for _ in range(3)]
    other = [new_id() for _ in range(5)]
    ops.enqueue(*[rated(i, 10, group="c1") for i in hot])
    ops.enqueue(*[rated(i, 10, group="c2") for i in cold])
    ops.enqueue(*[row(i, tenant="zeta") for i in other])  # no rate, another tenant
    leased_at: dict[str, int] = {}
    held: list[Tok] = []
    workers = ("w1", "w2", "w3")
    end = T0 + 10_000
    while ops.now < end and len(leased_at) < len(hot) + len(cold) + len(other):
        ops.promote()
        for w in rng.sample(workers, 3):
            for tok in ops.lease(w, n=2, ttl=60_000):
                assert tok.iid not in leased_at
                leased_at[tok.iid] = ops.now
                held.append(tok)
        # nothing over its rate is ever in a ready stream: at most the released
        assert ops.ready() <= 2 * 3
        done = [t for t in held if rng.random() < 0.7]
        for t in done:
            ops.complete(t.worker, [t])
            held.remove(t)
        ops.now += rng.randint(30, 260)  # maintenance passes, late and early
    assert set(leased_at) == set(hot + cold + other)
    assert most_in_a_window([leased_at[i] for i in hot], 1000) <= 10
    hot_times = sorted(leased_at[i] for i in hot)
    assert hot_times[-1] - hot_times[0] >= 2000  # 30 at 10/s: 2.9 s of turns
    # another group of the same task, and another tenant, went at once (the
    # tenant by DRR beside acme's released work: within the first two passes)
    assert max(leased_at[i] for i in cold) - T0 <= 1000
    assert sorted(leased_at[i] for i in other)[-1] - T0 <= 260
    assert min(leased_at[i] for i in other) == T0


def test_tenants_have_their_own_turns(ops: Ops) -> None:
    a, b = new_id(), new_id()
    a2, b2 = new_id(), new_id()
    ops.enqueue(rated(a, 1), rated(a2, 1), rated(b, 1, tenant="beta"), rated(b2, 1, tenant="beta"))
    ops.promote()
    assert [ops.info(i)["state"] for i in (a, b, a2, b2)] == [
        "ready", "ready", "scheduled", "scheduled",
    ]  # fmt: skip
    assert ops.r.exists(ops.k.rate(0, "acme", "job", ""), ops.k.rate(0, "beta", "job", "")) == 2


def test_a_retry_takes_a_turn_of_its_own(ops: Ops) -> None:
    a, b = new_id(), new_id()
    ops.enqueue(rated(a, 1))
    ops.promote()
    [tok] = ops.lease(n=1, ttl=60_000)
    ops.now = T0 + 10
    # a retry at once (no backoff) does not go ready: it takes a turn first
    assert ops.fail("w1", tok, delay=0) == "scheduled"
    f = ops.info(a)
    assert (f["state"], f["loc"]) == ("scheduled", "timer")
    ops.promote()
    assert (ops.info(a)["state"], ops.info(a)["rate_at"]) == ("scheduled", str(T0 + 1000))
    ops.enqueue(rated(b, 1))
    ops.promote()
    assert ops.info(b)["rate_at"] == str(T0 + 2000)  # after the retry's turn
    ops.now = T0 + 1000
    ops.promote()
    assert ops.info(a)["state"] == "ready"
    [tok] = ops.lease(n=1, ttl=60_000)
    # a retry with backoff: waits out its backoff, then takes a turn
    ops.now = T0 + 1100
    assert ops.fail("w1", tok, delay=50) == "retry_wait"
    ops.now = T0 + 1150
    ops.promote()
    assert (ops.info(a)["state"], ops.info(a)["rate_at"]) == ("retry_wait", str(T0 + 3000))


def test_a_waiting_instance_is_cancelled_off_the_timers(ops: Ops, broker: Broker) -> None:
    a, b, c = new_id(), new_id(), new_id()
    ops.enqueue(rated(a, 1), rated(b, 1), rated(c, 1))
    ops.promote()
    assert ops.info(b)["state"] == "scheduled"
    done = broker.cancel(b, now=ops.now)
    assert done.cancelled and ops.info(b)["state"] == "cancelled"
    assert ops.r.zscore(ops.k.timers(0), b) is None
    # the turns after it stay where they were; nothing runs it
    ops.now = T0 + 2000
    ops.promote()
    assert [ops.info(i)["state"] for i in (a, b, c)] == ["ready", "cancelled", "ready"]
    assert [t.iid for t in ops.lease(n=5)] == [a, c]


def test_an_idle_group_leaves_no_key_behind(ops: Ops) -> None:
    ops.enqueue(rated(new_id(), 5, group="g"))
    ops.promote()
    bucket = ops.k.rate(0, "acme", "job", "g")
    ttl = ops.r.pttl(bucket)
    assert 0 < ttl <= 200 + 1000 + 1000  # its next turn, a unit, a second


def test_the_bucket_lives_as_long_as_turns_are_handed_out(ops: Ops) -> None:
    ids = [new_id() for _ in range(30)]
    ops.enqueue(*[rated(i, 10, group="g") for i in ids])
    ops.promote()
    bucket = ops.k.rate(0, "acme", "job", "g")
    # the last turn is 2.9 s away: the bucket (its next turn) outlives it
    assert ops.r.pttl(bucket) > 2900 + 1000
    ops.now = T0 + 100
    ops.promote()  # a release does not shorten it
    assert ops.r.pttl(bucket) > 2800 + 1000


def test_enqueue_refuses_a_rate_below_one(ops: Ops) -> None:
    with pytest.raises(Rejected, match="rate_ms and rate_n"):
        ops.enqueue(rated(new_id(), 0))


def test_a_woken_concurrency_waiter_keeps_its_slot_while_it_waits_for_its_turn(
    ops: Ops, broker: Broker
) -> None:
    a, b = new_id(), new_id()
    ops.enqueue(*[rated(i, 1)._replace(ck="k", ckn=1) for i in (a, b)])
    slots = ops.k.ckslots(0, "acme", "job", "k")
    ops.promote()
    [tok] = ops.lease(n=5, ttl=60_000)
    assert tok.iid == a
    ops.now = T0 + 1000
    ops.promote()  # b's turn: ready, but its key is held by a: b waits in the key's list
    assert ops.lease(n=5, ttl=60_000) == []
    assert ops.info(b)["state"] == "waiting"
    ops.now = T0 + 1100
    ops.complete("w1", [tok])  # a's slot goes to b, which must take a turn first
    f = ops.info(b)
    assert (f["state"], f["loc"], f["due"]) == ("scheduled", "timer", str(T0 + 1100))
    assert [m.decode() for m in ops.r.zrange(slots, 0, -1)] == [b]  # reserved for it
    ops.promote()
    assert ops.info(b)["rate_at"] == str(T0 + 2000)
    ops.r.zadd(ops.k.timers(0), {'ckwake:["acme","job","k","1"]': ops.now})
    ops.now = T0 + 1500
    ops.promote()  # a prune of the key keeps a reservation waiting for its turn
    assert [m.decode() for m in ops.r.zrange(slots, 0, -1)] == [b]
    ops.now = T0 + 2000
    ops.promote()
    [tok] = ops.lease(n=5, ttl=60_000)
    assert tok.iid == b


def test_a_cancelled_reservation_waiting_for_its_turn_goes_back_to_the_key(
    ops: Ops, broker: Broker
) -> None:
    a, b, c = new_id(), new_id(), new_id()
    ops.enqueue(*[rated(i, 1)._replace(ck="k", ckn=1) for i in (a, b)])
    slots = ops.k.ckslots(0, "acme", "job", "k")
    ops.promote()
    [tok] = ops.lease(n=1, ttl=60_000)
    ops.enqueue(row(c)._replace(ck="k", ckn=1))  # no rate: straight to its stream
    assert ops.lease(n=5, ttl=60_000) == [] and ops.info(c)["state"] == "waiting"
    ops.now = T0 + 1000
    ops.promote()
    assert ops.lease(n=5, ttl=60_000) == []  # b waits in the key's list behind c
    ops.complete("w1", [tok])  # c is woken into the slot (it has no rate)
    [tok] = ops.lease(n=5, ttl=60_000)
    assert tok.iid == c
    ops.complete("w1", [tok])  # b is woken into it, and waits for its turn
    assert ops.info(b)["state"] == "scheduled"
    assert [m.decode() for m in ops.r.zrange(slots, 0, -1)] == [b]
    assert broker.cancel(b, now=ops.now).cancelled
    assert ops.r.zrange(slots, 0, -1) == []
