"""XAUTOCLAIM as the lease reaper: the bound on how late an expired lease is reaped.

Workers with different TTLs share a stream; each heartbeats its leases until
it dies; the reaper runs once per maintenance interval.  With the scripts on
the test's clock (``now`` passed in, delivery times stamped), every lease is
reaped no earlier than its own deadline and no later than
``deadline + minimum TTL + maintenance interval``.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lua_ops import T0, Ops, Tok, new_id, row

from redcron.config import Settings
from redcron.engine import Broker
from redcron.keys import GROUP, MAINT_REAP_TTL

MIN_TTL = 100  # ms
INTERVAL = 50  # ms between reaper passes

worker_plan = st.tuples(
    st.sampled_from([MIN_TTL, 250, 1000]),  # the worker's lease TTL
    st.integers(min_value=1, max_value=3),  # leases it takes
    st.integers(min_value=0, max_value=1500),  # when it dies (ms after T0)
    st.sampled_from(["acme", "globex"]),  # whose work it leases
)


# many Redis round trips per example: well under a minute alone, but a busy
# 2-core machine can stretch it past the suite-wide 120 s per test
@pytest.mark.timeout(600)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    plans=st.lists(worker_plan, min_size=1, max_size=3),
    phase=st.sampled_from(range(0, INTERVAL, 10)),
)
def test_every_expired_lease_is_reaped_within_min_ttl_plus_interval(
    redis_url: str, key_prefix: str, plans: list[tuple[int, int, int, str]], phase: int
) -> None:
    prefix = f"{key_prefix}{uuid.uuid4().hex[:6]}"
    broker = Broker(Settings(redis_url=redis_url, prefix=prefix, min_lease_ttl=MIN_TTL / 1000))
    try:
        ops = Ops(broker)
        workers: list[tuple[str, int, int, list[Tok]]] = []
        for w, (ttl, count, death, tenant) in enumerate(plans):
            ops.enqueue(*(row(new_id(), tenant=tenant) for _ in range(count)))
            toks = ops.lease(f"w{w}", n=count, ttl=ttl, tenants=[tenant])
            workers.append((f"w{w}", ttl, T0 + death, toks))
        deadline = {t.iid: T0 + ttl for _, ttl, _, toks in workers for t in toks}
        reaped_at: dict[str, int] = {}
        end = T0 + 1500 + 1000 + MIN_TTL + 2 * INTERVAL
        for now in range(T0, end, 10):
            ops.now = now
            for name, ttl, death, toks in workers:
                # each worker heartbeats every TTL/6 while it lives
                live = [t for t in toks if t.iid not in reaped_at]
                if now < death and (now - T0) % max(10, ttl // 6 // 10 * 10) == 0 and live:
                    lost, _ = ops.heartbeat(name, live, ttl=ttl)
                    assert lost == []  # a live worker never loses a lease
                    for t in live:
                        deadline[t.iid] = now + ttl
            if (now - T0 - phase) % INTERVAL == 0:
                ops.reap()
                for iid in deadline:
                    if iid not in reaped_at and ops.info(iid)["state"] != "leased":
                        reaped_at[iid] = now
        for iid, at in reaped_at.items():
            assert at >= deadline[iid], (iid, at, deadline[iid])  # never a live lease
            assert at <= deadline[iid] + MIN_TTL + INTERVAL, (iid, at - deadline[iid])
        assert set(reaped_at) == set(deadline)  # every worker died: every lease reaped
        assert ops.pending("acme") == {} and ops.pending("globex") == {}
        assert ops.r.zcard(ops.k.pending(0)) == 0  # nothing pending: the index is empty
    finally:
        broker.close()


def test_a_long_lease_is_looked_at_without_being_reaped(ops: Ops) -> None:
    """A lease with a TTL far above the minimum is a reaper candidate once idle
    for the minimum TTL; its own deadline keeps it."""
    iid = new_id()
    ops.enqueue(row(iid))
    [t] = ops.lease("w1", ttl=10_000)
    ops.r.zadd(ops.k.pending(0), {ops.stream(): T0})  # due for a look now
    ops.now += 5_000
    # looked at again one minimum TTL (100 ms) later, less the reaper's slack (10 ms)
    assert ops.reap() == [0, ops.now + 90, 0, 0]
    assert ops.info(iid)["state"] == "leased"
    assert ops.complete("w1", [t]) == [1]
    assert ops.pending() == {}


def test_a_live_lease_looked_at_just_before_its_deadline_is_reaped_at_the_next_look(
    ops: Ops,
) -> None:
    """The reaper's min-idle for a stream is its shortest lease TTL less a slack,
    so it may look at a live lease just before its deadline.  That look claims
    the entry (idle 0): the reaper then back-dates it so that it turns candidate
    at its own deadline, not one stream TTL later (which for a long TTL would be
    far past the bound)."""
    iid = new_id()
    ops.enqueue(row(iid))
    [t] = ops.lease("w1", ttl=1000)  # the stream's shortest TTL: 1000 ms
    stream = ops.stream()
    assert ops.r.hget(ops.k.maintenance(0), MAINT_REAP_TTL + stream) == b"1000"
    ops.now = T0 + 985  # within the slack (2 x 10 ms) of the 1000 ms min-idle
    ops.r.zadd(ops.k.pending(0), {stream: ops.now})  # due for a look now
    assert ops.reap() == [0, ops.now + 90, 0, 0]  # looked at, live: left alone
    assert ops.info(iid)["state"] == "leased"
    ops.now += 90  # the next look, 75 ms past the deadline
    assert ops.reap()[0] == 1
    assert ops.info(iid)["state"] != "leased"
    assert ops.r.zscore(ops.k.pending(0), stream) is None
    # gone with the stream's entry
    assert ops.r.hget(ops.k.maintenance(0), MAINT_REAP_TTL + stream) is None
    assert t.iid == iid


def test_a_live_lease_with_a_long_ttl_is_not_a_candidate_between_heartbeats(ops: Ops) -> None:
    """Heartbeats stamp the entry every TTL/6: with the stream's own TTL as
    min-idle, the reaper's XAUTOCLAIM passes it over without claiming or
    reading it (with the minimum TTL as min-idle it was claimed and read every
    minimum TTL)."""
    iid = new_id()
    ops.enqueue(row(iid))
    [t] = ops.lease("w1", ttl=6000)
    stream = ops.stream()
    eid = ops.info(iid)["lease_entry"]
    for beat in range(1, 6):
        ops.now = T0 + beat * 1000
        ops.r.zadd(ops.k.pending(0), {stream: ops.now})  # due for a look now
        assert ops.reap()[0] == 0
        # not claimed: its delivery time is still the last heartbeat's (a claim
        # would have stamped this look's now, 1000 ms later)
        [entry] = ops.r.xpending_range(stream, GROUP, "-", "+", 10)
        assert entry["message_id"].decode() == eid
        sec, usec = ops.r.time()
        delivered = sec * 1000 + usec // 1000 - entry["time_since_delivered"]
        assert abs(delivered - (ops.now - 1000)) < 500, (delivered, ops.now)
        assert ops.heartbeat("w1", [t], ttl=6000) == ([], [])
    assert ops.r.hget(ops.k.maintenance(0), MAINT_REAP_TTL + stream) == b"6000"
    assert ops.complete("w1", [t]) == [1]
