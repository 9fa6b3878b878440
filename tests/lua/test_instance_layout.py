"""What a finished instance hash keeps (issue 19 §4): its whole history, and
nothing its key or a default already says, so it stays a small listpack."""

from __future__ import annotations

from lua_ops import Ops, new_id, row

from redcron.model.fields import TI_DEFAULTS

#: fields a finished instance no longer carries: the id (its key's), its place
#: and lease
GONE = {"id", "loc", "due", "deadline", "lease_entry"}


def test_a_succeeded_one_off_keeps_its_history_and_nothing_redundant(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid, base=1000, cap=3_600_000, timeout=0))
    first = ops.lease("w1")
    assert ops.fail("w1", first[0], delay=0) == "ready"
    second = ops.lease("w2")
    assert ops.complete("w2", second) == [1]
    info = ops.info(iid)
    assert not GONE & info.keys(), info
    # defaults left out; result_ttl_s (3600 in row()) is not one, so it stays
    assert not (TI_DEFAULTS.keys() - {"result_ttl_s"}) & info.keys(), info
    assert info["result_ttl_s"] == "3600"
    assert ops.r.object("encoding", ops.k.ti(0, iid)) in (b"listpack", b"ziplist")
    rec = ops.b.inspection.task_info(iid)
    assert (rec.id, rec.state, rec.attempt, rec.worker) == (iid, "succeeded", 2, "w2")
    assert [(a.number, a.worker, a.outcome, a.error) for a in rec.attempts] == [
        (1, "w1", "failed", "boom"),
        (2, "w2", "succeeded", None),
    ]
    assert rec.timeout_s is None and rec.budget == 0
    # the failed attempt went into the history; the succeeded last one is told by
    # the current attempt's fields alone, written once
    assert {"a:1:w", "a:1:l", "a:1:outcome", "a:1:ended"} <= info.keys(), info
    assert not {k for k in info if k.startswith("a:2:")}, info
    assert (info["worker"], info["leased"]) == ("w2", str(ops.now))
    assert rec.attempts[1].leased_at is not None and rec.attempts[1].ended_at is not None


def test_a_cancelled_lease_keeps_its_holder_for_the_revoking_heartbeat(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    ops.lease("w1")
    ops.b.cancel(iid, now=ops.now)
    info = ops.info(iid)
    assert (info["state"], info["worker"]) == ("cancelled", "w1")
    assert not {"loc", "deadline", "lease_entry"} & info.keys(), info
