"""Instance hashes and ready streams edited by hand (redis-cli): lease.lua must
keep serving the rest of the shard.  An instance no lease can use goes off its
stream onto the timers, and the next promote dead-letters it with an error that
names the field (once: it is never leased again); a stream without its consumer
group gets one, and what is in it is delivered."""

from __future__ import annotations

from lua_ops import Ops, new_id, row

from redcron.keys import GROUP


def test_a_stream_without_its_consumer_group_is_served(ops: Ops) -> None:
    # a stream made by a hand-written XADD has no group: before, every lease call
    # of the shard failed with NOGROUP (and admission, and the filtered path)
    first, second, other = new_id(), new_id(), new_id()
    ops.enqueue(row(first), row(second), row(other, tenant="zeta"))
    stream = ops.stream()
    ops.r.xgroup_destroy(stream, GROUP)
    ops.r.xadd(stream, {"nothing": "here"})
    ops.r.xadd(stream, {"i": f"0-{new_id()}"})  # names no instance
    ops.r.hset(ops.k.tenant(0, "acme"), "max_queued", 10)
    assert ops.enqueue(row(third := new_id())) == 1  # admission counts it all ready
    got = {t.iid for t in ops.lease("w1", n=10)}
    assert got == {first, second, third, other}  # the entries already there too
    assert ops.ready() == 0 and len(ops.pending()) == 3  # the garbage is acked away
    # a stream deleted by hand while its tenant is on the ring, and the tenant
    # filter's path
    ops.r.delete(stream)
    ops.enqueue(row(fourth := new_id(), tenant="zeta"))
    assert [t.iid for t in ops.lease("w1", n=10)] == [fourth]
    ops.r.delete(ops.stream("zeta"))
    ops.r.xadd(ops.stream("zeta"), {"i": "junk"})
    assert ops.lease("w1", n=10, tenants=["zeta"]) == []
    assert ops.ready("zeta") == 0
