"""Issue 28 §2: lease never deletes a stream entry because its instance hash is
missing (a half-finished cluster slot migration: the script runs on the node
with the stream while the hash has moved already).  The entry stays pending,
where the reaper and the doctor see it; once the hash is back the instance is
ready again and runs once; only a hash missing a day lets the entry go; a real
mismatch (the hash present, not pointing at the entry) is still dropped."""

from __future__ import annotations

from lua_ops import Ops, new_id, row

from redcron.keys import MAINT_STRAY, STRAY_MAX_MS


def _migrating(ops: Ops, iid: str) -> bytes:
    """The instance hash leaves this node (as MIGRATE does it): its DUMP."""
    ti = ops.k.ti(0, iid)
    dump = ops.r.dump(ti)
    assert dump is not None
    ops.r.delete(ti)
    return dump


def _stray_field(ops: Ops, eid: str) -> str:
    return f"{MAINT_STRAY}{ops.stream()}:{eid}"


def test_an_entry_survives_a_missing_hash_and_runs_once_the_hash_is_back(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    eid = ops.info(iid)["loc"][2:]
    dump = _migrating(ops, iid)

    assert ops.lease(n=5) == []  # nothing to run without its hash ...
    assert list(ops.pending()) == [eid]  # ... and the entry is kept, delivered
    assert ops.r.xrange(ops.stream(), eid, eid)
    assert ops.r.zscore(ops.k.pending(0), ops.stream()) is not None  # the reaper will look
    upkeep = ops.k.maintenance(0)
    assert ops.r.hget(upkeep, _stray_field(ops, eid)) == str(ops.now).encode()

    # the reaper meets it while the hash is still away: left pending, counted
    ops.now += 2_000
    reaped, _nxt, _due, strays = ops.reap()
    assert (reaped, strays) == (0, 1)
    assert list(ops.pending()) == [eid]

    # the migration finishes: the hash is back, pointing at the entry
    ops.r.restore(ops.k.ti(0, iid), 0, dump)
    ops.now += 2_000
    assert ops.reap()[3] == 0
    info = ops.info(iid)
    assert info["state"] == "ready" and info["loc"] != f"q:{eid}"  # on a new entry
    assert ops.pending() == {} and ops.ready() == 1
    assert ops.r.hget(upkeep, _stray_field(ops, eid)) is None
    assert ops.r.zscore(ops.k.ring(0, "default", "normal"), "acme") is not None

    # leased and run once
    [tok] = ops.lease(n=5)
    assert tok.iid == iid and tok.attempt == 1
    assert ops.lease(n=5) == []
    assert ops.complete("w1", [tok]) == [1]
    assert ops.info(iid)["state"] == "succeeded"
    assert ops.r.xlen(ops.stream()) == 0


def test_an_entry_whose_hash_stays_missing_a_day_is_deleted(ops: Ops) -> None:
    iid, other = new_id(), new_id()
    ops.enqueue(row(iid), row(other))
    eid = ops.info(iid)["loc"][2:]
    _migrating(ops, iid)
    [tok] = ops.lease(n=5)  # the other one is leased as ever
    assert tok.iid == other
    ops.complete("w1", [tok])
    ops.now += 2_000
    assert ops.reap()[3] == 1
    ops.now += STRAY_MAX_MS
    assert ops.reap()[3] == 0
    assert ops.r.xlen(ops.stream()) == 0 and ops.pending() == {}
    assert ops.r.hget(ops.k.maintenance(0), _stray_field(ops, eid)) is None


def test_a_real_mismatch_is_still_dropped(ops: Ops) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    eid = ops.info(iid)["loc"][2:]
    # the hash is there but does not point at this entry (left by a crash)
    ops.r.hset(ops.k.ti(0, iid), "loc", "timer")
    assert ops.lease(n=5) == []
    assert ops.r.xlen(ops.stream()) == 0 and ops.pending() == {}
    assert ops.r.hget(ops.k.maintenance(0), _stray_field(ops, eid)) is None
