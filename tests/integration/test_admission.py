"""Admission control on a real Redis: ``max_queued`` bounds a
tenant's ready instances.  A submission over the bound is refused with
:class:`QuotaExceeded` and writes nothing; a scheduled fire over the bound is
recorded as a ``rejected`` run and counted, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from redcron import App
from redcron.engine import argv
from redcron.engine.argv import FireArgs
from redcron.errors import Conflict, QuotaExceeded, Rejected
from redcron.keys import shard_of
from redcron.model.jobs import Task

TENANT = "acme"
SHARD = 0  # one shard: the tenant, its job and its runs all live here
FIRE_MS = 1_700_000_040_000


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), shards=1)

    @a.task(name="t.noop", retries=0)
    def noop(x: int) -> int:
        return x

    a.broker.ensure_meta()
    a.tenants.set(TENANT, max_queued=5)
    yield a
    a.close()


def everything(r: redis.Redis, prefix: str) -> dict[bytes, object]:
    """Every key under the test prefix with its full content (a write-detector)."""
    out: dict[bytes, object] = {}
    for key in sorted(r.scan_iter(match=f"{prefix}:*", count=1000)):
        kind = r.type(key)
        if kind == b"hash":
            out[key] = r.hgetall(key)
        elif kind == b"stream":
            out[key] = r.xrange(key)
        elif kind == b"zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        elif kind == b"set":
            out[key] = r.smembers(key)
        elif kind == b"list":
            out[key] = r.lrange(key, 0, -1)
        else:
            out[key] = r.get(key)
    return out


def queued(app: App) -> int:
    [ready] = app.broker.inspection.ready_counts(
        [app.broker.keys.q(SHARD, "default", TENANT, "normal")]
    )
    return ready


def test_a_submission_over_max_queued_is_refused_and_writes_nothing(
    app: App, r: redis.Redis
) -> None:
    noop = app.tasks["t.noop"]
    prefix = app.settings.prefix
    before = everything(r, prefix)

    with pytest.raises(QuotaExceeded, match="max_queued of 5") as exc:
        noop.enqueue_many([(i,) for i in range(6)], _tenant=TENANT)
    assert isinstance(exc.value, Rejected)
    assert everything(r, prefix) == before  # not one key created or changed
    assert queued(app) == 0

    handles = noop.enqueue_many([(i,) for i in range(5)], _tenant=TENANT)
    assert queued(app) == 5
    after_five = everything(r, prefix)
    with pytest.raises(QuotaExceeded):
        noop.enqueue(99, _tenant=TENANT)
    with pytest.raises(QuotaExceeded):
        app.enqueue("t.noop", 99, _tenant=TENANT, _priority="high")  # every class counts
    assert everything(r, prefix) == after_five
    assert queued(app) == 5

    # another tenant is not limited by acme's bound
    noop.enqueue(1, _tenant="other")

    # leasing frees room: exactly as many as were leased may come in again
    leases = app.broker.leases.lease(SHARD, "w1", 2, 60_000, ["default"], tenants=[TENANT])
    assert {x.iid for x in leases} <= {h.id for h in handles} and len(leases) == 2
    assert queued(app) == 3
    noop.enqueue_many([(7,), (8,)], _tenant=TENANT)
    assert queued(app) == 5
    with pytest.raises(QuotaExceeded):
        noop.enqueue(9, _tenant=TENANT)


# -- a batch bigger than one script call is all or nothing (issue 7, bug 4) -----------


def test_a_batch_is_admitted_before_its_writes_even_when_redis_lost_its_scripts(
    app: App, r: redis.Redis
) -> None:
    # after a SCRIPT FLUSH (or a restart) only enqueue.lua is loaded again: the
    # batch's admission calls must not find no script while its writes go ahead
    app.tenants.set(TENANT, max_queued=300)
    noop = app.tasks["t.noop"]
    r.script_flush()
    noop.enqueue(0, _tenant=TENANT)  # loads enqueue.lua only
    before = everything(r, app.settings.prefix)
    with pytest.raises(QuotaExceeded, match="max_queued of 300"):
        noop.enqueue_many([(i,) for i in range(600)], _tenant=TENANT)
    assert everything(r, app.settings.prefix) == before
    assert queued(app) == 1


def test_a_batch_over_max_queued_spanning_calls_is_refused_and_writes_nothing(
    app: App, r: redis.Redis
) -> None:
    # 600 rows are three enqueue.lua calls; the first (256) fits under 300 on its
    # own and used to be written before the second refused
    app.tenants.set(TENANT, max_queued=300)
    noop = app.tasks["t.noop"]
    prefix = app.settings.prefix
    noop.enqueue_many([(i,) for i in range(10)], _tenant=TENANT)
    before = everything(r, prefix)

    with pytest.raises(QuotaExceeded, match="max_queued of 300"):
        noop.enqueue_many([(i,) for i in range(600)], _tenant=TENANT)
    # no instance hash, no stream entry, no ring/index/wake change, no refusal key left
    assert everything(r, prefix) == before
    assert queued(app) == 10

    # countdown tasks are not counted until due, but a refused batch writes none either
    with pytest.raises(QuotaExceeded):
        noop.enqueue_many([(i,) for i in range(291)], _tenant=TENANT)
    mixed = [
        app._row("t.noop", "python", [[i], {}], noop.options, {"_tenant": TENANT})
        for i in range(300)
    ]
    mixed += [
        app._row("t.noop", "python", [[i], {}], noop.options, {"_tenant": TENANT, "_countdown": 60})
        for i in range(300)
    ]
    with pytest.raises(QuotaExceeded):
        app.broker.enqueuer.enqueue(mixed)
    assert everything(r, prefix) == before
    assert r.zcard(app.broker.keys.timers(SHARD)) == 0


@pytest.mark.parametrize("where", ["exists already", "twice in the batch"])
def test_a_duplicate_id_in_a_later_call_of_a_batch_writes_nothing(
    app: App, r: redis.Redis, where: str
) -> None:
    app.tenants.set(TENANT, max_queued=0)  # no bound: only the id refuses
    noop = app.tasks["t.noop"]
    [old] = noop.enqueue_many([(0,)], _tenant=TENANT)
    prefix = app.settings.prefix
    before = everything(r, prefix)
    rows = [
        app._row("t.noop", "python", [[i], {}], noop.options, {"_tenant": TENANT})
        for i in range(600)
    ]
    # in the second chunk: the first 256 rows would be a call of their own
    repeated = old.id if where == "exists already" else rows[10].iid
    rows[300] = rows[300]._replace(iid=repeated)
    with pytest.raises(Conflict):
        app.broker.enqueuer.enqueue(rows)
    assert everything(r, prefix) == before


def test_a_batch_that_fits_is_written_whole(app: App, r: redis.Redis) -> None:
    app.tenants.set(TENANT, max_queued=600)
    noop = app.tasks["t.noop"]
    handles = noop.enqueue_many([(i,) for i in range(600)], _tenant=TENANT)
    later = noop.enqueue_many([(i,) for i in range(300)], _tenant=TENANT, _countdown=60)
    assert queued(app) == 600
    assert r.zcard(app.broker.keys.timers(SHARD)) == 300
    pipe = r.pipeline(transaction=False)
    for h in handles + later:
        pipe.hget(app.broker.keys.ti(SHARD, h.id), "state")
    assert pipe.execute() == [b"ready"] * 600 + [b"scheduled"] * 300
    # the batch's refusal marker and its reservation are gone
    assert not list(r.scan_iter(match=f"{app.settings.prefix}:*batch:*"))
    assert not list(r.scan_iter(match=f"{app.settings.prefix}:*reserved:*"))
    with pytest.raises(QuotaExceeded):
        noop.enqueue(1, _tenant=TENANT)


def test_an_admitted_batch_reserves_its_room_until_it_is_written(app: App, r: redis.Redis) -> None:
    # between admission and its last write, nothing else may take the batch's room
    # (else it would be refused half-way, or the tenant pushed past max_queued)
    app.tenants.set(TENANT, max_queued=300)
    noop = app.tasks["t.noop"]
    rows = [
        app._row("t.noop", "python", [[i], {}], noop.options, {"_tenant": TENANT})
        for i in range(290)
    ]
    batch = app.broker.keys.lock(SHARD, "batch:b1")
    ids = [row.iid for row in rows]
    args = argv.enqueue_check({TENANT: 290}, ids)
    assert app.broker._run("enqueue_check", SHARD, args, None, batch)
    reserved = app.broker.keys.reserved(SHARD, TENANT)
    assert r.hget(reserved, batch) == b"290"
    with pytest.raises(QuotaExceeded, match="has 290 queued"):
        noop.enqueue_many([(i,) for i in range(11)], _tenant=TENANT)
    # the batch's own calls are not counted twice, and use the reservation up
    assert app.broker._run("enqueue", SHARD, argv.enqueue(rows[:256]), None, batch) == 256
    assert r.hget(reserved, batch) == b"34"
    with pytest.raises(QuotaExceeded, match="has 290 queued"):
        noop.enqueue_many([(i,) for i in range(11)], _tenant=TENANT)
    assert app.broker._run("enqueue", SHARD, argv.enqueue(rows[256:]), None, batch) == 34
    assert not r.exists(reserved)
    assert len(noop.enqueue_many([(i,) for i in range(10)], _tenant=TENANT)) == 10
    assert queued(app) == 300


def test_a_reservation_whose_client_died_expires(app: App, r: redis.Redis) -> None:
    app.tenants.set(TENANT, max_queued=5)
    noop = app.tasks["t.noop"]
    reserved = app.broker.keys.reserved(SHARD, TENANT)
    dead, live = (
        app.broker.keys.lock(SHARD, "batch:dead"),
        app.broker.keys.lock(SHARD, "batch:live"),
    )
    far = 2**50  # ms: later than any server clock
    r.hset(reserved, mapping={dead: 5, f"{dead}:exp": 1, live: 2, f"{live}:exp": far})
    # the expired one is not counted (and is cleaned up); the live one is
    assert len(noop.enqueue_many([(1,), (2,), (3,)], _tenant=TENANT)) == 3
    with pytest.raises(QuotaExceeded):
        noop.enqueue(4, _tenant=TENANT)
    assert r.hgetall(reserved) == {live.encode(): b"2", f"{live}:exp".encode(): str(far).encode()}


def test_a_batch_spanning_shards_is_refused_whole(redis_url: str, key_prefix: str) -> None:
    a = App(redis_url, prefix=key_prefix.rstrip(":") + "x", shards=4)
    noop = a.task(lambda x: x, name="t.noop")
    try:
        a.broker.ensure_meta()
        full, fine = "acme", "zeta"
        assert a.broker.shards == 4
        assert shard_of(full, 4) != shard_of(fine, 4)
        a.tenants.set(full, max_queued=3)
        a.tenants.set(fine, max_queued=100)  # its shard reserves room, then releases it
        rows = [
            a._row("t.noop", "python", [[i], {}], noop.options, {"_tenant": t})
            for t in (fine, full)
            for i in range(4)
        ]
        before = everything(a.broker.client, a.settings.prefix)
        with pytest.raises(QuotaExceeded):
            a.broker.enqueuer.enqueue(rows)
        assert everything(a.broker.client, a.settings.prefix) == before
        assert a.broker.enqueuer.enqueue(rows[:7]) == 7
    finally:
        for key in a.broker.client.scan_iter(match=f"{a.settings.prefix}:*"):
            a.broker.client.delete(key)
        a.close()


def _fire(app: App, job_id: str, fire_ms: int) -> tuple[str, str]:
    return app.broker.beat.fire_one(
        SHARD, FireArgs(job_id, "", "", fire_ms, None, None, "", "cron", 0, f"{job_id}@{fire_ms}")
    )


def test_a_fire_over_max_queued_is_recorded_as_rejected_and_creates_no_instances(
    app: App, r: redis.Redis
) -> None:
    job = app.jobs.put(
        "nightly",
        tasks={"a": Task("t.noop", args=[1]), "b": Task("t.noop", args=[2], depends_on=["a"])},
        cron="0 0 * * *",
        tenant=TENANT,
    )
    job_id = job.id
    app.tasks["t.noop"].enqueue_many([(i,) for i in range(5)], _tenant=TENANT)
    k, prefix = app.broker.keys, app.settings.prefix
    streams_before = {
        key: r.xrange(key) for key in r.scan_iter(match=f"{prefix}:*:q:*", count=1000)
    }
    ti_before = set(r.scan_iter(match=f"{prefix}:*:ti:*", count=1000))

    status, run_id = _fire(app, job_id, FIRE_MS)
    assert (status, run_id) == ("rejected", f"{job_id}@{FIRE_MS}")

    raw: dict[bytes, bytes] = r.hgetall(k.run(SHARD, run_id))  # type: ignore[assignment]
    run = {a.decode(): b.decode() for a, b in raw.items()}
    assert run["state"] == "rejected"
    assert "max_queued" in run["reason"]
    assert run["scheduled_for"] == str(FIRE_MS)
    assert r.zscore(k.runs(SHARD, job_id), run_id) == FIRE_MS
    assert app.broker.inspection.stats().get("fires_rejected") == 1
    assert app.jobs.run(run_id).state == "rejected"
    # no instances, nothing queued, not active
    assert set(r.scan_iter(match=f"{prefix}:*:ti:*", count=1000)) == ti_before
    assert not list(r.scan_iter(match=f"{prefix}:*:ti:{run_id}/*", count=1000))
    assert {
        key: r.xrange(key) for key in r.scan_iter(match=f"{prefix}:*:q:*", count=1000)
    } == streams_before
    assert r.scard(k.active(SHARD, job_id)) == 0

    # a replay of the same fire is not a second rejection
    assert _fire(app, job_id, FIRE_MS) == ("exists", run_id)
    assert app.broker.inspection.stats().get("fires_rejected") == 1

    # with room again (one leased), the next fire creates its run (one root)
    app.broker.leases.lease(SHARD, "w1", 1, 60_000, ["default"], tenants=[TENANT])
    status, run2 = _fire(app, job_id, FIRE_MS + 86_400_000)
    assert status == "created"
    assert r.hget(k.run(SHARD, run2), "state") == b"queued"
    assert queued(app) == 5


def test_a_manual_trigger_over_max_queued_is_refused_with_a_clear_error(
    redis_url: str, key_prefix: str
) -> None:
    app = App(redis_url, prefix=key_prefix.rstrip(":"))
    try:

        @app.task(name="adm.t")
        def t() -> None: ...

        app.tenants.set("full", max_queued=1)
        app.jobs.put("j", tasks={"a": Task("adm.t")}, tenant="full", overlap="allow")
        app.jobs.trigger("j", tenant="full")
        with pytest.raises(QuotaExceeded, match="max_queued"):
            app.jobs.trigger("j", tenant="full")
        states = [r.state for r in app.jobs.runs(app.jobs.job_id("j", tenant="full"))]
        assert sorted(states) == ["queued", "rejected"]
    finally:
        app.close()
