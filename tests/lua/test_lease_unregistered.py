"""A worker leases only the tasks it registered (issue 29 §3, lib/take.lua): an
entry of another task stays ready, its attempts and budget untouched, under a
fresh entry at its stream's tail, for a worker that registers it; a lease call
moves at most SKIP_MAX + one batch of them, and says which names it moved past."""

from __future__ import annotations

from lua_ops import Ops, new_id, row

from redcron.engine.argv import EnqueueRow

#: lib/take.lua's SKIP_MAX
SKIP_MAX = 64


def task(name: str, *, tenant: str = "acme") -> EnqueueRow:
    return row(new_id(), tenant=tenant)._replace(name=name)


def skipped_names(reply: list[list[bytes]]) -> list[str]:
    return sorted(r[0].decode() for r in reply if len(r) == 1)


def wake_tokens(ops: Ops) -> int:
    return int(ops.r.llen(ops.k.wake(0, "default")))


def test_an_unregistered_task_stays_ready_with_no_attempt_spent(ops: Ops) -> None:
    resize, mine, resize2 = task("shop.resize"), task("job"), task("shop.resize")
    ops.enqueue(resize, mine, resize2)
    before = ops.info(resize.iid)
    ops.r.delete(ops.k.wake(0, "default"))

    reply = ops.lease_raw("w1", 10, tasks=["job"])
    assert [r[0].decode() for r in reply if len(r) > 1] == [mine.iid]
    assert skipped_names(reply) == ["shop.resize"]  # once, however many entries
    for iid in (resize.iid, resize2.iid):
        h = ops.info(iid)
        assert h["state"] == "ready"
        assert (h.get("attempt", "0"), h.get("epoch", "0")) == ("0", "0")
        assert not any(f.startswith("a:") for f in h)  # no attempt record
        assert h.get("budget") == before.get("budget")
    after = ops.info(resize.iid)
    assert {k: v for k, v in after.items() if k != "loc"} == {
        k: v for k, v in before.items() if k != "loc"
    }
    # a fresh entry at the stream's tail; the old one is gone
    entries = [(e.decode(), f) for e, f in ops.r.xrange(ops.stream())]
    ready_ids = [f[b"i"].decode() for e, f in entries if e not in ops.pending()]
    assert ready_ids == [resize.iid, resize2.iid]
    assert after["loc"] == "q:" + next(e for e, f in entries if f[b"i"] == resize.iid.encode())
    assert after["loc"] != before["loc"]
    assert ops.ready() == 2
    # the first move of each woke an idle worker of the queue (one that has it)
    assert wake_tokens(ops) == 2

    # asked again, the same worker moves them again, wakes nobody, spends nothing
    ops.r.delete(ops.k.wake(0, "default"))
    reply = ops.lease_raw("w1", 10, tasks=["job"])
    assert [r for r in reply if len(r) > 1] == []
    assert skipped_names(reply) == ["shop.resize"]
    assert wake_tokens(ops) == 0
    assert ops.info(resize.iid)["state"] == "ready"

    # a worker that registers it gets both, in order, as first attempts
    got = ops.lease("w2", 10, tasks=["job", "shop.resize"])
    assert [(t.iid, t.attempt) for t in got] == [(resize.iid, 1), (resize2.iid, 1)]
    assert ops.complete("w2", got) == [1, 1]


def test_no_task_set_leases_every_task(ops: Ops) -> None:
    # an HTTP worker's lease (and any caller passing no set) is as before
    other = task("shop.resize")
    ops.enqueue(other)
    reply = ops.lease_raw("w1", 10)
    assert [r[0].decode() for r in reply] == [other.iid]


def test_an_empty_task_set_leases_nothing(ops: Ops) -> None:
    ops.enqueue(task("job"))
    reply = ops.lease_raw("w1", 10, tasks=[])
    assert skipped_names(reply) == ["job"]
    assert ops.ready() == 1


def test_the_unregistered_head_does_not_block_the_tenants_other_work(ops: Ops) -> None:
    head = task("shop.resize")
    mine = [task("job") for _ in range(3)]
    ops.enqueue(head, *mine)
    got = ops.lease("w1", 3, tasks=["job"])
    assert [t.iid for t in got] == [m.iid for m in mine]
    assert ops.info(head.iid)["state"] == "ready"


def test_one_call_moves_a_bounded_number_of_entries(ops: Ops) -> None:
    # 300 tenants whose only work is a task nobody here registered, and one with
    # work this worker runs, at the ring's tail
    tenants = [f"t{i:03d}" for i in range(300)]
    ops.enqueue(*(task("shop.resize", tenant=t) for t in tenants))
    last = task("job", tenant="zz")
    ops.enqueue(last)
    entry_ids = {t: ops.r.xrange(ops.stream(t))[0][0] for t in tenants}

    def moved() -> int:
        return sum(1 for t in tenants if ops.r.xrange(ops.stream(t))[0][0] != entry_ids[t])

    reply = ops.lease_raw("w1", 8, tasks=["job"])
    assert skipped_names(reply) == ["shop.resize"]
    first = moved()
    assert 0 < first <= SKIP_MAX + 8, first
    # skipped tenants went to the ring's tail: later calls reach the one with work
    leased: list[str] = []
    for _ in range(20):
        leased += [r[0].decode() for r in ops.lease_raw("w1", 8, tasks=["job"]) if len(r) > 1]
        if leased:
            break
    assert leased == [last.iid]
    for t in tenants:
        assert ops.ready(t) == 1  # every one still ready, nothing spent


def test_a_woken_concurrency_key_waiter_moved_past_gives_its_slot_back(ops: Ops) -> None:
    rows = [task("job")._replace(ck="K", ckn=1) for _ in range(2)]
    ops.enqueue(*rows)
    [t] = ops.lease("w1", 2, tasks=["job"])
    assert ops.complete("w1", [t]) == [1]  # rows[1] woken into the slot, reserved
    slots = ops.k.ckslots(0, "acme", "job", "K")
    assert [m.decode() for m in ops.r.zrange(slots, 0, -1)] == [rows[1].iid]
    # a worker without "job" moves it past: the reservation goes back at once
    ops.lease_raw("w9", 2, tasks=["other"])
    assert ops.r.zcard(slots) == 0
    assert ops.info(rows[1].iid)["state"] == "ready"
    ops.promote()  # wakes nobody (no waiter), the slot stays free
    [t2] = ops.lease("w1", 2, tasks=["job"])
    assert t2.iid == rows[1].iid and t2.attempt == 1
