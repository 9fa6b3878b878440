"""Concurrency keys in the lease script (lib/ckeys.lua): at most N instances of a
(tenant, task, key value) hold a lease at once, the others wait in order while
other keys' work flows past, and every way a lease ends frees its slot."""

from __future__ import annotations

import pytest
from lua_ops import Ops, Tok, new_id, row

from redcron.engine.argv import EnqueueRow
from redcron.errors import Rejected


def ck_row(ck: str, n: int = 1, *, tenant: str = "acme", **kw: object) -> EnqueueRow:
    return row(new_id(), tenant=tenant, **kw)._replace(ck=ck, ckn=n)  # type: ignore[arg-type]


def slots(ops: Ops, ck: str, tenant: str = "acme") -> list[str]:
    return sorted(m.decode() for m in ops.r.zrange(ops.k.ckslots(0, tenant, "job", ck), 0, -1))


def waiting(ops: Ops, ck: str, tenant: str = "acme") -> list[str]:
    return [m.decode() for m in ops.r.lrange(ops.k.ckwaiting(0, tenant, "job", ck), 0, -1)]


def test_enqueue_stores_the_key_and_its_cap(ops: Ops) -> None:
    r = ck_row("cust-1", 2)
    assert ops.enqueue(r) == 1
    h = ops.info(r.iid)
    assert (h["ck"], h["ckn"]) == ("cust-1", "2")
    plain = row(new_id())
    ops.enqueue(plain)
    assert "ck" not in ops.info(plain.iid)


def test_enqueue_refuses_a_bad_key(ops: Ops) -> None:
    with pytest.raises(Rejected, match="max_concurrent"):
        ops.enqueue(ck_row("k", 0))
    with pytest.raises(Rejected, match="concurrency key longer"):
        ops.enqueue(ck_row("x" * 201, 1))


def test_cap_holds_and_other_keys_flow_past(ops: Ops) -> None:
    a = [ck_row("A", 2) for _ in range(4)]
    b = [ck_row("B", 2) for _ in range(2)]
    plain = row(new_id())
    ops.enqueue(*a, *b, plain)  # A A A A B B plain, in stream order
    toks = ops.lease(n=10)
    got = {t.iid for t in toks}
    assert got == {a[0].iid, a[1].iid, b[0].iid, b[1].iid, plain.iid}
    assert slots(ops, "A") == sorted([a[0].iid, a[1].iid])
    assert waiting(ops, "A") == [a[2].iid, a[3].iid]
    assert ops.info(a[2].iid)["state"] == "waiting"
    assert ops.info(a[2].iid)["loc"] == "ckq"
    # nothing else to hand out: the waiters are not in the stream
    assert ops.lease(n=10) == []

    # one A lease ends: the first waiter (in order) gets the slot, the second waits
    by = {t.iid: t for t in toks}
    assert ops.complete("w1", [by[a[0].iid]]) == [1]
    assert ops.info(a[2].iid)["state"] == "ready"
    assert waiting(ops, "A") == [a[3].iid]
    # its reserved slot: a later arrival of the same key cannot overtake it
    late = ck_row("A", 2)
    ops.enqueue(late)
    nxt = ops.lease(n=10)
    assert [t.iid for t in nxt] == [a[2].iid]
    assert waiting(ops, "A") == [a[3].iid, late.iid]
    assert len(slots(ops, "A")) == 2


def test_fail_release_cancel_and_reap_free_the_slot(ops: Ops) -> None:
    rows = [ck_row("K", 1, max_attempts=5) for _ in range(5)]
    ops.enqueue(*rows)
    ids = [r.iid for r in rows]

    def holder() -> Tok:
        [t] = ops.lease(n=5)
        assert slots(ops, "K") == [t.iid]
        return t

    t0 = holder()
    assert t0.iid == ids[0]
    assert ops.fail("w1", t0, retryable=False) == "dead"
    t1 = holder()
    assert t1.iid == ids[1]
    assert ops.release("w1", [t1]) == 1  # handed back: ready again, behind the waiters
    t2 = holder()
    assert t2.iid == ids[2]
    ops.b.cancel(t2.iid)
    t3 = holder()
    assert t3.iid == ids[3]
    # expired and reaped (now passed in): retried later, the slot goes on
    ops.now += 5_000
    ops.reap()
    assert ops.info(t3.iid)["state"] == "retry_wait"
    t4 = holder()
    assert t4.iid == ids[4]
    assert waiting(ops, "K") == [ids[1]]


def test_cancel_of_a_waiter_and_of_a_woken_one(ops: Ops) -> None:
    rows = [ck_row("C", 1) for _ in range(3)]
    ops.enqueue(*rows)
    [t] = ops.lease(n=3)
    assert waiting(ops, "C") == [rows[1].iid, rows[2].iid]
    ops.b.cancel(rows[2].iid)  # a waiter leaves the list
    assert waiting(ops, "C") == [rows[1].iid]
    assert ops.info(rows[2].iid)["state"] == "cancelled"
    assert ops.complete("w1", [t]) == [1]
    # rows[1] is woken into the freed slot; cancelling it gives the slot back
    assert slots(ops, "C") == [rows[1].iid]
    ops.b.cancel(rows[1].iid)
    assert slots(ops, "C") == []
    assert ops.r.exists(ops.k.ckwaiting(0, "acme", "job", "C")) == 0


def test_keys_are_per_tenant(ops: Ops) -> None:
    a = ck_row("same", 1, tenant="acme")
    g = ck_row("same", 1, tenant="globex")
    ops.enqueue(a, g)
    assert {t.iid for t in ops.lease(n=5)} == {a.iid, g.iid}
    assert slots(ops, "same", "acme") == [a.iid]
    assert slots(ops, "same", "globex") == [g.iid]


def test_a_leaked_slot_is_pruned(ops: Ops) -> None:
    rows = [ck_row("L", 1) for _ in range(2)]
    ops.enqueue(*rows)
    [t] = ops.lease(n=1)
    # the holder's hash vanishes (a hand edit): its slot must not pin the key
    ops.r.delete(ops.k.ti(0, t.iid))
    ops.now += 5_000  # past the dead member's score
    # the lease does not prune (it stays small): the instance waits, and the
    # next promote prunes the leaked member and wakes it into the slot
    assert ops.lease(n=1) == []
    assert waiting(ops, "L") == [rows[1].iid]
    assert any(m.startswith("ckwake:") for m in timers(ops))
    ops.promote()
    assert slots(ops, "L") == [rows[1].iid]  # reserved for it
    [t2] = ops.lease(n=1)
    assert t2.iid == rows[1].iid
    assert slots(ops, "L") == [rows[1].iid]


def test_with_tenant_caps_and_drr(ops: Ops) -> None:
    tk = ops.k.tenant(0, "acme")
    ops.r.hset(tk, "max_in_flight", 2)
    a1, a2, p = ck_row("K", 1), ck_row("K", 1), row(new_id())
    g = row(new_id(), tenant="globex")
    ops.enqueue(a1, a2, p, g)
    toks = {t.iid: t for t in ops.lease(n=10)}
    assert set(toks) == {a1.iid, p.iid, g.iid}  # a2 waits for K; globex flows
    assert waiting(ops, "K") == [a2.iid]
    # the tenant cap now binds: a2, woken into K's slot, waits for the tenant
    ops.r.hset(tk, "max_in_flight", 1)
    assert ops.complete("w1", [toks[a1.iid]]) == [1]
    assert ops.info(a2.iid)["state"] == "ready" and slots(ops, "K") == [a2.iid]
    a3 = ck_row("K", 1)
    ops.enqueue(a3)
    assert ops.lease(n=10) == []  # acme at its cap (p in flight); K reserved for a2
    assert ops.complete("w1", [toks[p.iid]]) == [1]  # unparks acme
    [t2] = ops.lease(n=10)
    assert t2.iid == a2.iid  # the reservation keeps the order: not a3
    assert ops.info(a3.iid)["state"] == "ready"  # not read: the tenant's room went to a2
    assert ops.complete("w1", [t2]) == [1]
    assert [t.iid for t in ops.lease(n=10)] == [a3.iid]


def timers(ops: Ops) -> list[str]:
    return [m.decode() for m in ops.r.zrange(ops.k.timers(0), 0, -1)]


def test_a_missed_wake_is_left_to_promote(ops: Ops) -> None:
    # a slot freed without waking its waiter (here: a hand edit of the slots, as a
    # prune or a raised cap leaves it): the lease call that finds free slots with
    # waiters ahead does not wake them itself (lease.lua stays small) but asks
    # promote to, through a ckwake: timer due at once
    rows = [ck_row("M", 1) for _ in range(3)]
    ops.enqueue(*rows[:2])
    [t] = ops.lease(n=2)
    assert waiting(ops, "M") == [rows[1].iid]
    ops.r.zrem(ops.k.ckslots(0, "acme", "job", "M"), t.iid)  # the slot, freed by hand
    ops.enqueue(rows[2])
    assert ops.lease(n=2) == []  # rows[2] queues behind the waiter, in order
    assert waiting(ops, "M") == [rows[1].iid, rows[2].iid]
    [wake] = [m for m in timers(ops) if m.startswith("ckwake:")]
    assert wake == 'ckwake:["acme","job","M","1"]'
    assert ops.promote()[0] == 0  # not an instance: nothing counted as promoted
    assert timers(ops) == []
    assert waiting(ops, "M") == [rows[2].iid]
    assert slots(ops, "M") == [rows[1].iid]  # woken into the free slot, reserved
    [t1] = ops.lease(n=2)
    assert t1.iid == rows[1].iid


def test_a_woken_waiter_set_aside_gives_its_slot_back(ops: Ops) -> None:
    rows = [ck_row("G", 1) for _ in range(3)]
    ops.enqueue(*rows)
    [t] = ops.lease(n=3)
    assert ops.complete("w1", [t]) == [1]
    assert slots(ops, "G") == [rows[1].iid]  # woken, its slot reserved
    ops.r.hset(ops.k.ti(0, rows[1].iid), "epoch", "x")  # edited by hand: unusable
    assert ops.lease(n=3) == []
    assert ops.info(rows[1].iid)["state"] == "retry_wait"  # quarantined
    assert slots(ops, "G") == []  # the reservation went back at once
    assert any(m.startswith("ckwake:") for m in timers(ops))
    ops.promote()  # wakes the next waiter into it (and dead-letters the bad one)
    assert ops.info(rows[1].iid)["state"] == "dead"
    assert slots(ops, "G") == [rows[2].iid]
    [t2] = ops.lease(n=3)
    assert t2.iid == rows[2].iid
