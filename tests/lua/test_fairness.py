"""Dispatch fairness on a real Redis (invariant 7): weighted DRR
shares, Jain's index, a backfill that must not starve late tenants, caps,
rate limits, aging and ``max_priority``.

Leases are driven straight through ``lease.lua`` with an explicit ``now``
(nothing sleeps, no worker runs); the order tasks come back in is the
dispatch order under test.  Tenants are kept backlogged: every test queues
more work than it leases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from lua_ops import Ops, Tok, new_id, row
from server_time import server_ms_after  # tests/helpers

from redcron import App

WORKER = "w1"
TTL = 600_000  # long enough that nothing expires unless a test moves time on


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), shards=1)

    @a.task(name="t.noop", retries=0)
    def noop() -> None:
        return None

    a.broker.ensure_meta()
    yield a
    a.close()


@pytest.fixture
def ops(app: App) -> Ops:
    return Ops(app.broker)


# -- helpers ----------------------------------------------------------------------


def lease(
    ops: Ops,
    n: int = 1,
    *,
    ttl: int = TTL,
    queues: Sequence[str] = ("default",),
    tenants: Sequence[str] = (),
    quantum: str = "",
    aging_ms: int | str = 0,
) -> list[tuple[Tok, str]]:
    """lease.lua at ``ops.now``: (token, tenant) in dispatch order.  Aging is off
    unless asked for (stream ids are server time, ``ops.now`` is not)."""
    raw = ops.lease_raw(WORKER, n, ttl, queues, tenants, quantum, aging_ms)
    return [(Tok(x[0].decode(), str(x[1]), int(x[2]), WORKER), x[7].decode()) for x in raw]


def fill(ops: Ops, tenant: str, count: int, priority: str = "normal", **kw: Any) -> list[str]:
    """Queue ``count`` ready tasks for ``tenant`` (pipelined, 256 per script call)."""
    ids = [new_id() for _ in range(count)]
    assert (
        ops.b.enqueuer.enqueue([row(i, tenant=tenant, priority=priority, **kw) for i in ids])
        == count
    )
    return ids


def drive(ops: Ops, total: int, batch: int) -> list[str]:
    """Lease ``total`` tasks ``batch`` at a time (completing as it goes); the
    tenants in dispatch order."""
    order: list[str] = []
    held: list[Tok] = []
    while len(order) < total:
        got = lease(ops, batch)
        assert got, f"nothing leased after {len(order)} of {total}"
        assert len(got) == batch, "backlogged tenants must fill every batch"
        order += [t for _tok, t in got]
        held += [tok for tok, _t in got]
        if len(held) >= 100:
            assert ops.complete(WORKER, held) == [1] * len(held)
            held = []
    if held:
        assert ops.complete(WORKER, held) == [1] * len(held)
    return order[:total]


def in_flight(ops: Ops, tenant: str) -> int:
    return int(ops.r.zcard(ops.k.leases(ops.shard, tenant)))


def ring(ops: Ops, priority: str = "normal", queue: str = "default") -> list[str]:
    members: list[bytes] = ops.r.zrange(ops.k.ring(ops.shard, queue, priority), 0, -1)  # type: ignore[assignment]
    return [t.decode() for t in members]


def jain(xs: Sequence[float]) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


# -- 1. weighted shares ----------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 7, 16])
def test_weighted_shares_hold_over_every_window_of_700_leases(
    app: App, ops: Ops, batch: int
) -> None:
    weights = {"w1": 1, "w2": 2, "w4": 4}
    for t, w in weights.items():
        app.tenants.set(t, weight=w)
        fill(ops, t, 1_500)
    order = drive(ops, 2_100, batch)

    window = 700
    total_w = sum(weights.values())
    counts = Counter(order[:window])
    worst = 0.0
    for start in range(len(order) - window + 1):
        if start:
            counts[order[start - 1]] -= 1
            counts[order[start + window - 1]] += 1
        for t, w in weights.items():
            err = abs(counts[t] / window - w / total_w)
            worst = max(worst, err)
            assert err <= 0.02, (
                f"window at {start}: {t} got {counts[t]}/{window}, want {w}/{total_w}"
            )
    # DRR with quantum 1 is exact up to one round (7 leases) per window
    assert worst <= 7 / window
    # every tenant is still backlogged: the shares were measured under contention
    assert sorted(ring(ops)) == sorted(weights)


# -- 2. equal weights --------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 16])
def test_equal_weights_give_a_jain_index_of_at_least_0_99(ops: Ops, batch: int) -> None:
    tenants = [f"eq{i}" for i in range(10)]
    for t in tenants:
        fill(ops, t, 150)
    order = drive(ops, 1_000, batch)
    counts = Counter(order)
    assert set(counts) == set(tenants)
    assert jain([counts[t] for t in tenants]) >= 0.99
    # and in every stretch of 100 leases, not just overall
    for start in range(0, 1_000, 100):
        part = Counter(order[start : start + 100])
        assert jain([part[t] for t in tenants]) >= 0.99, part


# -- 3. a backfill does not starve late tenants ----------------------------------------


# 50,000 queued tasks are enqueued in full (about 3 s on a laptop); the small
# tenants join after the backfill has been leasing for a while.
BACKFILL = 50_000


@pytest.mark.parametrize(("big_weight", "batch"), [(1, 1), (4, 1), (4, 16)])
def test_small_tenants_arriving_after_a_backfill_start_within_one_round(
    app: App, ops: Ops, big_weight: int, batch: int
) -> None:
    if big_weight != 1:
        app.tenants.set("backfill", weight=big_weight)
    fill(ops, "backfill", BACKFILL)
    before = drive(ops, 300, 16)  # alone: it gets everything
    assert set(before) == {"backfill"}

    smalls = [f"small{i:03d}" for i in range(100)]
    rows = [row(new_id(), tenant=t) for t in smalls for _ in range(20)]
    assert ops.b.enqueuer.enqueue(rows) == len(rows)

    # one DRR round: every small tenant (weight 1) plus the backfill's quantum,
    # plus at most one task of credit it may carry over
    one_round = len(smalls) * 1 + big_weight + 1
    order = drive(ops, 2 * one_round, batch)
    first = {t: order.index(t) for t in smalls}
    assert max(first.values()) < one_round, sorted(first.items(), key=lambda kv: -kv[1])[:5]
    # and the backfill still gets its weighted share of the round
    assert big_weight <= order[:one_round].count("backfill") <= big_weight + 1
    assert int(ops.r.xlen(ops.k.q(0, "default", "backfill", "normal"))) > BACKFILL - 1_000


# -- 4. caps ------------------------------------------------------------------------------


def _fill_to_cap(app: App, ops: Ops, held: list[Tok]) -> list[Tok]:
    """'capped' (max_in_flight=3) and 'other' share the ring; lease until capped
    is parked.  Returns capped's leases; every lease is added to ``held``."""
    app.tenants.set("capped", max_in_flight=3)
    fill(ops, "capped", 30, max_attempts=5)
    fill(ops, "other", 200)
    mine: list[Tok] = []
    for _ in range(12):
        for tok, t in lease(ops, 1):
            held.append(tok)
            if t == "capped":
                mine.append(tok)
        assert in_flight(ops, "capped") <= 3
    assert len(mine) == 3 and in_flight(ops, "capped") == 3
    assert "capped" not in ring(ops)
    assert ops.r.hget(ops.k.tenant(0, "capped"), "parked") == b"default|normal"
    return mine


def _next_leases(ops: Ops, held: list[Tok], count: int, batch: int = 1) -> Counter[str]:
    got: Counter[str] = Counter()
    for _ in range(count):
        for tok, t in lease(ops, batch):
            held.append(tok)
            got[t] += 1
        assert in_flight(ops, "capped") <= 3
    return got


@pytest.mark.parametrize("how", ["complete", "fail", "release", "reap"])
def test_a_capped_tenant_never_exceeds_its_cap_and_gets_one_more_per_ended_lease(
    app: App, ops: Ops, how: str
) -> None:
    held: list[Tok] = []
    mine = _fill_to_cap(app, ops, held)
    # while capped, the other tenant is served (single leases and batches alike)
    assert _next_leases(ops, held, 5) == Counter(other=5)
    assert _next_leases(ops, held, 2, batch=16) == Counter(other=32)

    one = mine[0]
    if how == "complete":
        assert ops.complete(WORKER, [one]) == [1]
    elif how == "fail":
        assert ops.fail(WORKER, one, delay=0) == "ready"  # retried at once
    elif how == "release":
        assert ops.release(WORKER, [one]) == 1
    else:
        # only this lease expires: every other one is renewed first
        ops.now += 1_000
        assert ops.heartbeat(WORKER, [t for t in held if t != one], ttl=TTL) == ([], [])
        ops.now += TTL - 1_000
        assert ops.reap(frac=0.0)[0] == 1
        assert ops.info(one.iid)["state"] == "ready"
    assert in_flight(ops, "capped") == 2
    assert "capped" in ring(ops)

    got = _next_leases(ops, held, 10)
    assert got["capped"] == 1 and got["other"] == 9
    assert in_flight(ops, "capped") == 3
    got = _next_leases(ops, held, 3, batch=16)
    assert got["capped"] == 0
    assert in_flight(ops, "capped") == 3


def test_a_cap_also_bounds_a_batch_and_every_ended_lease_frees_one_slot(app: App, ops: Ops) -> None:
    app.tenants.set("capped", max_in_flight=3)
    fill(ops, "capped", 40)
    # alone on the ring a batch of 16 gets only 3
    got = lease(ops, 16)
    assert len(got) == 3 and in_flight(ops, "capped") == 3
    assert lease(ops, 16) == []
    # three leases end three different ways: three slots come back
    toks = [tok for tok, _t in got]
    assert ops.complete(WORKER, [toks[0]]) == [1]
    assert ops.fail(WORKER, toks[1], retryable=False) == "dead"
    assert ops.release(WORKER, [toks[2]]) == 1
    got = lease(ops, 16)
    assert len(got) == 3 and in_flight(ops, "capped") == 3


def test_idle_tenants_are_not_on_the_ring_and_do_not_change_the_lease(app: App, ops: Ops) -> None:
    # 10,000 tenants with settings (what TenantStore.set writes) and no ready work
    idle = [f"idle{i:05d}" for i in range(10_000)]
    pipe = ops.r.pipeline(transaction=False)
    for i, t in enumerate(idle):
        pipe.hset(ops.k.tenant(0, t), mapping={"weight": str(1 + i % 5), "max_in_flight": "2"})
        pipe.zadd(ops.k.tenants(0), {t: 0})
    pipe.execute()
    app.tenants.set("idle00000", weight=7, rate="5/s")  # through the store as well
    # 100 of them once had work that drained: they must have left the ring
    for t in idle[:100]:
        fill(ops, t, 1)
    drained = lease(ops, 256)
    assert len(drained) == 100
    assert ops.complete(WORKER, [tok for tok, _t in drained]) == [1] * 100
    assert ring(ops) == []

    [iid] = fill(ops, "busy", 1)
    assert ring(ops) == ["busy"]
    [(tok, tenant)] = lease(ops, 16)
    assert (tok.iid, tenant) == (iid, "busy")
    assert ring(ops) == []
    for priority in ("high", "normal", "low"):
        assert ops.r.zcard(ops.k.ring(0, "default", priority)) == 0
        assert ops.r.zcard(ops.k.oldest(0, "default", priority)) == 0


# -- 5. rate limits ------------------------------------------------------------------------


def test_rate_limit_parks_the_tenant_until_its_next_token_is_due(app: App, ops: Ops) -> None:
    app.tenants.set("slow", rate="5/s", burst=5)
    fill(ops, "slow", 20)
    fill(ops, "other", 20)
    t0 = ops.now

    got = [t for _ in range(12) for _tok, t in lease(ops, 1)]
    assert got.count("slow") == 5  # the burst
    assert "slow" not in ring(ops)
    # parked in the timer set until the next token (1 / 5 per s = 200 ms)
    assert ops.r.zscore(ops.k.timers(0), "park:slow") == t0 + 200

    ops.now = t0 + 199
    assert ops.promote()[0] == 0
    assert ops.r.zscore(ops.k.timers(0), "park:slow") == t0 + 200
    assert [t for _ in range(3) for _tok, t in lease(ops, 1)] == ["other"] * 3

    ops.now = t0 + 200
    ops.promote()
    assert ops.r.zscore(ops.k.timers(0), "park:slow") is None
    assert "slow" in ring(ops)
    got = [t for _ in range(6) for _tok, t in lease(ops, 1)]
    assert got.count("slow") == 1  # exactly one token was due
    assert ops.r.zscore(ops.k.timers(0), "park:slow") == t0 + 400

    # a batch gets no more than the tokens: 2 s later the bucket is full again (5)
    ops.now = t0 + 2_400
    ops.promote()
    got = [t for _tok, t in lease(ops, 16)]
    assert got.count("slow") == 5


def test_rate_limit_alone_on_the_ring(app: App, ops: Ops) -> None:
    app.tenants.set("slow", rate="5/s", burst=5)
    fill(ops, "slow", 20)
    assert len(lease(ops, 16)) == 5
    assert lease(ops, 16) == []
    ops.now += 200
    ops.promote()
    assert len(lease(ops, 16)) == 1


# -- 6. aging ---------------------------------------------------------------------------------


def _eid_ms(ops: Ops, iid: str) -> int:
    loc = ops.info(iid)["loc"]
    assert loc.startswith("q:")
    return int(loc[2:].split("-")[0])


@pytest.mark.parametrize(("low_prio", "steps_to_top"), [("low", 2), ("normal", 1)])
def test_aged_work_climbs_one_class_per_threshold_under_a_stream_of_high_work(
    ops: Ops, low_prio: str, steps_to_top: int
) -> None:
    aging = 1_000
    [old] = fill(ops, "patient", 1, priority=low_prio)
    born = _eid_ms(ops, old)
    fill(ops, "loud", 5, priority="high")
    leased_at = None
    # a continuous stream of high work: one more arrives per lease, 50 ms apart
    for step in range(0, 3 * aging // 50 + 1):
        ops.now = born + step * 50
        fill(ops, "loud", 1, priority="high")
        [(tok, tenant)] = lease(ops, 1, aging_ms=aging)
        if tenant == "patient":
            assert tok.iid == old
            leased_at = ops.now - born
            break
        assert ops.complete(WORKER, [tok]) == [1]
    assert leased_at is not None, "the aged task was never leased"
    # served as high once it waited steps_to_top thresholds, not a moment before
    assert leased_at == steps_to_top * aging


def test_low_work_ages_past_normal_work_after_one_threshold(ops: Ops) -> None:
    aging = 1_000
    [old] = fill(ops, "patient", 1, priority="low")
    born = _eid_ms(ops, old)
    # the normal work must be younger, or it would itself age into high first
    server_ms_after(ops.r, born)
    [busy, *_] = fill(ops, "busy", 100, priority="normal")
    assert _eid_ms(ops, busy) > born
    ops.now = born + aging - 1
    assert [t for _ in range(5) for _tok, t in lease(ops, 1, aging_ms=aging)] == ["busy"] * 5
    ops.now = born + aging
    [(tok, tenant)] = lease(ops, 1, aging_ms=aging)
    assert (tok.iid, tenant) == (old, "patient")


def test_aging_is_not_blocked_by_a_capped_tenant_with_older_work(app: App, ops: Ops) -> None:
    """A tenant at its cap with the oldest low work must not hide other tenants'
    aged work from the aging index (one lease slot at a time)."""
    aging = 1_000
    app.tenants.set("capped", max_in_flight=1)
    fill(ops, "capped", 3, priority="low")
    [mine] = fill(ops, "patient", 1, priority="low")
    born = _eid_ms(ops, mine)
    ops.now = born
    [(held, t)] = lease(ops, 1, aging_ms=aging)  # capped takes its one slot
    assert t == "capped"
    fill(ops, "loud", 200, priority="high")
    leased_at = None
    for step in range(0, 3 * aging // 100 + 1):
        ops.now = born + step * 100
        [(_tok, tenant)] = lease(ops, 1, aging_ms=aging)
        assert tenant != "capped"
        if tenant == "patient":
            leased_at = ops.now - born
            break
    assert leased_at == 2 * aging
    assert in_flight(ops, "capped") == 1
    # new work of the parked tenant puts it back on the ring, and the aging
    # index on its oldest entry (not on the one just added)
    # (its oldest ready entry: the stream also holds its leased, pending one)
    leased = ops.pending("capped", priority="low")
    entries: Any = ops.r.xrange(ops.k.q(0, "default", "capped", "low"), count=10)
    head = next(eid.decode() for eid, _ in entries if eid.decode() not in leased)
    fill(ops, "capped", 1, priority="low")
    head_ms = int(head.split("-")[0])
    assert ops.r.zscore(ops.k.oldest(0, "default", "low"), "capped") == head_ms
    # the capped tenant's aged work is served (aged) as soon as its slot frees
    assert ops.complete(WORKER, [held]) == [1]
    [(_tok, tenant)] = lease(ops, 1, aging_ms=aging)
    assert tenant == "capped"


# -- 7. max_priority ---------------------------------------------------------------------------


def test_max_priority_clamps_what_a_tenant_may_ask_for(app: App, ops: Ops) -> None:
    app.tenants.set("bulk", max_priority="normal")
    clamped = app.enqueue("t.noop", _tenant="bulk", _priority="high")
    vip = app.enqueue("t.noop", _tenant="vip", _priority="high")
    low = app.enqueue("t.noop", _tenant="bulk", _priority="low")  # lower is allowed

    assert clamped.info().priority == "normal"
    assert low.info().priority == "low"
    k = ops.k
    assert ops.r.xlen(k.q(0, "default", "bulk", "high")) == 0
    assert ops.r.xlen(k.q(0, "default", "bulk", "normal")) == 1
    assert ring(ops, "high") == ["vip"]

    got = app.broker.leases.lease(0, WORKER, 1, 60_000, ["default"])
    assert [x.iid for x in got] == [vip.id]
    got = app.broker.leases.lease(0, WORKER, 16, 60_000, ["default"])
    assert [x.iid for x in got] == [clamped.id, low.id]
