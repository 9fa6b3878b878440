"""Instance hashes and ready streams edited by hand (redis-cli): lease.lua must
keep serving the rest of the shard.  An instance no lease can use goes off its
stream onto the timers, and the next promote dead-letters it with an error that
names the field (once: it is never leased again); a stream without its consumer
group gets one, and what is in it is delivered."""

from __future__ import annotations

from typing import Any

import pytest
from lua_ops import Ops, new_id, row

from redcron.keys import GROUP

BAD = [
    ({"epoch": "abc"}, "epoch 'abc' is not a number"),
    ({"attempt": "x"}, "attempt 'x' is not a number"),
    ({"epoch": "1.5"}, "epoch '1.5' is not a whole number"),
    ({"attempt": "inf"}, "attempt 'inf' is not a whole number"),
    ({"epoch": None}, "epoch is missing"),
    ({"timeout_ms": "soon"}, "timeout_ms 'soon' is not a number"),
    ({"name": None}, "name is missing"),
    ({"name": ""}, "name is empty"),
    ({"kind": None}, "kind is missing"),
    ({"args": None}, "args is missing"),
]


def edit(ops: Ops, iid: str, change: dict[str, Any]) -> None:
    key = ops.k.ti(0, iid)
    for field, value in change.items():
        if value is None:
            ops.r.hdel(key, field)
        else:
            ops.r.hset(key, field, value)


@pytest.mark.parametrize(("change", "why"), BAD)
def test_an_unusable_hash_is_dead_lettered_once_and_the_batch_goes_on(
    ops: Ops, change: dict[str, Any], why: str
) -> None:
    # before: arithmetic on nil failed every lease call of the shard (epoch,
    # attempt), or the row came back cut short and the worker skipped it with a
    # warning, leased again after every reap, forever (name, timeout_ms...)
    good1, bad, good2 = new_id(), new_id(), new_id()
    ops.enqueue(row(good1), row(bad), row(good2))
    edit(ops, bad, change)
    toks = ops.lease("w1", n=5)
    assert [t.iid for t in toks] == [good1, good2]
    info = ops.info(bad)
    assert (info["state"], info["loc"], info["malformed"]) == ("retry_wait", "timer", "1")
    # lease.lua only sets it aside; promote says why (lib/quarantine.lua)
    assert info["error"] == "malformed task record"
    assert ops.ready() == 0 and len(ops.pending()) == 2  # its entry is gone
    assert ops.complete("w1", toks) == [1, 1]
    assert ops.promote() == [0, -1]  # dead-lettered, not promoted
    info = ops.info(bad)
    assert info["state"] == "dead" and "malformed" not in info
    assert info["error"] == f"malformed task record: {why}; fix or discard it"
    [(eid, entry)] = ops.r.xrange(ops.k.dlq(0, "acme"))
    assert info["loc"] == f"dlq:{eid.decode()}"
    assert entry[b"i"].decode() == bad and entry[b"outcome"] == b"malformed"
    assert entry[b"error"].decode() == info["error"]
    assert ops.r.hget(ops.k.counters(0), "dead") == b"1"
    # never leased again, shown once
    ops.now += 60_000
    assert ops.lease("w1", n=5) == [] and ops.promote() == [0, -1]
    assert ops.r.xlen(ops.k.dlq(0, "acme")) == 1
    [listed] = ops.b.dlq.list("acme")
    assert listed.task_id == bad and listed.outcome == "malformed"
    # replayed unfixed: dead-lettered again; fixed: it runs
    assert ops.b.dlq.replay([bad]) == 1
    assert ops.lease("w1") == []
    assert ops.promote() == [0, -1] and ops.info(bad)["state"] == "dead"
    edit(ops, bad, {"epoch": "0", "attempt": "0", "timeout_ms": "0", "name": "job",
                    "kind": "python", "args": b"\x90"})  # fmt: skip
    assert ops.b.dlq.replay([bad]) == 1
    [t] = ops.lease("w1")
    assert t.iid == bad and ops.complete("w1", [t]) == [1]


def test_a_hash_fixed_before_promote_is_made_ready_again(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    edit(ops, iid, {"epoch": "abc"})
    assert ops.lease("w1") == []
    edit(ops, iid, {"epoch": "7"})
    assert ops.promote() == [1, -1]
    assert "malformed" not in ops.info(iid)
    [t] = ops.lease("w1")
    assert (t.iid, t.epoch) == (iid, "8")
    # a later retry of the fixed instance is promoted, not dead-lettered
    assert ops.fail("w1", t, delay=10) == "retry_wait"
    ops.now += 10
    assert ops.promote() == [1, -1]
    assert ops.info(iid)["state"] == "ready"


def test_a_stream_without_its_consumer_group_is_served(ops: Ops) -> None:
    # a stream made by a hand-written XADD has no group: before, every lease call
    # of the shard failed with NOGROUP (and admission, and the filtered path)
    first, second, other = new_id(), new_id(), new_id()
    ops.enqueue(row(first), row(second), row(other, tenant="zeta"))
    stream = ops.stream()
    ops.r.xgroup_destroy(stream, GROUP)
    ops.r.xadd(stream, {"nothing": "here"})
    # names no instance: like a hash moved away by a slot migration, a stray kept
    # pending (test_strays.py)
    ops.r.xadd(stream, {"i": f"0-{new_id()}"})
    ops.r.hset(ops.k.tenant(0, "acme"), "max_queued", 10)
    assert ops.enqueue(row(third := new_id())) == 1  # admission counts it all ready
    got = {t.iid for t in ops.lease("w1", n=10)}
    assert got == {first, second, third, other}  # the entries already there too
    # the garbage is acked away; the stray stays pending
    assert ops.ready() == 0 and len(ops.pending()) == 4
    # a stream deleted by hand while its tenant is on the ring, and the tenant
    # filter's path
    ops.r.delete(stream)
    ops.enqueue(row(fourth := new_id(), tenant="zeta"))
    assert [t.iid for t in ops.lease("w1", n=10)] == [fourth]
    ops.r.delete(ops.stream("zeta"))
    ops.r.xadd(ops.stream("zeta"), {"i": "junk"})
    assert ops.lease("w1", n=10, tenants=["zeta"]) == []
    assert ops.ready("zeta") == 0


@pytest.mark.parametrize(
    "change",
    [
        {"max_attempts": "many"},
        {"budget": "x"},
        {"retry_base_ms": "soon"},
        {"retry_cap_ms": "never"},
        {"attempt": "x"},
    ],
)
def test_fail_and_reap_over_text_in_a_leased_hash(ops: Ops, change: dict[str, str]) -> None:
    # before: arithmetic on nil failed the whole fail call (every report of the
    # worker's batch, retried forever) or the shard's reap
    iid, other = new_id(), new_id()
    ops.enqueue(row(iid, max_attempts=3), row(other))
    t, u = ops.lease("w1", n=2)
    edit(ops, iid, change)
    # max_attempts "many" counts as 1, as lease.lua reads it
    assert ops.fail("w1", t, frac=0.0) == ("dead" if "max_attempts" in change else "ready")
    assert ops.fail("w1", u, frac=0.0) == "ready"
    toks = ops.lease("w1", n=2, ttl=100)
    for tok in toks:
        ops.r.hset(ops.k.ti(0, tok.iid), "deadline", "later")
    ops.now += 100
    assert ops.reap()[0] == len(toks)
    assert {ops.info(x)["state"] for x in (iid, other)} <= {"ready", "retry_wait", "dead"}
