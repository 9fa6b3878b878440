"""Run deadlines at the script level (real Redis, ``now`` passed in, no sleeping).

A job's ``deadline_s`` arms a deadline (nominal fire time + deadline) in the
shard's ``deadlines`` index when a run is made; the run's end disarms it;
``deadline_sweep.lua`` marks late, once, the runs still going when theirs is
due: the run hash's ``late``, the tenant's counter in ``late`` and a
``run_late`` event (the contract the notifications read: type, tenant, job,
run, at, detail).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from followups import follow  # tests/helpers
from redis.crc import key_slot

from redcron import App
from redcron.engine import FailItem, Lease
from redcron.engine.argv import FireArgs
from redcron.engine.beat import LateRun, Swept
from redcron.model import JobRecord
from redcron.model.jobs import Task
from redcron.model.records import from_ms

TENANT = "acme"
WORKER = "w1"
T0 = 1_700_000_040_000  # a nominal fire time (ms): 2023-11-14T22:14:00Z
DEADLINE_MS = 300_000


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    a.broker.ensure_meta()
    yield a
    a.close()


def job(app: App, name: str = "nightly", **policies: Any) -> str:
    policies.setdefault("deadline_s", DEADLINE_MS / 1000)
    return put(app, name, tasks={"a": Task("t")}, tenant=TENANT, **policies).id


def put(app: App, name: str, **fields: Any) -> JobRecord:
    """app.jobs.put of a job whose task no app here registers (scripts under test)."""
    return app.jobs.put(name, allow_unregistered=True, **fields)


def fire(app: App, job_id: str, fire_ms: int = T0) -> str:
    """Fire as the beat would (not from the schedule: the score is not checked)."""
    status, rid = app.broker.beat.fire_one(
        0, FireArgs(job_id, "", "", fire_ms, None, None, "", "cron", 0, f"{job_id}@{fire_ms}")
    )
    assert status == "created"
    return rid


def sweep(app: App, now: int) -> Swept:
    return app.broker.beat.sweep_deadlines(0, now)


def lease(app: App) -> list[Lease]:
    return app.broker.leases.lease(0, WORKER, 16, 60_000, ["default"])


def complete(app: App, *leases: Lease) -> None:
    done = app.broker.leases.complete(0, WORKER, [(x.iid, x.epoch, b"\xc0") for x in leases])
    assert done == [True] * len(leases)
    follow(app)  # chained and buffered runs are follow-ups of a run's end


def index(app: App) -> dict[str, int]:
    raw: Any = app.broker.client.zrange(app.broker.keys.deadlines(0), 0, -1, withscores=True)
    return {m.decode(): int(s) for m, s in raw}


def events(app: App) -> list[dict[str, str]]:
    raw: Any = app.broker.client.xrange(app.broker.keys.events(0))
    return [{k.decode(): v.decode() for k, v in fields.items()} for _eid, fields in raw]


def late_counts(app: App) -> dict[str, int]:
    raw: Any = app.broker.client.hgetall(app.broker.keys.counters(0))
    return {
        k.decode().removeprefix("late:"): int(v) for k, v in raw.items() if k.startswith(b"late:")
    }


def test_a_run_past_its_deadline_is_marked_late_once(app: App) -> None:
    job_id = job(app)
    rid = fire(app, job_id)
    deadline = T0 + DEADLINE_MS
    assert index(app) == {rid: deadline}
    assert app.jobs.run(rid).deadline_at == from_ms(deadline)

    assert sweep(app, deadline - 1) == Swept(0, [])  # not due yet
    assert app.jobs.run(rid).late_at is None

    swept = sweep(app, deadline + 5)
    assert swept == Swept(1, [LateRun(rid, TENANT, "nightly", T0, deadline)])
    run = app.jobs.run(rid)
    assert run.late and run.late_at == from_ms(deadline + 5)
    assert run.state == "queued"  # still going: the alert comes while it runs
    assert index(app) == {}
    assert late_counts(app) == {TENANT: 1, "*": 1}
    [event] = events(app)
    assert event == {
        "type": "run_late",
        "tenant": TENANT,
        "job": job_id,
        "job_name": "nightly",
        "run": rid,
        "at": str(deadline + 5),
        "detail": "deadline 300s after 2023-11-14T22:14:00Z",
    }

    # a second sweep finds nothing: once per run
    assert sweep(app, deadline + 60_000) == Swept(0, [])
    assert late_counts(app) == {TENANT: 1, "*": 1}
    assert len(events(app)) == 1
    assert app.jobs.run(rid).late_at == from_ms(deadline + 5)

    # it stays late once it ends, and its end has nothing left to disarm
    complete(app, *lease(app))
    run = app.jobs.run(rid)
    assert (run.state, run.late) == ("succeeded", True)
    assert index(app) == {}


def test_a_run_that_ended_before_its_deadline_is_never_late(app: App) -> None:
    job_id = job(app)
    rid = fire(app, job_id)
    complete(app, *lease(app))
    assert app.jobs.run(rid).state == "succeeded"
    assert index(app) == {}  # disarmed by the run's end
    assert sweep(app, T0 + 10 * DEADLINE_MS) == Swept(0, [])
    run = app.jobs.run(rid)
    assert run.late_at is None and run.deadline_at == from_ms(T0 + DEADLINE_MS)
    assert late_counts(app) == {}
    assert events(app) == []


def test_an_entry_whose_run_ended_or_is_gone_is_dropped_without_a_mark(app: App) -> None:
    """An entry left behind (by hand, or by an older version), or whose run key
    is no hash, only leaves the index: it never stops the shard's sweeps."""
    job_id = job(app)
    ended = fire(app, job_id, T0)
    complete(app, *lease(app))
    gone = f"{job_id}@{T0 + 1}"
    garbage = f"{job_id}@{T0 + 2}"
    app.broker.client.set(app.broker.keys.run(0, garbage), "not a hash")
    app.broker.client.zadd(app.broker.keys.deadlines(0), {ended: T0, gone: T0, garbage: T0})
    assert sweep(app, T0 + 1) == Swept(3, [])
    assert index(app) == {}
    assert events(app) == []


def test_a_manual_run_counts_its_deadline_from_its_trigger(app: App) -> None:
    job(app, deadline_s=1.5)
    now = T0 + 123
    rid = app.jobs.trigger("nightly", tenant=TENANT, now=now)
    assert index(app) == {rid: now + 1_500}
    [late] = sweep(app, now + 1_500).late
    assert (late.run_id, late.scheduled_for_ms, late.deadline_ms) == (rid, now, now + 1_500)
    [event] = events(app)
    assert event["detail"] == "deadline 1.5s after 2023-11-14T22:14:00Z"


def test_a_job_without_a_deadline_arms_none_and_dropping_it_stops_arming(app: App) -> None:
    job_id = job(app, deadline_s=None, overlap="allow")
    rid = fire(app, job_id, T0)
    assert index(app) == {}
    assert app.jobs.run(rid).deadline_at is None
    client, keys = app.broker.client, app.broker.keys
    assert b"deadline" not in client.hkeys(keys.run(0, rid))

    job(app, overlap="allow")  # the deadline added
    assert client.hget(keys.job(0, job_id), "deadline_ms") == b"300000"
    job(app, deadline_s=None, overlap="allow")  # and taken away again
    assert client.hget(keys.job(0, job_id), "deadline_ms") is None
    fire(app, job_id, T0 + 60_000)
    assert index(app) == {}


def test_late_runs_are_counted_per_tenant(app: App) -> None:
    job_id = job(app, overlap="allow")
    other = put(app, "other", tasks={"a": Task("t")}, tenant="globex", deadline_s=60).id
    runs = [fire(app, job_id, T0 + i * 60_000) for i in range(3)]
    mine = fire(app, other, T0)
    swept = sweep(app, T0 + 2 * 60_000 + DEADLINE_MS)
    assert {r.run_id for r in swept.late} == {*runs, mine}
    assert late_counts(app) == {TENANT: 3, "globex": 1, "*": 4}


def test_a_retried_run_is_armed_again_only_while_its_deadline_is_ahead(app: App) -> None:
    put(app, "flaky", tasks={"a": Task("t", retries=0)}, tenant=TENANT, deadline_s=300)
    now = app.broker.server_ms()
    rid = app.jobs.trigger("flaky", tenant=TENANT, now=now)
    deadline = now + 300_000

    def fail_it() -> None:
        [x] = lease(app)
        item = FailItem(x.iid, x.epoch, "failed", "boom", retryable=False)
        app.broker.leases.fail(0, WORKER, [item])
        assert app.jobs.run(rid).state == "failed"
        assert index(app) == {}

    fail_it()
    assert app.jobs.retry_run(rid, ["a"]) == 1  # before the deadline: armed again
    assert index(app) == {rid: deadline}
    fail_it()
    assert app.jobs.retry_run(rid, ["a"], now=deadline + 1) == 1  # after it: ended in time
    assert index(app) == {}
    assert sweep(app, deadline + 2) == Swept(0, [])


def test_every_key_a_sweep_writes_is_in_the_shards_slot(app: App) -> None:
    job_id = job(app)
    fire(app, job_id)
    sweep(app, T0 + DEADLINE_MS)
    keys = app.broker.keys
    slot = key_slot(keys.shard(0).encode())
    for key in (keys.deadlines(0), keys.counters(0), keys.events(0), keys.run(0, "x")):
        assert key_slot(key.encode()) == slot


@pytest.mark.parametrize(
    "iso",
    [
        "1970-01-01T00:00:00Z",
        "2000-02-29T12:34:56Z",
        "2024-02-29T23:59:59Z",
        "2024-12-31T23:59:59Z",
        "2100-03-01T00:00:00Z",
        "2026-12-01T10:00:00Z",
    ],
)
def test_the_event_detail_names_the_nominal_fire_time_in_utc(app: App, iso: str) -> None:
    """deadline_sweep.lua writes the date itself (Redis's Lua has no os.date)."""
    job(app, deadline_s=60)
    fire_ms = int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000) + 999
    rid = app.jobs.trigger("nightly", tenant=TENANT, now=fire_ms)
    assert [r.run_id for r in sweep(app, fire_ms + 60_000).late] == [rid]
    [event] = events(app)
    assert event["detail"] == f"deadline 60s after {iso}"


def test_a_chained_and_a_buffered_run_are_armed_from_their_own_fire_time(app: App) -> None:
    """Runs made by a run's end (lib/runs.lua: a buffered fire; lib/chain.lua: a
    chained run) read the job's deadline too (the job_run read)."""
    up = put(app, "up", tasks={"a": Task("t")}, tenant=TENANT).id
    down = put(
        app, "down", tasks={"b": Task("t")}, tenant=TENANT, depends_on=["up"], deadline_s=30
    ).id
    buffered = job(app, "buf", overlap="buffer_one")
    first = fire(app, buffered, T0)
    status, _ = app.broker.beat.fire_one(
        0, FireArgs(buffered, "", "", T0 + 60_000, None, None, "", "cron", 0,
                    f"{buffered}@{T0 + 60_000}"),
    )  # fmt: skip
    assert status == "buffered"
    fire(app, up, T0)
    leased = {x.iid.split("@")[0]: x for x in lease(app)}
    complete(app, leased[up], leased[buffered])  # up's end chains down; first's starts the buffer
    [chained] = app.jobs.runs(down)
    assert chained.trigger == "chain" and chained.scheduled_for is not None
    chained_ms = int(chained.scheduled_for.timestamp() * 1000)
    assert index(app) == {chained.id: chained_ms + 30_000, f"{buffered}@{T0 + 60_000}":
                          T0 + 60_000 + DEADLINE_MS}  # fmt: skip
    assert app.jobs.run(first).state == "succeeded"
