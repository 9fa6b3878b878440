"""Invariant 4, property-style: after any sequence of operations every instance is
in exactly one place, and that place is the one its hash records.

Also checks invariants 3 (a stale token never writes) and 5 (an attempt's
recorded outcome never changes) along the way.  Scripts get an explicit ``now``.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lua_ops import Ops, Tok, new_id, row

from redcron.config import Settings
from redcron.engine import Broker

TENANTS = ("acme", "globex", "initech")
QUEUES = ("default", "gpu")
PRIOS = ("high", "normal", "low")
WORKERS = ("w0", "w1")
MIN_TTL = 100  # ms, the deployment's minimum lease TTL in these examples
MAX = 2**62
STATES = {
    "ready", "scheduled", "retry_wait", "leased", "running", "dead", "succeeded", "cancelled",
    "waiting",
}  # fmt: skip
#: concurrency keys (lib/ckeys.lua): "" = none; a key's cap N is fixed per key here
CKEYS = {"": 0, "k1": 1, "k2": 2}
#: rate limits (lib/rate.lua): "" = none; (starts, unit ms, group) per name
RATES = {"": None, "r1": (2, 1000, "g"), "r2": (1, 400, "")}


class Model:
    """What the test knows: ids, every token ever handed out, outcomes seen."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.tokens: list[Tok] = []
        self.outcomes: dict[tuple[str, int], str] = {}


def _d(x: bytes) -> str:
    return x.decode()


def check(ops: Ops, model: Model) -> None:
    r, k, s = ops.r, ops.k, ops.shard
    # a stream entry is ready (undelivered) or leased (pending in the group)
    in_streams: dict[str, list[tuple[str, str]]] = {}
    leases: dict[str, list[tuple[str, str]]] = {}
    for q in QUEUES:
        for t in TENANTS:
            for p in PRIOS:
                key = k.q(s, q, t, p)
                pending = ops.pending(t, q, p)
                for eid, fields in r.xrange(key):
                    where = leases if _d(eid) in pending else in_streams
                    where.setdefault(_d(fields[b"i"]), []).append((key, _d(eid)))
                assert set(pending) <= {_d(eid) for eid, _ in r.xrange(key)}, "pending, deleted"
    reaper = {_d(m): int(sc) for m, sc in r.zrange(k.pending(s), 0, -1, withscores=True)}
    # a concurrency key's ckwake: member (promote prunes and wakes it) is no instance
    timers = {
        _d(m): int(sc)
        for m, sc in r.zrange(k.timers(s), 0, -1, withscores=True)
        if not m.startswith(b"ckwake:")
    }
    tenant_leases: dict[str, tuple[str, int]] = {}
    in_dlq: dict[str, list[str]] = {}
    for t in TENANTS:
        for m, sc in r.zrange(k.leases(s, t), 0, -1, withscores=True):
            assert _d(m) not in tenant_leases, f"{_d(m)} in two tenant lease sets"
            tenant_leases[_d(m)] = (t, int(sc))
        for eid, fields in r.xrange(k.dlq(s, t)):
            in_dlq.setdefault(_d(fields[b"i"]), []).append(_d(eid))
    known = set(model.ids)
    for where in (in_streams, timers, leases, tenant_leases, in_dlq):
        assert set(where) <= known, f"unknown ids in {where}"
    # concurrency keys: never more than N slots held (valid leases, or a woken
    # waiter's reservation), waiters only while every slot is held (none leaked)
    slots: dict[str, tuple[str, str]] = {}
    waiters: dict[str, list[tuple[str, str]]] = {}
    for t in TENANTS:
        for ck, cap in CKEYS.items():
            if not ck:
                continue
            held = [_d(m) for m in r.zrange(k.ckslots(s, t, "job", ck), 0, -1)]
            queued = [_d(m) for m in r.lrange(k.ckwaiting(s, t, "job", ck), 0, -1)]
            assert len(held) <= cap, (t, ck, held)
            assert not queued or len(held) == cap, ("a slot is free with waiters", t, ck)
            assert len(set(queued)) == len(queued), (t, ck, queued)
            for m in held:
                slots[m] = (t, ck)
            for m in queued:
                waiters.setdefault(m, []).append((t, ck))
    assert set(slots) <= known and set(waiters) <= known

    for iid in model.ids:
        h = ops.info(iid)
        state, loc = h["state"], h.get("loc", "")
        tenant, queue, priority = h["tenant"], h["queue"], h["priority"]
        assert state in STATES, (iid, state)
        places = []
        if iid in in_streams:
            places.append("stream")
        if iid in timers:
            places.append("timers")
        if iid in leases or iid in tenant_leases:
            places.append("lease")
        if iid in in_dlq:
            places.append("dlq")
        if iid in waiters:
            places.append("ckq")
        ck = h.get("ck", "")
        if state in ("leased", "running") and ck:
            assert slots.get(iid) == (tenant, ck), ("a lease without its slot", iid, h)
        if iid in slots:
            # a slot is a lease of its key, or a woken waiter's reservation (one
            # whose task has a rate keeps it while it waits for its turn)
            holding = ("leased", "running", "ready", *(("scheduled",) if "rate_ms" in h else ()))
            assert state in holding and slots[iid] == (tenant, ck), (iid, h)
        expected = {
            "ready": ["stream"],
            "scheduled": ["timers"],
            "retry_wait": ["timers"],
            "leased": ["lease"],
            "running": ["lease"],
            "dead": ["dlq"],
            "succeeded": [],
            "cancelled": [],
            "waiting": ["ckq"],
        }[state]
        assert places == expected, (iid, state, places, h)
        if state == "ready":
            assert in_streams.get(iid) == [(k.q(s, queue, tenant, priority), loc[2:])], (iid, h)
            assert loc.startswith("q:")
            # the tenant is on its ring, or this ready work would never be handed out
            assert r.zscore(k.ring(s, queue, priority), tenant) is not None, (iid, h)
        elif state in ("scheduled", "retry_wait"):
            assert loc == "timer"
            assert timers.get(iid) == int(h["due"]), (iid, h)
        elif state in ("leased", "running"):
            assert loc == "lease"
            stream = k.q(s, queue, tenant, priority)
            assert leases.get(iid) == [(stream, h["lease_entry"])], (iid, h)
            assert tenant_leases.get(iid) == (tenant, int(h["deadline"])), (iid, h)
            # the reaper looks at the stream within one minimum TTL of the deadline
            assert reaper.get(stream, MAX) <= int(h["deadline"]) + MIN_TTL, (iid, h, reaper)
        elif state == "dead":
            assert in_dlq.get(iid) == [loc[4:]] and loc.startswith("dlq:"), (iid, h)
        elif state == "waiting":
            assert loc == "ckq" and waiters[iid] == [(tenant, ck)], (iid, h)
        else:
            assert loc == ""
        # invariant 3/5 bookkeeping: one lease per attempt, every ended attempt recorded once
        attempt = int(h["attempt"])
        assert int(h["epoch"]) == attempt
        for n in range(1, attempt + 1):
            field = f"a:{n}:outcome"
            if n == attempt and state in ("leased", "running"):
                assert field not in h, (iid, h)
                continue
            if n == attempt and state == "succeeded":
                # its outcome is the instance's state (TaskRecord fills it in)
                assert field not in h, (iid, h)
                assert model.outcomes.setdefault((iid, n), "succeeded") == "succeeded", (iid, n)
                continue
            assert field in h, (iid, n, h)
            seen = model.outcomes.setdefault((iid, n), h[field])
            assert seen == h[field], f"attempt {n} of {iid} ended twice"
        assert all(int(f.split(":")[1]) <= attempt for f in h if f.startswith("a:")), h
    # no tenant sits on a ring without ready work there (it would cost every lease a visit)
    for q in QUEUES:
        for p in PRIOS:
            for t in r.zrange(k.ring(s, q, p), 0, -1):
                assert ops.ready(_d(t), q, p) > 0, (q, p, t)
    # a rate's bucket never holds more than n releases in one unit (lib/rate.lua)
    for t in TENANTS:
        for n, unit, group in filter(None, RATES.values()):
            got = r.zrange(k.rate(s, t, "job", group), 0, -1, withscores=True)
            at = sorted(int(sc) for m, sc in got if m != b"next")
            assert all(b - a >= unit for a, b in zip(at, at[n:], strict=False)), (t, group, at)


def _current(ops: Ops, tok: Tok) -> bool:
    h = ops.info(tok.iid)
    return (
        h["state"] in ("leased", "running")
        and h.get("worker") == tok.worker
        and h["epoch"] == tok.epoch
    )


def _rated(rate: tuple[int, int, str] | None) -> dict[str, Any]:
    """An enqueue row's rate fields (lib/rate.lua) for one of RATES."""
    if rate is None:
        return {}
    n, unit_ms, group = rate
    return {"rate_n": n, "rate_ms": unit_ms, "rate_key": "c" if group else "", "rate_group": group}


def apply(ops: Ops, model: Model, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "enqueue":
        _, ti, qi, pi, delay, max_attempts, ck, *more = op
        rate = RATES[more[0] if more else ""]
        iid = new_id()
        model.ids.append(iid)
        ops.enqueue(
            row(
                iid,
                tenant=TENANTS[ti],
                queue=QUEUES[qi],
                priority=PRIOS[pi],
                max_attempts=max_attempts,
                base=200,
                cap=800,
                delay=delay,
            )._replace(ck=ck, ckn=CKEYS[ck], **_rated(rate))
        )
    elif kind == "lease":
        _, wi, n, ttl, qmask, tfilter = op
        queues = [q for i, q in enumerate(QUEUES) if qmask & (1 << i)] or ["default"]
        tenants = [TENANTS[tfilter]] if tfilter is not None else []
        model.tokens += ops.lease(WORKERS[wi], n=n, ttl=ttl, queues=queues, tenants=tenants)
    elif kind == "tick":
        ops.now += op[1]
        ops.reap(frac=op[2])
    elif kind == "promote":
        ops.promote()
    elif kind in ("cancel", "replay", "discard"):
        if not model.ids:
            return
        if kind == "cancel":
            ops.b.cancel(model.ids[op[1] % len(model.ids)])
        else:
            # mostly replay/discard dead work (the interesting case), sometimes anything
            dead = [i for i in model.ids if ops.info(i)["state"] == "dead"] or model.ids
            pick = [dead[op[1] % len(dead)]]
            (ops.b.dlq.replay if kind == "replay" else ops.b.dlq.discard)(pick)
    else:
        if not model.tokens:
            return
        tok = model.tokens[op[1] % len(model.tokens)]
        valid = _current(ops, tok)
        before = ops.r.hgetall(ops.k.ti(0, tok.iid))
        if kind == "complete":
            ok = ops.complete(tok.worker, [tok]) == [1]
        elif kind == "fail":
            _, _, outcome, retryable, delay, frac = op
            ok = (
                ops.fail(
                    tok.worker, tok, outcome=outcome, retryable=retryable, delay=delay, frac=frac
                )
                != 0
            )
        elif kind == "heartbeat":
            # renewed: neither lost nor revoked (a cancelled lease is revoked, not renewed)
            ok = ops.heartbeat(tok.worker, [tok], ttl=op[2]) == ([], [])
        elif kind == "start":
            ops.start(tok.worker, [tok])
            ok = valid
        else:
            ok = ops.release(tok.worker, [tok]) == 1
        assert ok == valid, (kind, tok)
        if not valid:
            assert ops.r.hgetall(ops.k.ti(0, tok.iid)) == before, f"stale {kind} wrote"


idx = st.integers(min_value=0, max_value=50)
frac = st.sampled_from([0.0, 0.3, 0.999])
operation = st.one_of(
    st.tuples(
        st.just("lease"),
        st.integers(0, 1),
        st.integers(1, 4),
        st.sampled_from([200, 1000]),
        st.integers(0, 3),
        st.one_of(st.none(), st.integers(0, 2)),
    ),
    st.tuples(
        st.just("enqueue"),
        st.integers(0, 2),
        st.integers(0, 1),
        st.integers(0, 2),
        st.sampled_from([0, 0, 300]),
        st.integers(1, 3),
        st.sampled_from(["", "k1", "k1", "k1", "k2", "k2"]),
        st.sampled_from(["", "", "r1", "r2"]),
    ),
    st.tuples(
        st.just("lease"),
        st.integers(0, 1),
        st.integers(1, 4),
        st.sampled_from([200, 1000]),
        st.integers(0, 3),
        st.one_of(st.none(), st.integers(0, 2)),
    ),
    st.tuples(st.just("complete"), idx),
    st.tuples(
        st.just("fail"),
        idx,
        st.sampled_from(["failed", "timed_out", "cancelled"]),
        st.booleans(),
        st.sampled_from([None, None, 0, 250]),
        frac,
    ),
    st.tuples(st.just("heartbeat"), idx, st.sampled_from([200, 1000])),
    st.tuples(st.just("start"), idx),
    st.tuples(st.just("release"), idx),
    st.tuples(st.just("cancel"), idx),
    st.tuples(st.just("replay"), idx),
    st.tuples(st.just("discard"), idx),
    st.tuples(st.just("tick"), st.sampled_from([0, 150, 400, 1200]), frac),
    st.tuples(st.just("promote")),
)


# many Redis round trips per example: well under a minute alone, but a busy
# 2-core machine can stretch it past the suite-wide 120 s per test
@pytest.mark.timeout(600)
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(operation, min_size=10, max_size=50))
def test_every_instance_is_in_exactly_one_place(
    redis_url: str, key_prefix: str, ops_list: list[tuple[Any, ...]]
) -> None:
    # one sub-prefix per example, under the fixture's prefix so it is cleaned up
    prefix = f"{key_prefix}{uuid.uuid4().hex[:6]}"
    broker = Broker(Settings(redis_url=redis_url, prefix=prefix, min_lease_ttl=MIN_TTL / 1000))
    try:
        ops = Ops(broker)
        model = Model()
        # a little ready and scheduled work in every example, so leases happen early
        seed = [
            (
                "enqueue",
                i % 3,
                i % 2,
                i % 3,
                300 if i == 5 else 0,
                1 + i % 3,
                ("k1", "k2")[i % 2],
                ("", "r1", "r2")[i % 3],
            )
            for i in range(6)
        ]
        for op in [*seed, ("lease", 0, 2, 200, 3, None), *ops_list]:
            apply(ops, model, op)
            check(ops, model)
    finally:
        broker.close()
