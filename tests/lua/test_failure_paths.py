"""Failure handling on a real Redis: retry schedule, DLQ and replay, cancel, promote, release.

Scripts are called with an explicit ``now`` so delays are exact and nothing sleeps.
"""

from __future__ import annotations

import pytest
from lua_ops import T0, Ops, new_id, row
from server_time import server_ms, server_ms_after  # tests/helpers

from redcron.engine import Broker, FailItem, FailResult
from redcron.errors import NotFound
from redcron.keys import CONSUMER, GROUP
from redcron.model.records import epoch_ms


def _outcomes(info: dict[str, str]) -> dict[int, str]:
    return {
        int(k.split(":")[1]): v
        for k, v in info.items()
        if k.startswith("a:") and k.endswith(":outcome")
    }


# -- retry schedule ------------------------------------------------------------


@pytest.mark.parametrize("frac", [0.0, 0.5, 0.999])
def test_retry_delay_is_full_jitter_below_the_capped_ceiling(ops: Ops, frac: float) -> None:
    base, cap = 1000, 5000
    # min(base * 2^(n-1), cap) for failed attempt n: what fail.lua must scale by frac
    ceilings = {1: 1000, 2: 2000, 3: 4000, 4: 5000, 5: 5000, 6: 5000, 7: 5000}
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=10, base=base, cap=cap))
    for attempt in range(1, 8):
        [t] = ops.lease("w1")
        assert t.attempt == attempt
        ops.now += 17  # the failure is reported a little later than the lease
        want = int(ceilings[attempt] * frac)
        state = ops.fail("w1", t, frac=frac)
        info = ops.info(iid)
        if want == 0:
            assert state == "ready"
            assert info.get("due", "") == ""  # absent: none
            assert info["loc"].startswith("q:")
        else:
            assert state == "retry_wait"
            assert int(info["due"]) - ops.now == want
            assert ops.r.zscore(ops.k.timers(0), iid) == ops.now + want
            assert ops.promote()[0] == 0  # not due a ms early
            ops.now += want
            assert ops.promote()[0] == 1
        if attempt >= 4:
            assert want == int(cap * frac)  # 1000 * 2^3 > cap: capped
    assert ops.r.hget(ops.k.counters(0), "retries") == b"7"


def test_explicit_retry_delay_is_honoured(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=5))
    [t] = ops.lease("w1")
    assert ops.fail("w1", t, delay=1500, frac=0.999) == "retry_wait"
    assert int(ops.info(iid)["due"]) == ops.now + 1500
    ops.now += 1500
    assert ops.promote() == [1, -1]
    [t] = ops.lease("w1")
    assert ops.fail("w1", t, delay=0, frac=0.999) == "ready"
    info = ops.info(iid)
    assert info["state"] == "ready"
    assert ops.r.zscore(ops.k.timers(0), iid) is None
    assert ops.r.xlen(ops.k.q(0, "default", "acme", "normal")) == 1
    [t] = ops.lease("w1")
    assert t.attempt == 3


def test_broker_fail_rolls_jitter_within_bounds(broker: Broker) -> None:
    ids = [new_id() for _ in range(20)]
    broker.enqueuer.enqueue([row(i, base=10_000, cap=10_000) for i in ids])
    leases = broker.leases.lease(0, "w1", 20, 60_000, ["default"])
    before = server_ms(broker)
    states = broker.leases.fail(
        0, "w1", [FailItem(x.iid, x.epoch, "failed", "e", True) for x in leases]
    )
    after = server_ms(broker)
    dues = []
    for x in leases:
        info = broker.inspection.task_info(x.iid)
        if info.state == "retry_wait":
            assert info.due_at is not None
            dues.append(epoch_ms(info.due_at))
            assert before <= dues[-1] < after + 10_000
    assert {s.state for s in states} <= {"retry_wait", "ready"}
    # each retry carries its delay: the due time less the time it was recorded
    for x, s in zip(leases, states, strict=True):
        assert s.retry_in_ms is not None
        if s.state == "retry_wait":
            due = broker.inspection.task_info(x.iid).due_at
            assert due is not None and before <= epoch_ms(due) - s.retry_in_ms <= after
    assert len(set(dues)) > 1  # not the same dice every call


def test_lease_and_fail_tell_the_worker_what_it_logs(broker: Broker) -> None:
    """A lease names its queue and last attempt; a failure report says where the
    task went and, for a retry, after how long."""
    iid = new_id()
    broker.enqueuer.enqueue([row(iid, queue="mail", max_attempts=2)])
    [first] = broker.leases.lease(0, "w1", 1, 60_000, ["mail"])
    assert (first.queue, first.attempt, first.max_attempts) == ("mail", 1, 2)
    [res] = broker.leases.fail(
        0, "w1", [FailItem(first.iid, first.epoch, "failed", "e", True, 1500)]
    )
    assert (res.state, res.retry_in_ms) == ("retry_wait", 1500)
    assert broker.leases.fail(0, "w1", [FailItem(first.iid, first.epoch, "failed", "e", True)]) == [
        FailResult(None)
    ]
    broker.maintenance.maintain(0, now=server_ms(broker) + 2_000)
    [second] = broker.leases.lease(0, "w1", 1, 60_000, ["mail"])
    assert (second.attempt, second.max_attempts) == (2, 2)
    [res] = broker.leases.fail(0, "w1", [FailItem(second.iid, second.epoch, "failed", "e", True)])
    assert res == FailResult("dead", None)


# -- DLQ -------------------------------------------------------------------------


def test_dead_letter_after_max_attempts_then_replay(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=3))  # retries=2
    for attempt in (1, 2):
        [t] = ops.lease("w1")
        assert ops.fail("w1", t, frac=0.0, error=f"boom {attempt}") == "ready"
    [t] = ops.lease("w1")
    assert t.attempt == 3
    ops.b.leases.append_logs(0, [(iid, 3, ["step one", "step two"])])
    ops.now += 5
    assert ops.fail("w1", t, frac=0.0, error="final boom") == "dead"

    info = ops.info(iid)
    assert info["state"] == "dead"
    assert _outcomes(info) == {1: "failed", 2: "failed", 3: "failed"}
    dlq = ops.r.xrange(ops.k.dlq(0, "acme"))
    assert len(dlq) == 1
    eid, fields = dlq[0]
    assert info["loc"] == "dlq:" + eid.decode()
    entry = {k.decode(): v.decode() for k, v in fields.items()}
    assert entry["i"] == iid
    assert entry["error"] == "final boom"
    assert entry["attempts"] == "3"
    assert entry["outcome"] == "failed"
    assert entry["tail"].splitlines() == ["step one", "step two"]
    assert int(entry["at"]) == ops.now
    assert ops.pending() == {}
    assert ops.r.zscore(ops.k.timers(0), iid) is None
    assert ops.lease("w1") == []
    assert ops.r.hget(ops.k.counters(0), "dead") == b"1"
    listed = ops.b.dlq.list("acme")
    assert [x.task_id for x in listed] == [iid]

    assert ops.b.dlq.replay([iid]) == 1
    assert ops.r.xlen(ops.k.dlq(0, "acme")) == 0
    info = ops.info(iid)
    assert info["state"] == "ready"
    assert info["loc"].startswith("q:")
    assert ops.b.dlq.replay([iid]) == 0  # not dead any more: left alone
    # a fresh budget: three more attempts before it is dead again
    for attempt in (4, 5):
        [t] = ops.lease("w1")
        assert t.attempt == attempt
        assert ops.fail("w1", t, frac=0.0) == "ready"
    [t] = ops.lease("w1")
    assert ops.fail("w1", t, frac=0.0) == "dead"
    assert ops.r.xlen(ops.k.dlq(0, "acme")) == 1


def test_permanent_failure_goes_to_the_dlq_at_once(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=5))
    [t] = ops.lease("w1")
    assert ops.fail("w1", t, retryable=False, error="ValueError: bad input") == "dead"
    entry = ops.r.xrange(ops.k.dlq(0, "acme"))[0][1]
    assert entry[b"attempts"] == b"1"
    assert entry[b"error"] == b"ValueError: bad input"
    assert ops.info(iid)["error"] == "ValueError: bad input"


def test_expired_lease_on_the_last_attempt_is_dead_lettered(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=1))
    ops.lease("w1", ttl=100)
    ops.now += 100
    assert ops.reap()[0] == 1
    info = ops.info(iid)
    assert info["state"] == "dead"
    assert _outcomes(info) == {1: "lost"}
    entry = ops.r.xrange(ops.k.dlq(0, "acme"))[0][1]
    assert entry[b"outcome"] == b"lost"


# -- cancel ----------------------------------------------------------------------


def test_cancel_ready_work(ops: Ops) -> None:
    a, b = new_id(), new_id()
    ops.enqueue(row(a), row(b))
    stream, ring = ops.k.q(0, "default", "acme", "normal"), ops.k.ring(0, "default", "normal")
    assert ops.b.cancel(a).state == "cancelled"
    assert ops.r.xlen(stream) == 1
    assert ops.r.zscore(ring, "acme") is not None  # b is still ready
    assert ops.b.cancel(b).state == "cancelled"
    assert ops.r.xlen(stream) == 0
    assert ops.r.zcard(ring) == 0
    for iid in (a, b):
        info = ops.info(iid)
        assert (info["state"], info.get("loc", "")) == ("cancelled", "")
        assert ops.r.ttl(ops.k.ti(0, iid)) > 0
    assert ops.lease("w1", n=10) == []
    again = ops.b.cancel(a)
    assert (again.state, again.cancelled) == ("cancelled", False)  # ended already: no-op


def test_cancel_keeps_the_aging_index_and_deficits_on_what_is_ready(ops: Ops) -> None:
    # cancelling the head used to leave oldest: at its time (the tenant aged up
    # early); cancelling the last ready task left the entry and the DRR deficit
    a, b, c = new_id(), new_id(), new_id()
    ops.enqueue(row(a), row(c, tenant="globex"))
    # b's entry must be a later ms than a's: stream ids come from the server clock
    head_a = ops.r.xrange(ops.stream())[0][0].decode()
    server_ms_after(ops.r, int(head_a.split("-")[0]))
    ops.enqueue(row(b))
    stream = ops.stream()
    oldest, ring = ops.k.oldest(0, "default", "normal"), ops.k.ring(0, "default", "normal")
    head_b = ops.r.xrange(stream)[-1][0].decode()
    # a DRR visit leaves acme a deficit (and globex, the other ring member)
    ops.r.hset(ops.k.tenant(0, "acme"), mapping={"d:default:normal": 1, "v:default:normal": 1})
    assert ops.b.cancel(a).state == "cancelled"
    assert ops.r.zscore(oldest, "acme") == int(head_b.split("-")[0])
    assert ops.b.cancel(b).state == "cancelled"
    assert ops.r.zscore(ring, "acme") is None
    assert ops.r.zscore(oldest, "acme") is None
    assert ops.r.hmget(ops.k.tenant(0, "acme"), ["d:default:normal", "v:default:normal"]) == [
        None,
        None,
    ]
    assert ops.r.zscore(oldest, "globex") is not None  # others untouched


def test_cancel_a_countdown_task(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid, delay=5000))
    assert ops.info(iid)["state"] == "scheduled"
    assert ops.b.cancel(iid).state == "cancelled"
    assert ops.r.zscore(ops.k.timers(0), iid) is None
    ops.now += 10_000
    assert ops.promote() == [0, -1]
    assert ops.lease("w1") == []
    assert ops.info(iid)["state"] == "cancelled"


def test_cancel_a_retry_waiting_task(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    [t] = ops.lease("w1")
    assert ops.fail("w1", t, frac=0.5) == "retry_wait"
    assert ops.b.cancel(iid).state == "cancelled"
    assert ops.r.zcard(ops.k.timers(0)) == 0


@pytest.mark.parametrize("report", ["complete", "cancelled", "failed", "timed_out"])
def test_cancel_running_work_ends_it_cancelled_whatever_the_worker_reports(
    ops: Ops, report: str
) -> None:
    # issue 16 item 8: a running task cancelled, then reported succeeded, ended succeeded
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=5))
    [t] = ops.lease("w1")
    ops.start("w1", [t])
    ops.now += 1000  # a second into a 2-second task
    done = ops.b.cancel(iid, now=ops.now)
    assert (done.state, done.cancelled, done.may_still_be_running) == ("cancelled", True, True)
    info = ops.info(iid)
    # ended at once, and its lease (and cap slot) with it: nothing left to run it
    assert (info["state"], info.get("loc", ""), info["ended"]) == ("cancelled", "", str(ops.now))
    assert _outcomes(info) == {1: "cancelled"}
    assert (info["a:1:ended"], info["a:1:error"]) == (str(ops.now), "cancelled while running")
    assert ops.r.zscore(ops.k.leases(0, "acme"), iid) is None
    assert ops.pending() == {}
    assert ops.r.xlen(ops.stream()) == 0
    # the worker learns it at its next heartbeat: revoked, not renewed
    assert ops.heartbeat("w1", [t]) == ([], [iid])
    assert ops.r.zscore(ops.k.leases(0, "acme"), iid) is None
    assert ops.info(iid).get("deadline", "") == ""
    # and its report, a second later, is refused like a zombie's: nothing written
    ops.now += 1000
    before = ops.r.hgetall(ops.k.ti(0, iid))
    if report == "complete":
        assert ops.complete("w1", [t]) == [0]
    else:
        assert ops.fail("w1", t, outcome=report, retryable=True, frac=0.0) == 0
    assert ops.r.hgetall(ops.k.ti(0, iid)) == before
    assert ops.start("w1", [t]) == 0
    assert ops.release("w1", [t]) == 0
    info = ops.info(iid)
    assert info["state"] == "cancelled"
    assert _outcomes(info) == {1: "cancelled"}  # the attempt history ends cancelled
    assert ops.r.hget(ops.k.counters(0), "attempts:acme|cancelled") == b"1"
    ops.now += 100_000
    assert ops.reap(frac=0.0)[0] == 0
    assert ops.promote()[0] == 0
    assert ops.lease("w1") == []


def test_cancel_frees_the_cap_slot_of_the_running_attempt(ops: Ops) -> None:
    # the tenant's cap counts valid leases; a cancelled attempt holds none
    # (docs/architecture.md, "Cancel")
    running, waiting = new_id(), new_id()
    ops.r.hset(ops.k.tenant(0, "acme"), "max_in_flight", 1)
    ops.enqueue(row(running), row(waiting))
    [t] = ops.lease("w1", n=2)
    assert t.iid == running
    assert ops.lease("w2") == []  # at its cap
    assert ops.b.cancel(running, now=ops.now).may_still_be_running
    [u] = ops.lease("w2")
    assert u.iid == waiting


def test_cancel_a_leased_attempt_that_never_started(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=5))
    [t] = ops.lease("w1", ttl=100)
    done = ops.b.cancel(iid, now=ops.now)
    assert (done.state, done.may_still_be_running) == ("cancelled", True)
    ops.now += 100
    assert ops.reap(frac=0.0)[0] == 0  # nothing of it is left to reap
    assert ops.heartbeat("w1", [t]) == ([], [iid])
    assert ops.info(iid)["state"] == "cancelled"
    assert ops.lease("w1") == []


def test_cancel_dead_work_removes_the_dlq_entry(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    [t] = ops.lease("w1")
    ops.fail("w1", t, retryable=False)
    assert ops.b.cancel(iid).state == "cancelled"
    assert ops.r.xlen(ops.k.dlq(0, "acme")) == 0
    assert ops.b.dlq.replay([iid]) == 0


def test_discard_takes_dead_work_out_of_the_dlq_for_good(ops: Ops) -> None:
    iid, other = new_id(), new_id()
    ops.enqueue(row(iid))
    ops.enqueue(row(other))
    [t, _u] = ops.lease("w1", n=2)
    ops.fail("w1", t, retryable=False, error="boom")
    assert ops.b.dlq.discard([iid, other, "0-nosuchtask"]) == 1  # others: left alone
    assert ops.r.xlen(ops.k.dlq(0, "acme")) == 0
    info = ops.info(iid)
    assert info["state"] == "cancelled"
    assert info.get("loc", "") == ""
    assert info["error"] == "discarded from the DLQ"
    assert ops.info(other)["state"] == "leased"
    assert ops.b.dlq.discard([iid]) == 0  # not dead any more
    assert ops.b.dlq.replay([iid]) == 0  # for good: replay finds nothing
    assert ops.b.dlq.list("acme") == []
    assert ops.lease("w1") == []


def test_cancel_finished_or_unknown_work(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    [t] = ops.lease("w1")
    ops.complete("w1", [t])
    before = ops.r.hgetall(ops.k.ti(0, iid))
    done = ops.b.cancel(iid, now=ops.now)
    # it had ended: said so (the API answers 409 naming the state), nothing written
    assert (done.state, done.cancelled, done.may_still_be_running) == ("succeeded", False, False)
    assert ops.r.hgetall(ops.k.ti(0, iid)) == before
    with pytest.raises(NotFound):
        ops.b.cancel(new_id())


# -- promote and release ---------------------------------------------------------


def test_promote_moves_only_due_timers(ops: Ops) -> None:
    soon, later = new_id(), new_id()
    ops.enqueue(row(soon, delay=1000), row(later, delay=5000))
    assert ops.lease("w1") == []
    ops.now += 999
    assert ops.promote() == [0, T0 + 1000]
    ops.now += 1
    assert ops.promote() == [1, T0 + 5000]
    info = ops.info(soon)
    assert info["state"] == "ready"
    assert info.get("due", "") == ""  # absent: none
    assert ops.r.xrange(ops.k.q(0, "default", "acme", "normal"))[0][0].decode() == info["loc"][2:]
    assert ops.info(later)["state"] == "scheduled"
    assert ops.r.lpop(ops.k.wake(0, "default")) == b"1"  # idle workers are woken
    assert [t.iid for t in ops.lease("w1", n=5)] == [soon]
    ops.now += 4000
    assert ops.promote() == [1, -1]
    assert [t.iid for t in ops.lease("w1", n=5)] == [later]


def test_release_hands_back_without_using_the_budget(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=2))
    for attempt in (1, 2, 3):
        [t] = ops.lease("w1")
        assert t.attempt == attempt
        ops.start("w1", [t])
        assert ops.release("w1", [t]) == 1
        info = ops.info(iid)
        assert info["state"] == "ready"  # at once, no timer
        assert ops.r.zcard(ops.k.timers(0)) == 0
        assert ops.pending() == {}
        assert _outcomes(info)[attempt] == "lost"
        assert ops.release("w1", [t]) == 0  # stale now
    # three hand-backs later the whole budget of 2 is still there
    [t] = ops.lease("w1")
    assert ops.fail("w1", t, frac=0.5) == "retry_wait"
    assert int(ops.info(iid)["due"]) == ops.now + 500  # backoff of the 1st counted failure
    ops.now += 500
    ops.promote()
    [t] = ops.lease("w1")
    assert ops.fail("w1", t) == "dead"


def test_reaped_lease_past_the_task_timeout_ends_timed_out(ops: Ops) -> None:
    slow, quick = new_id(), new_id()
    slow_row, quick_row = row(slow, timeout=1000), row(quick, tenant="globex", timeout=60_000)
    ops.enqueue(slow_row, quick_row)
    toks = ops.lease("w1", n=2, ttl=1500)
    ops.now += 200
    ops.start("w1", toks)
    ops.now += 1300
    assert ops.reap()[0] == 2
    assert _outcomes(ops.info(slow)) == {1: "timed_out"}
    assert "timeout" in ops.info(slow)["error"]
    assert _outcomes(ops.info(quick)) == {1: "lost"}


def test_an_older_versions_long_attempt_names_still_time_a_reaped_attempt(ops: Ops) -> None:
    """A lease taken by an older version spells a:<n>:leased / :started (or, the
    next one, a:<n>:l / :s): the reaper's timeout check reads them as it reads
    this release's leased / started."""
    slow = new_id()
    ops.enqueue(row(slow, timeout=1000))
    [t] = ops.lease("w1", ttl=1500)
    ops.now += 200
    ops.start("w1", [t])
    key = ops.k.ti(0, slow)
    leased, started = ops.r.hmget(key, "leased", "started")
    ops.r.hdel(key, "leased", "started")
    ops.r.hset(key, mapping={"a:1:leased": leased, "a:1:started": started, "a:1:worker": "w1"})
    ops.now += 1300
    assert ops.reap()[0] == 1
    assert _outcomes(ops.info(slow)) == {1: "timed_out"}
    [a1] = ops.b.inspection.task_info(slow).attempts
    assert (a1.worker, a1.outcome) == ("w1", "timed_out")


def test_reaper_drops_entries_left_behind_and_keeps_the_live_lease(ops: Ops) -> None:
    iid, gone, deleted = new_id(), new_id(), new_id()
    ops.enqueue(row(iid))
    [_live] = ops.lease("w1", n=1, ttl=1000)
    # damage the stream: one pending entry whose instance moved on (ended: no
    # such lease), one pending entry deleted from the stream (Redis 6.2 reports
    # those).  An instance whose hash is missing is a stray, kept (test_strays.py)
    ops.r.hset(ops.k.ti(0, gone), mapping={"state": "succeeded", "tenant": "acme"})
    stream = ops.stream()
    strays = [ops.r.xadd(stream, {"i": x}) for x in (gone, deleted)]
    ops.r.xreadgroup(GROUP, CONSUMER, {stream: ">"})
    # delivered a lease TTL before the lease: the min-idle of the stream is its
    # shortest lease TTL (1000 ms), which the strays are past and the lease is not
    ops.r.xclaim(stream, GROUP, CONSUMER, 0, strays, time=T0 - 1000, justid=True)
    ops.r.xdel(stream, strays[1])
    ops.r.zadd(ops.k.pending(0), {stream: T0})  # due for a look now
    ops.now += 500  # the strays idle past 1000 ms; the lease 500 ms, not expired
    # looked at again one minimum TTL (100 ms) later, less the reaper's slack (10 ms)
    assert ops.reap() == [0, ops.now + 90, 0, 0]
    assert list(ops.pending()) == [ops.info(iid)["lease_entry"]]
    assert ops.r.xlen(stream) == 1
    assert ops.info(iid)["state"] == "leased"
    ops.now = T0 + 1000
    assert ops.reap()[0] == 1  # and it is still reaped when its own deadline passes
    assert ops.info(iid)["state"] == "retry_wait"
    assert ops.pending() == {}
    assert ops.r.zscore(ops.k.pending(0), stream) is None  # nothing pending: off the index
