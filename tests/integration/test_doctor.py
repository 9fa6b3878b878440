"""``redcron doctor`` against a real Redis: a busy, healthy system has no
findings; each inconsistency an operator with redis-cli could make is found
with its kind and key; ``repair`` fixes the safe ones, a second examination
reports only what is not safely repairable, and a worker then drains
everything."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from cli_fixtures import Invoke, invoke_fixture, prefix_fixture  # noqa: F401 (fixtures)
from followups import follow  # tests/helpers
from worker_procs import thread_workers, wait_for  # tests/helpers

from redcron import App
from redcron.doctor import SCRIPTS, DoctorReport, examine
from redcron.engine import FailItem
from redcron.engine.beat import BeatStore, Park
from redcron.engine.scripts import full_source
from redcron.keys import GROUP, MAINT_STRAY, STRAY_MAX_MS
from redcron.model.jobs import Task

TTL_MS = 1000  # the leases the test takes by hand: reaped soon after the test leaves them


@pytest.fixture
def app(redis_url: str, prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=prefix, min_lease_ttl=0.5)

    @a.task(name="t.ok", retries=0)
    def ok(x: int) -> int:
        return x

    @a.task(name="t.bad", retries=0)
    def bad() -> None:
        raise ValueError("boom")

    yield a
    a.close()


def kinds(report: DoctorReport) -> list[tuple[str, str]]:
    return sorted((f.kind, f.key) for f in report.findings)


def busy(app: App) -> dict[str, Any]:
    """A busy, healthy system: ready, leased, succeeded, dead, countdown work,
    a DAG run half way, a scheduled job."""
    b = app.broker
    done = app.enqueue("t.ok", 1, _tenant="acme")
    leased = app.enqueue("t.ok", 2, _tenant="acme")
    app.enqueue("t.ok", 3, _tenant="acme")
    app.enqueue("t.ok", 4, _tenant="acme")
    app.enqueue("t.ok", 5, _tenant="globex", _priority="high")
    app.enqueue("t.ok", 6, _tenant="globex", _countdown=3600)
    (l1, l2) = b.leases.lease(0, "w-test", 2, TTL_MS, ["default"], tenants=["acme"])
    assert {l1.iid, l2.iid} == {done.id, leased.id}
    b.leases.complete(0, "w-test", [(l1.iid, l1.epoch, b"\x01")])
    dead = app.enqueue("t.bad", _tenant="globex")
    (ld,) = b.leases.lease(0, "w-test", 1, TTL_MS, ["default"], tenants=["globex"])
    if ld.iid != dead.id:  # globex's high-priority task came first: finish it
        b.leases.complete(0, "w-test", [(ld.iid, ld.epoch, b"\x01")])
        (ld,) = b.leases.lease(0, "w-test", 1, TTL_MS, ["default"], tenants=["globex"])
    (res,) = b.leases.fail(
        0, "w-test", [FailItem(ld.iid, ld.epoch, "failed", "ValueError: boom", False)]
    )
    assert res.state == "dead"
    app.jobs.put(
        "etl",
        tasks={
            "extract": Task("t.ok", args=[1], queue="etl"),
            "load": Task("t.ok", args=[2], depends_on=["extract"], queue="etl"),
        },
        tenant="acme",
    )
    run_id = app.jobs.trigger("etl", tenant="acme")
    (le,) = b.leases.lease(0, "w-test", 1, TTL_MS, ["etl"])
    b.leases.complete(0, "w-test", [(le.iid, le.epoch, b"\x01")])
    nightly = app.jobs.put("nightly", tasks={"t": Task("t.ok", args=[7])}, cron="0 3 * * *",
                           tenant="acme")  # fmt: skip
    return {"done": done.id, "leased": leased.id, "run": run_id, "nightly": nightly.id,
            "dead": ld.iid}  # fmt: skip


def test_a_busy_healthy_system_has_no_findings(app: App) -> None:
    busy(app)
    report = examine(app.broker)
    assert report.findings == (), kinds(report)
    assert report.clean
    by_tenant = {t.tenant: t for t in report.tenants}
    acme = by_tenant["acme"]
    assert (acme.in_flight, acme.in_flight_recount) == (1, 1)
    assert acme.queued == acme.queued_recount == acme.ready == 3  # 2 acme + the DAG's load
    assert by_tenant["globex"].dlq == 1
    assert report.summary.runs_active == 1 and report.summary.jobs == 2


def test_each_break_is_found_repaired_and_the_system_then_drains(app: App) -> None:
    ids = busy(app)
    r, k = app.broker.client, app.broker.keys
    ready_iid = app.enqueue("t.ok", 8, _tenant="acme").id
    before = examine(app.broker)
    assert before.findings == (), kinds(before)

    # -- break things as an operator with redis-cli could -------------------------------
    r.zrem(k.schedule(0), ids["nightly"])  # 1. a job off the schedule
    r.zadd(k.schedule(0), {"0-01NOSUCHJOB": 1})  # 2. a schedule entry for no job
    spare = k.q(0, "spare", "acme", "normal")  # 3. a pending entry no lease holds
    r.xgroup_create(spare, GROUP, "0", mkstream=True)
    r.xadd(spare, {"i": ids["done"]})  # (an instance whose hash is missing: a stray, kept)
    r.xreadgroup(GROUP, GROUP, {spare: ">"}, count=1)
    r.zadd(k.leases(0, "acme"), {ids["done"]: 1})  # 4. a lease of a succeeded instance
    loc = r.hget(k.ti(0, ready_iid), "loc").decode()  # 5. a ready instance off its stream
    r.xdel(k.q(0, "default", "acme", "normal"), loc[2:])
    r.zadd(k.ring(0, "default", "low"), {"nobody": 5})  # 6. a ring member with nothing ready
    r.hset(k.run(0, ids["run"]), "n_done", 5)  # 7. a wrong run counter
    r.zadd(k.timers(0), {"0-01NOSUCHTASK": 1})  # 8. a timer for no instance
    r.hset(k.ti(0, "0-01BADSTATE"), mapping={"state": "garbage", "tenant": "acme"})  # 9.
    r.hset(k.ti(0, "0-01NOSTATE"), mapping={"name": "t.ok", "queue": "default"})

    report = examine(app.broker)
    found = kinds(report)
    expected = [
        ("schedule_entry_missing", k.schedule(0)),
        ("schedule_entry_orphan", k.schedule(0)),
        ("pending_entry_orphan", spare),
        ("reaper_index_missing", k.pending(0)),
        ("lease_orphan", k.leases(0, "acme")),
        ("ready_not_in_stream", k.ti(0, ready_iid)),
        ("ring_member_idle", k.ring(0, "default", "low")),
        ("run_counters_wrong", k.run(0, ids["run"])),
        ("timer_orphan", k.timers(0)),
        ("instance_malformed", k.ti(0, "0-01BADSTATE")),
        ("instance_malformed", k.ti(0, "0-01NOSTATE")),
    ]
    assert found == sorted(expected), "\n".join(map(str, found))
    assert not report.clean
    for f in report.findings:
        assert f.detail and f.detail.endswith((".", ")")), f
        assert f.repairable == (f.kind != "instance_malformed"), f
        assert not f.repaired

    repaired = examine(app.broker, repair=True)
    assert kinds(repaired) == found
    for f in repaired.findings:
        assert f.repaired == f.repairable, f
        assert f.action if f.repairable else True, f
    assert repaired.summary.remaining == 2

    again = examine(app.broker)
    assert kinds(again) == [
        ("instance_malformed", k.ti(0, "0-01BADSTATE")),
        ("instance_malformed", k.ti(0, "0-01NOSTATE")),
    ]
    assert r.zscore(k.schedule(0), ids["nightly"]) is not None
    assert r.hget(k.run(0, ids["run"]), "n_done") == b"1"
    # the recount leaves a counter at 0 out, as a new run hash does
    assert r.hmget(k.run(0, ids["run"]), "n_failed", "n_cancelled") == [None, None]

    # the system works: a worker drains everything (the hand-left lease is reaped first)
    with thread_workers(app) as start:
        start(concurrency=4, queues=["default", "etl"])

        def drained() -> bool:
            loads = {t.tenant: t for t in app.broker.inspection.inspect()}
            return all(t.ready == 0 and t.in_flight == 0 for t in loads.values())

        wait_for(drained, "a worker to drain every queue", 20)
        wait_for(lambda: app.jobs.run(ids["run"]).state == "succeeded", "the DAG run", 20)
    assert app.broker.inspection.task_info(ready_iid).state == "succeeded"
    r.delete(k.ti(0, "0-01BADSTATE"), k.ti(0, "0-01NOSTATE"))
    final = examine(app.broker)
    assert final.findings == (), kinds(final)


def test_a_stray_entry_is_reported_kept_and_deleted_only_after_a_day(app: App) -> None:
    b, r, k = app.broker, app.broker.client, app.broker.keys
    h = app.enqueue("t.ok", 1, _tenant="acme")
    stream = k.q(0, "default", "acme", "normal")
    eid = r.hget(k.ti(0, h.id), "loc").decode()[2:]
    r.delete(k.ti(0, h.id))  # its hash moved ahead of the stream (a slot migration)
    assert b.leases.lease(0, "w1", 1, TTL_MS, ["default"]) == []  # left pending
    report = examine(b, repair=True)
    assert kinds(report) == [("stray_entry", stream)]
    (f,) = report.findings
    assert "missing" in f.detail and f.repairable and not f.repaired
    assert r.xrange(stream, eid, eid) and not report.clean  # kept
    field = f"{MAINT_STRAY}{stream}:{eid}"
    r.hset(k.maintenance(0), field, int(r.hget(k.maintenance(0), field)) - STRAY_MAX_MS)
    report = examine(b, repair=True)
    assert [(f.kind, f.repaired) for f in report.findings] == [("stray_entry", True)]
    assert not r.xrange(stream, eid, eid) and not r.hexists(k.maintenance(0), field)
    assert examine(b).findings == ()


def test_an_expired_lease_with_no_entry_is_ended_as_the_reaper_would(app: App) -> None:
    b, r, k = app.broker, app.broker.client, app.broker.keys
    h = app.enqueue("t.ok", 1, _tenant="acme")
    (_lease,) = b.leases.lease(0, "w-gone", 1, TTL_MS, ["default"])
    stream = k.q(0, "default", "acme", "normal")
    entry = r.hget(k.ti(0, h.id), "lease_entry").decode()
    r.xack(stream, GROUP, entry)  # "cleared" by hand: the reaper can no longer see the lease
    r.xdel(stream, entry)
    now = b.server_ms()
    live = examine(b, now_ms=now)
    (f,) = live.findings
    assert (f.kind, f.key, f.repairable) == ("lease_entry_missing", k.ti(0, h.id), False)
    later = examine(b, now_ms=now + 10 * TTL_MS, repair=True)
    (f,) = later.findings
    assert f.repaired and "lost" in f.action, f
    assert b.inspection.task_info(h.id).state == "dead"  # retries=0: the lost attempt was its last
    assert examine(b).findings == ()


def test_a_parked_tenant_below_its_cap_is_unparked(app: App) -> None:
    r, k = app.broker.client, app.broker.keys
    app.enqueue("t.ok", 1, _tenant="acme")
    r.zrem(k.ring(0, "default", "normal"), "acme")
    r.zrem(k.oldest(0, "default", "normal"), "acme")
    r.hset(k.tenant(0, "acme"), "parked", "default|normal")
    report = examine(app.broker)
    assert kinds(report) == [("tenant_parked_stuck", k.tenant(0, "acme"))]
    assert examine(app.broker, repair=True).summary.remaining == 0
    assert r.zscore(k.ring(0, "default", "normal"), "acme") is not None
    assert examine(app.broker).findings == ()


def test_the_open_breaker_index_is_checked_and_repaired(app: App) -> None:
    """attention's breaker:<job id> members list exactly the jobs whose breaker is
    open or in trial (the dashboard's overview reads them instead of every job);
    its parked:<job id> members are not breakers."""
    r, k = app.broker.client, app.broker.keys
    job_id = app.jobs.put("watched", every="1h", tasks={"t": Task("t.ok")}, tenant="acme").id
    r.hset(k.job(0, job_id), mapping={"breaker": "open", "breaker_until": 123})  # no index entry
    r.zadd(k.attention(0), {"breaker:no-such-job": 0, f"parked:{job_id}": 0})
    report = examine(app.broker)
    assert sorted(kinds(report)) == [
        ("breaker_index_missing", k.attention(0)),
        ("breaker_index_stale", k.attention(0)),
    ]
    assert examine(app.broker, repair=True).summary.remaining == 0
    assert r.zrange(k.attention(0), 0, -1) == [
        f"breaker:{job_id}".encode(),
        f"parked:{job_id}".encode(),
    ]
    assert [j.id for j in app.jobs.open_breakers()] == [job_id]
    assert examine(app.broker).findings == ()


def test_a_held_instance_missing_from_attention_is_added_back(app: App) -> None:
    """A held instance's one place is its attention member held:<instance id>:
    without it, closing the breaker would never release it."""
    r, k, b = app.broker.client, app.broker.keys, app.broker
    app.jobs.put("flaky", tasks={"t": Task("t.bad")}, tenant="acme", overlap="allow",
                 breaker_threshold=0.5, breaker_min_attempts=1)  # fmt: skip
    app.jobs.trigger("flaky", tenant="acme")
    [x] = b.leases.lease(0, "w", 1, 600_000, ["default"])
    b.leases.fail(0, "w", [FailItem(x.iid, x.epoch, "failed", "boom", False)])
    follow(app)  # the breaker counts in a follow-up
    assert app.jobs.get("flaky", tenant="acme").breaker == "open"
    held = f"{app.jobs.trigger('flaky', tenant='acme')}/t"
    assert b.leases.lease(0, "w", 1, 600_000, ["default"]) == []  # held aside
    assert r.zscore(k.attention(0), f"held:{held}") == 0
    r.zrem(k.attention(0), f"held:{held}")
    assert [f for f, _key in kinds(examine(b))] == ["held_missing"]
    assert examine(b, repair=True).summary.remaining == 0
    assert r.zscore(k.attention(0), f"held:{held}") == 0
    app.jobs.resume("flaky", tenant="acme")  # the breaker closes and releases it
    assert r.hget(k.ti(0, held), "state") == b"ready"
    assert examine(b).findings == ()


def test_a_job_the_beat_parked_is_not_a_missing_schedule_entry(app: App) -> None:
    """A parked job is off the schedule on purpose (issue 16 item 5): doctor must
    not report it, nor put it back with --repair (the beat would only park it
    again, with another WARNING)."""
    r, k = app.broker.client, app.broker.keys
    job = app.jobs.put("parked", every="1h", tasks={"t": Task("t.ok")}, tenant="acme")
    score = int(r.zscore(k.schedule(job.shard), job.id) or 0)
    park = Park(job.id, str(job.version), score, "unreadable spec: test")
    assert BeatStore(app.broker).park(job.shard, [park]) == [True]
    assert r.zscore(k.schedule(job.shard), job.id) is None
    assert examine(app.broker).findings == ()
    examine(app.broker, repair=True)
    assert r.zscore(k.schedule(job.shard), job.id) is None
    # resumed: back on the schedule, and doctor still finds nothing
    app.jobs.resume("parked", tenant="acme")
    assert r.zscore(k.schedule(job.shard), job.id) is not None
    assert examine(app.broker).findings == ()


def test_cli_doctor(app: App, invoke: Invoke) -> None:
    busy(app)
    clean = invoke("doctor")
    assert clean.exit_code == 0, clean.output
    assert "no findings" in clean.stdout
    r, k = app.broker.client, app.broker.keys
    r.zadd(k.timers(0), {"0-01NOSUCHTASK": 1})
    found = invoke("doctor")
    assert found.exit_code == 1, found.output
    assert "timer_orphan" in found.stdout and k.timers(0) in found.stdout
    as_json = invoke("doctor", "--json")
    assert as_json.exit_code == 1
    data = json.loads(as_json.stdout)
    assert [f["kind"] for f in data["findings"]] == ["timer_orphan"]
    assert data["summary"]["remaining"] == 1
    fixed = invoke("doctor", "--repair")
    assert fixed.exit_code == 0, fixed.output
    assert "repaired" in fixed.stdout
    assert invoke("doctor").exit_code == 0


def test_every_repair_script_compiles(app: App) -> None:
    for name in SCRIPTS:
        assert app.broker.client.script_load(full_source(name))


def test_a_dlq_entry_whose_instance_is_gone_is_found_and_dropped(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    # no script leaves one any more (a run keeps its retention off while a task of
    # it is in the DLQ); older versions did, and a hand DEL still can
    b, r, k = app.broker, app.broker.client, app.broker.keys
    dead = app.enqueue("t.bad", _tenant="acme")
    (ld,) = b.leases.lease(0, "w-test", 1, TTL_MS, ["default"])
    (res,) = b.leases.fail(0, "w-test", [FailItem(ld.iid, ld.epoch, "failed", "boom", False)])
    assert res.state == "dead"
    r.delete(k.ti(0, dead.id))
    report = examine(b)
    assert kinds(report) == [("dlq_entry_orphan", k.dlq(0, "acme"))]
    assert report.summary.dlq_expired == 1
    # dlq list drops it with a warning instead of listing what cannot be acted on
    with caplog.at_level("WARNING", logger="redcron.engine.dlq"):
        assert b.dlq.list("acme") == []
    assert dead.id in caplog.text and "no longer exists" in caplog.text
    assert r.xlen(k.dlq(0, "acme")) == 0
    assert examine(b).findings == ()


def test_doctor_repairs_a_dlq_entry_whose_instance_is_gone(app: App) -> None:
    b, r, k = app.broker, app.broker.client, app.broker.keys
    dead = app.enqueue("t.bad", _tenant="acme")
    (ld,) = b.leases.lease(0, "w-test", 1, TTL_MS, ["default"])
    b.leases.fail(0, "w-test", [FailItem(ld.iid, ld.epoch, "failed", "boom", False)])
    r.delete(k.ti(0, dead.id))
    fixed = examine(b, repair=True)
    assert [f.repaired for f in fixed.findings] == [True]
    assert r.xlen(k.dlq(0, "acme")) == 0


def test_a_stale_aging_entry_is_found_and_dropped(app: App) -> None:
    r, k = app.broker.client, app.broker.keys
    app.enqueue("t.ok", 1, _tenant="acme")
    assert examine(app.broker).findings == ()
    r.zadd(k.oldest(0, "default", "normal"), {"ghost": 1})  # no normal path leaves one
    assert kinds(examine(app.broker)) == [("aging_entry_stale", k.oldest(0, "default", "normal"))]
    assert examine(app.broker, repair=True).summary.remaining == 0
    assert r.zscore(k.oldest(0, "default", "normal"), "ghost") is None


def test_cancelling_ready_work_leaves_doctor_nothing_to_find(app: App) -> None:
    a = app.enqueue("t.ok", 1, _tenant="acme")
    b = app.enqueue("t.ok", 2, _tenant="acme")
    app.broker.cancel(a.id)
    assert examine(app.broker).findings == ()
    app.broker.cancel(b.id)
    assert examine(app.broker).findings == ()


def test_cancelling_running_work_leaves_doctor_nothing_to_find(app: App) -> None:
    # a cancel ends a leased attempt, its lease and (for a run) the run at once:
    # no lease set, stream entry, reaper index or run counter is left to disagree
    b = app.broker
    one = app.enqueue("t.ok", 1, _tenant="acme")
    app.jobs.put(
        "etl",
        tasks={
            "extract": Task("t.ok", args=[1], queue="etl"),
            "load": Task("t.ok", args=[2], depends_on=["extract"], queue="etl"),
        },
        tenant="acme",
    )
    run_id = app.jobs.trigger("etl", tenant="acme")
    (lo,) = b.leases.lease(0, "w-test", 1, TTL_MS, ["default"], tenants=["acme"])
    (le,) = b.leases.lease(0, "w-test", 1, TTL_MS, ["etl"])
    b.leases.start(0, "w-test", [(lo.iid, lo.epoch)])
    assert b.cancel(one.id).may_still_be_running
    assert app.jobs.cancel_run(run_id).running == ("extract",)
    report = examine(b)
    assert report.findings == (), kinds(report)
    assert {t.tenant: t.in_flight for t in report.tenants}.get("acme", 0) == 0
    assert report.summary.runs_active == 0
    # the workers' late reports are refused and change nothing
    assert b.leases.complete(0, "w-test", [(lo.iid, lo.epoch, b"\x01")]) == [False]
    (res,) = b.leases.fail(0, "w-test", [FailItem(le.iid, le.epoch, "failed", "late", True)])
    assert res.state is None
    assert examine(b).findings == ()
    assert app.jobs.run(run_id).state == "cancelled"
