"""The lease protocol on a real Redis: fencing, attempt history, heartbeats, dispatch order.

Scripts are called with an explicit ``now`` (invariant 8, docs/architecture.md, allows it in
tests) so deadlines and delays are exact and nothing sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
import redis
from lua_ops import T0, Ops, Tok, new_id, row

from redcron.engine import Broker
from redcron.engine.argv import EnqueueRow
from redcron.keys import GROUP
from redcron.model.records import epoch_ms


def _lease_again_after_reap(ops: Ops, iid: str, worker: str) -> tuple[Tok, Tok]:
    [t1] = ops.lease("w1", ttl=500)
    assert (t1.iid, t1.epoch, t1.attempt) == (iid, "1", 1)
    assert ops.start("w1", [t1]) == 1
    ops.now += 501
    assert ops.reap(frac=0.0)[0] == 1  # frac 0: the retry is ready at once
    assert ops.info(iid)["state"] == "ready"
    [t2] = ops.lease(worker, ttl=500)
    assert (t2.iid, t2.epoch, t2.attempt) == (iid, "2", 2)
    return t1, t2


@pytest.mark.parametrize("second_worker", ["w1", "w2"])
def test_stale_token_is_rejected_and_changes_nothing(ops: Ops, second_worker: str) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    t1, t2 = _lease_again_after_reap(ops, iid, second_worker)
    before = ops.snapshot(iid)

    assert ops.complete("w1", [t1]) == [0]
    assert ops.snapshot(iid) == before
    assert ops.fail("w1", t1) == 0
    assert ops.fail("w1", t1, retryable=False) == 0
    assert ops.snapshot(iid) == before
    assert ops.heartbeat("w1", [t1], ttl=60_000) == ([iid], [])
    assert ops.snapshot(iid) == before
    assert ops.start("w1", [t1]) == 0
    assert ops.release("w1", [t1]) == 0
    assert ops.snapshot(iid) == before
    # the epoch alone is not enough: the worker id is part of the token too
    impostor = Tok(iid, t2.epoch, 2, "zombie")
    assert ops.complete("zombie", [impostor]) == [0]
    assert ops.heartbeat("zombie", [impostor]) == ([iid], [])
    assert ops.snapshot(iid) == before

    # through the broker's own methods (server time) as well
    assert ops.b.leases.complete(0, "w1", [(t1.iid, t1.epoch, b"\xc0")]) == [False]
    assert ops.b.leases.heartbeat(0, "w1", 1000, [(t1.iid, t1.epoch)]) == ([iid], [])
    assert ops.b.leases.start(0, "w1", [(t1.iid, t1.epoch)]) == 0
    assert ops.snapshot(iid) == before

    assert ops.complete(second_worker, [t2]) == [1]
    info = ops.info(iid)
    assert info["state"] == "succeeded"
    assert info["a:1:outcome"] == "lost"
    # the last attempt of a succeeded instance: its outcome is the instance's state
    assert "a:2:outcome" not in info
    assert [a.outcome for a in ops.b.inspection.task_info(iid).attempts] == ["lost", "succeeded"]
    # and once it ended, even the right token cannot end it again
    after = ops.snapshot(iid)
    assert ops.complete(second_worker, [t2]) == [0]
    assert ops.fail(second_worker, t2) == 0
    assert ops.snapshot(iid) == after


def test_stale_token_in_a_batch_does_not_block_the_others(ops: Ops) -> None:
    a, b = new_id(), new_id()
    ops.enqueue(row(a), row(b))
    [ta, tb] = ops.lease("w1", n=2)
    assert ta.iid == a
    stale = Tok(a, "7", 1, "w1")
    assert ops.complete("w1", [stale, tb]) == [0, 1]
    assert ops.info(a)["state"] == "leased"
    assert ops.info(b)["state"] == "succeeded"


def _outcomes(info: dict[str, str]) -> dict[int, str]:
    return {
        int(k.split(":")[1]): v
        for k, v in info.items()
        if k.startswith("a:") and k.endswith(":outcome")
    }


def test_attempt_history_records_each_attempt_once(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    [t1] = ops.lease("w1")
    ops.start("w1", [t1])
    assert ops.fail("w1", t1, error="first try broke") == "retry_wait"
    info = ops.info(iid)
    assert _outcomes(info) == {1: "failed"}
    ops.now = int(info["due"])
    assert ops.promote()[0] == 1
    [t2] = ops.lease("w2")
    assert t2.attempt == 2
    assert ops.complete("w2", [t2]) == [1]
    info = ops.info(iid)
    # the succeeded (last) attempt's outcome and end are the instance's state and
    # ended, not written twice (issue 19 §4); the record says them
    assert _outcomes(info) == {1: "failed"}
    assert info["a:1:error"] == "first try broke"
    # an ended attempt's worker, lease and start times: a:<n>:w, :l, :s (issue 19
    # §4); the succeeded last one's are the current attempt's, written once
    assert info["a:1:w"] == "w1"
    assert info["worker"] == "w2" and "a:2:w" not in info
    assert int(info["leased"]) == ops.now and "started" not in info
    assert int(info["a:1:l"]) == T0
    assert int(info["a:1:s"]) == T0
    assert int(info["a:1:ended"]) == T0
    assert "a:2:ended" not in info and int(info["ended"]) == ops.now
    assert info["attempt"] == "2"
    assert info["epoch"] == "2"
    assert info.get("loc", "") == ""
    assert ops.r.ttl(ops.k.ti(0, iid)) > 0  # retention starts once terminal
    tinfo = ops.b.inspection.task_info(iid)
    assert [a.outcome for a in tinfo.attempts] == ["failed", "succeeded"]
    assert [a.number for a in tinfo.attempts] == [1, 2]
    assert [epoch_ms(a.ended_at) for a in tinfo.attempts] == [T0, ops.now]


def test_reaped_lease_records_outcome_lost(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    [t1] = ops.lease("w1", ttl=500)
    ops.now += 499
    assert ops.reap()[0] == 0  # not yet
    ops.now += 1
    assert ops.reap(frac=0.5) == [1, -1, 0, 0]
    info = ops.info(iid)
    assert _outcomes(info) == {1: "lost"}
    assert info["state"] == "retry_wait"
    assert int(info["due"]) == ops.now + 500  # backoff 1000 * 0.5
    assert ops.pending() == {}
    assert ops.r.zscore(ops.k.leases(0, "acme"), iid) is None
    assert ops.r.hget(ops.k.counters(0), "lease_expired") == b"1"
    assert ops.heartbeat("w1", [t1]) == ([iid], [])


def test_reaper_honours_each_leases_own_deadline(ops: Ops) -> None:
    short, long_ = new_id(), new_id()
    ops.enqueue(row(short), row(long_, tenant="globex"))
    [ts] = ops.lease("w1", ttl=500, tenants=["acme"])
    [tl] = ops.lease("w2", ttl=5000, tenants=["globex"])
    ops.now += 1000
    assert ops.reap() == [1, T0 + 5000, 0, 0]
    assert ops.info(short)["state"] == "retry_wait"
    assert ops.info(long_)["state"] == "leased"
    assert ops.complete("w2", [tl]) == [1]
    assert ops.complete("w1", [ts]) == [0]


def test_heartbeat_moves_the_deadline(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    [t] = ops.lease("w1", ttl=500)
    [idle_before] = ops.pending().values()
    ops.now += 400
    assert ops.heartbeat("w1", [t], ttl=500) == ([], [])
    assert int(ops.info(iid)["deadline"]) == ops.now + 500
    # the entry's delivery time moved with the heartbeat (idle reset, XCLAIM JUSTID)
    [idle_after] = ops.pending().values()
    assert 350 <= idle_before - idle_after <= 450
    assert ops.r.zscore(ops.k.leases(0, "acme"), iid) == ops.now + 500
    ops.now += 300  # past the first deadline, within the renewed one
    assert ops.reap()[0] == 0
    assert ops.complete("w1", [t]) == [1]


def test_heartbeat_reports_a_cancelled_lease_revoked_and_does_not_renew_it(ops: Ops) -> None:
    iid, other = new_id(), new_id()
    ops.enqueue(row(iid), row(other))
    [t, u] = ops.lease("w1", n=2)
    ops.start("w1", [t])
    assert ops.b.cancel(iid, now=ops.now).may_still_be_running
    # revoked for the worker that held it; any other token is simply lost
    assert ops.heartbeat("w1", [t, u]) == ([], [iid])
    assert ops.heartbeat("w2", [t]) == ([iid], [])
    assert ops.info(iid)["state"] == "cancelled"
    assert ops.r.zscore(ops.k.leases(0, "acme"), iid) is None
    assert ops.r.zscore(ops.k.leases(0, "acme"), other) is not None


def test_heartbeat_still_revokes_a_lease_flagged_by_an_older_cancel(ops: Ops) -> None:
    # an older version flagged running work and waited for the heartbeat: such a
    # lease is renewed and revoked, and the worker's cancelled report ends it
    iid = new_id()
    ops.enqueue(row(iid))
    [t] = ops.lease("w1")
    ops.r.hset(ops.k.ti(0, iid), "cancel_requested", "1")
    assert ops.heartbeat("w1", [t]) == ([], [iid])
    assert ops.info(iid)["state"] == "leased"
    assert ops.fail("w1", t, outcome="failed", retryable=True) == "cancelled"


def test_start_marks_running_only_with_the_token(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    [t] = ops.lease("w1")
    assert ops.start("w2", [t]) == 0
    assert ops.info(iid)["state"] == "leased"
    assert ops.start("w1", [t]) == 1
    assert ops.info(iid)["state"] == "running"
    assert ops.start("w1", [t]) == 0  # already running


def test_lease_records_the_lease_everywhere(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    eid = ops.info(iid)["loc"][2:]
    [t] = ops.lease("w1", ttl=750)
    assert (t.iid, t.epoch, t.attempt) == (iid, "1", 1)
    info = ops.info(iid)
    assert info["lease_entry"] == eid
    assert (info["state"], info["loc"], info["worker"]) == ("leased", "lease", "w1")
    assert int(info["deadline"]) == T0 + 750
    # the entry stays in its stream, pending in the group; the stream is on the
    # reaper's index, due when this lease may expire
    assert list(ops.pending()) == [eid]
    assert ops.ready() == 0
    assert ops.r.zscore(ops.k.pending(0), ops.stream()) == T0 + 750
    assert ops.r.zcard(ops.k.ring(0, "default", "normal")) == 0
    assert ops.lease("w2") == []


def test_stream_entry_that_does_not_match_its_hash_is_discarded(ops: Ops) -> None:
    done, ready = new_id(), new_id()
    ops.enqueue(row(done))
    [t] = ops.lease("w1")
    ops.complete("w1", [t])
    ops.enqueue(row(ready))
    real_eid = ops.info(ready)["loc"][2:]
    stream = ops.k.q(0, "default", "acme", "normal")
    # leftovers of a crash: an entry for an ended task, and entries for a ready
    # task that its hash does not point at (one served first, from the high class)
    ops.r.xadd(stream, {"i": done})
    ops.r.xadd(stream, {"i": ready})
    high = ops.k.q(0, "default", "acme", "high")
    ops.r.xgroup_create(high, GROUP, "0", mkstream=True)  # as every ready stream is made
    # with the very id of the real entry: ids are unique per stream only
    ops.r.xadd(high, {"i": ready}, id=real_eid)
    ops.r.zadd(ops.k.ring(0, "default", "high"), {"acme": 0})
    got = ops.lease("w2", n=10)
    assert [x.iid for x in got] == [ready]
    # the leftovers were acknowledged and deleted; the real entry is pending
    assert [e[0].decode() for e in ops.r.xrange(stream)] == [real_eid]
    assert list(ops.pending()) == [real_eid]
    assert ops.r.xlen(high) == 0
    assert ops.pending(priority="high") == {}
    assert ops.info(done)["state"] == "succeeded"
    info = ops.info(ready)
    assert (info["epoch"], info["lease_entry"]) == ("1", real_eid)


# -- dispatch order ---------------------------------------------------------


def _fill(ops: Ops, tenants: Sequence[str], per_tenant: int, **kw: Any) -> dict[str, str]:
    owner: dict[str, str] = {}
    for tenant in tenants:
        rows = [row(new_id(), tenant=tenant, **kw) for _ in range(per_tenant)]
        ops.enqueue(*rows)
        owner.update({r.iid: tenant for r in rows})
    return owner


def test_leasing_one_at_a_time_rotates_over_tenants(ops: Ops) -> None:
    tenants = ["acme", "globex", "initech"]
    owner = _fill(ops, tenants, 10)
    order = []
    for _ in range(30):
        [t] = ops.lease("w1", n=1)
        order.append(owner[t.iid])
    for i in range(0, 30, 3):
        assert sorted(order[i : i + 3]) == tenants, order
    assert ops.lease("w1") == []
    assert ops.r.zcard(ops.k.ring(0, "default", "normal")) == 0


def test_a_batch_is_shared_fairly(ops: Ops) -> None:
    owner = _fill(ops, ["acme", "globex", "initech"], 10)
    got = ops.lease("w1", n=6)
    counts: dict[str, int] = {}
    for t in got:
        counts[owner[t.iid]] = counts.get(owner[t.iid], 0) + 1
    assert counts == {"acme": 2, "globex": 2, "initech": 2}


def test_a_tenant_with_one_task_does_not_wait_behind_a_backlog(ops: Ops) -> None:
    owner = _fill(ops, ["bulk"], 50)
    owner.update(_fill(ops, ["small"], 1))
    first_two = [owner[ops.lease("w1")[0].iid] for _ in range(2)]
    assert sorted(first_two) == ["bulk", "small"]


def test_high_priority_is_leased_before_older_normal_work(ops: Ops) -> None:
    owner = _fill(ops, ["acme", "globex"], 5)
    urgent = new_id()
    ops.now += 1000
    ops.enqueue(row(urgent, tenant="globex", priority="high"))
    low = new_id()
    ops.enqueue(row(low, tenant="acme", priority="low"))
    [t] = ops.lease("w1")
    assert t.iid == urgent
    got = [t.iid for t in ops.lease("w1", n=20)]
    assert len(got) == 11
    assert set(got[:10]) == set(owner)
    assert got[-1] == low


def test_tenant_filter_only_leases_from_those_tenants(ops: Ops) -> None:
    owner = _fill(ops, ["acme", "globex", "initech"], 4)
    got = ops.lease("w1", n=20, tenants=["globex"])
    assert len(got) == 4
    assert {owner[t.iid] for t in got} == {"globex"}
    got = ops.lease("w1", n=20, tenants=["acme", "nobody"])
    assert {owner[t.iid] for t in got} == {"acme"}
    assert len(got) == 4
    # the others are still there for an unfiltered worker
    assert {owner[t.iid] for t in ops.lease("w2", n=20)} == {"initech"}


def test_a_worker_never_gets_another_queues_tasks(ops: Ops) -> None:
    a = _fill(ops, ["acme", "globex"], 5, queue="alpha")
    b = _fill(ops, ["acme", "globex"], 5, queue="beta")
    got_a = ops.lease("wa", n=100, queues=["alpha"])
    assert {t.iid for t in got_a} == set(a)
    assert ops.lease("wa", n=100, queues=["alpha"]) == []
    assert ops.lease("wa", n=100, queues=["gamma"]) == []
    got_b = ops.lease("wb", n=100, queues=["alpha", "beta"])
    assert {t.iid for t in got_b} == set(b)


def test_broker_lease_returns_the_payload(broker: Broker, r: redis.Redis) -> None:
    iid = new_id()
    broker.enqueuer.enqueue(
        [
            EnqueueRow(
                iid=iid,
                name="mod.fn",
                kind="python",
                args=b"\x92\x91\x01\x80",
                queue="default",
                tenant="acme",
                priority="normal",
                timeout_ms=2500,
                max_attempts=3,
                retry_base_ms=1000,
                retry_cap_ms=60_000,
                delay_ms=0,
                result_ttl_s=3600,
            )
        ]
    )
    [lease] = broker.leases.lease(0, "w1", 5, 10_000, ["default"])
    assert lease.iid == iid
    assert lease.epoch == "1"
    assert lease.attempt == 1
    assert lease.name == "mod.fn"
    assert lease.kind == "python"
    assert lease.args == b"\x92\x91\x01\x80"
    assert lease.timeout_ms == 2500
    assert lease.shard == 0
    assert r.hget(broker.keys.ti(0, iid), "loc") == b"lease"


def test_deadlines_come_from_the_server_clock_not_the_clients(
    ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Invariant 8: a client whose clock is a day off neither shortens nor
    lengthens a lease: without an explicit now, scripts read the server's TIME."""
    iid = new_id()
    ops.enqueue(row(iid))
    skewed = time.time() + 86_400
    monkeypatch.setattr(time, "time", lambda: skewed)
    monkeypatch.setattr(time, "time_ns", lambda: int(skewed * 1e9))
    sec, usec = ops.b.client.time()
    before = int(sec) * 1000 + int(usec) // 1000
    [lease] = ops.b.leases.lease(0, "w1", 1, 30_000, ["default"])
    sec, usec = ops.b.client.time()
    after = int(sec) * 1000 + int(usec) // 1000
    deadline = int(ops.info(iid)["deadline"])
    assert before + 30_000 <= deadline <= after + 30_000
    assert lease.iid == iid


def test_heartbeat_restores_a_missing_lease_but_never_an_ended_one(ops: Ops) -> None:
    # heartbeat used ZADD XX: a lease missing from leases stayed missing and the
    # tenant's cap undercounted until the lease ended (reachable only by a hand
    # edit: every script that ends a lease removes it in the same step)
    a, b = new_id(), new_id()
    ops.enqueue(row(a), row(b))
    ta, tb = ops.lease("w1", n=2)
    leases = ops.k.leases(0, "acme")
    ops.r.zrem(leases, ta.iid)
    ops.now += 100
    assert ops.heartbeat("w1", [ta, tb], ttl=1000) == ([], [])
    assert ops.r.zscore(leases, ta.iid) == ops.now + 1000
    # an ended lease is not resurrected: the token no longer matches
    assert ops.complete("w1", [tb]) == [1]
    assert ops.heartbeat("w1", [tb]) == ([tb.iid], [])
    assert ops.r.zscore(leases, tb.iid) is None
    # nor a stale token of an instance leased again
    ops.r.zrem(leases, ta.iid)
    ops.now += 10_000
    assert ops.reap()[0] == 1
    ops.now += 60_000
    ops.promote()  # the retry is due
    (ta2,) = ops.lease("w2")
    ops.r.zrem(leases, ta2.iid)
    assert ops.heartbeat("w1", [ta]) == ([ta.iid], [])
    assert ops.r.zscore(leases, ta.iid) is None
