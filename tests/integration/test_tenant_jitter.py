"""A tenant's default ``jitter_s`` against a real Redis: it spreads the due times of
the tenant's jobs without their own jitter (a job's own jitter wins), is read live,
never changes the stored spec, and the beat fires jitter-delayed jobs once each.

Tests call :meth:`Beat.tick` directly and poll with deadlines.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from beats import runs_of, tick_until  # tests/helpers

from redcron import App
from redcron.beat import planning
from redcron.beat.beat import Beat
from redcron.model.jobs import JobSpec, Task
from redcron.model.records import epoch_ms
from redcron.schedule.jitter import effective_jitter_s, jitter_ms, tenant_jitter_s
from redcron.schedule.plan import plan_fires

TASKS = {"t": Task("noop")}
TENANT = "mid"


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    yield a
    a.close()


def due_and_nominal(app: App, job_id: str) -> tuple[int, int]:
    info = app.jobs.get_by_id(job_id)
    assert info.scheduled_due is not None and info.next_fire is not None
    return epoch_ms(info.scheduled_due), epoch_ms(info.next_fire)


# -- pure helpers --------------------------------------------------------------------------


def test_a_job_own_jitter_wins_over_the_tenant_default() -> None:
    assert effective_jitter_s(JobSpec(name="a", tasks=TASKS, every="1s").jitter_s, 30) == 30
    assert (
        effective_jitter_s(JobSpec(name="a", tasks=TASKS, every="1s", jitter_s=5).jitter_s, 30) == 5
    )
    assert effective_jitter_s(JobSpec(name="a", tasks=TASKS, every="1s").jitter_s, 0) == 0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, 0.0), (b"30", 30.0), ("2.5", 2.5), (b"", 0.0), (b"x", 0.0), ("-1", 0.0), ("nan", 0.0)],
)
def test_a_stored_tenant_jitter_is_read_leniently(raw: Any, expected: float) -> None:
    assert tenant_jitter_s(raw) == expected


def test_plan_fires_uses_the_tenant_default_for_the_next_due_time() -> None:
    plain = JobSpec(name="a", tasks=TASKS, every="10s")
    own = JobSpec(name="b", tasks=TASKS, every="10s", jitter_s=5)
    nominal = 1_700_000_000_000
    for spec, jitter in ((plain, 30), (own, 5)):
        (fire,) = plan_fires(
            "0-j", spec.fire_policy(), spec.trigger(), nominal, nominal, nominal, 60_000, 30
        )
        assert fire.next_ms == nominal + 10_000
        assert fire.next_due == fire.next_ms + jitter_ms("0-j", fire.next_ms, jitter)
    (fire,) = plan_fires(
        "0-j", plain.fire_policy(), plain.trigger(), nominal, nominal, nominal, 60_000
    )
    assert fire.next_due == fire.next_ms


# -- JobStore --------------------------------------------------------------------------------


def test_a_tenant_default_jitter_spreads_jobs_without_their_own(app: App) -> None:
    app.tenants.set(TENANT, jitter_s=30)
    specs = [
        JobSpec(name=f"m{i}", tenant=TENANT, tasks=dict(TASKS), cron="0 0 * * *") for i in range(20)
    ]
    ids = [r.id for r in app.jobs.put_many(specs, allow_unregistered=True)]
    offsets = []
    for jid in ids:
        due, nominal = due_and_nominal(app, jid)
        assert nominal <= due <= nominal + 30_000
        assert due == nominal + jitter_ms(jid, nominal, 30)  # deterministic
        offsets.append(due - nominal)
    assert sum(o != 0 for o in offsets) >= 18, offsets
    assert len(set(offsets)) > 10, offsets  # spread, not one shared offset
    # the default is not copied into the stored spec
    spec = json.loads(app.jobs.get_by_id(ids[0]).spec)
    assert spec["jitter_s"] == 0


def test_a_job_with_its_own_jitter_keeps_it(app: App) -> None:
    app.tenants.set(TENANT, jitter_s=30)
    ids = [
        app.jobs.put(
            f"own{i}",
            tenant=TENANT,
            tasks=TASKS,
            cron="0 0 * * *",
            jitter_s=5,
            allow_unregistered=True,
        ).id
        for i in range(20)
    ]
    for jid in ids:
        due, nominal = due_and_nominal(app, jid)
        assert nominal <= due <= nominal + 5_000
        assert due == nominal + jitter_ms(jid, nominal, 5)


def test_other_tenants_and_a_zero_default_are_not_jittered(app: App) -> None:
    app.tenants.set(TENANT, jitter_s=30)
    other = app.jobs.put(
        "o", tenant="other", tasks=TASKS, cron="0 0 * * *", allow_unregistered=True
    )
    due, nominal = due_and_nominal(app, other.id)
    assert due == nominal
    app.tenants.set(TENANT, jitter_s=0)
    job = app.jobs.put("z", tenant=TENANT, tasks=TASKS, cron="0 0 * * *", allow_unregistered=True)
    due, nominal = due_and_nominal(app, job.id)
    assert due == nominal


def test_reapplying_an_unchanged_job_is_still_a_no_op(app: App) -> None:
    spec = JobSpec(name="same", tenant=TENANT, tasks=dict(TASKS), cron="0 0 * * *")
    first = app.jobs.put(spec, allow_unregistered=True)
    before = due_and_nominal(app, first.id)
    app.tenants.set(TENANT, jitter_s=30)
    again = app.jobs.put(spec, allow_unregistered=True)
    assert again.change == "unchanged" and again.version == first.version
    assert due_and_nominal(app, first.id) == before


def test_resume_reads_the_tenant_default_live(app: App) -> None:
    job = app.jobs.put("r", tenant=TENANT, tasks=TASKS, cron="0 0 * * *", allow_unregistered=True)
    due, nominal = due_and_nominal(app, job.id)
    assert due == nominal
    app.jobs.pause("r", tenant=TENANT)
    app.tenants.set(TENANT, jitter_s=30)
    app.jobs.resume("r", tenant=TENANT)
    due, nominal = due_and_nominal(app, job.id)
    assert due == nominal + jitter_ms(job.id, nominal, 30)


# -- the beat --------------------------------------------------------------------------------


def test_the_beat_fires_tenant_jittered_jobs_once_at_their_due_time(app: App) -> None:
    app.tenants.set(TENANT, jitter_s=2)
    ids = [
        app.jobs.put(
            f"b{i}",
            tenant=TENANT,
            tasks=TASKS,
            cron="*/3 * * * * *",
            overlap="allow",
            allow_unregistered=True,
        ).id
        for i in range(3)
    ]
    beat = Beat(app, name="b1")
    tick_until(beat, lambda: all(len(runs_of(app, j)) >= 2 for j in ids), "two runs per job")
    for _ in range(5):
        beat.tick()
    for jid in ids:
        runs = runs_of(app, jid)
        nominal = [epoch_ms(r.scheduled_for) for r in runs]
        assert len(set(nominal)) == len(nominal), "a fire time fired twice"
        assert all(y - x == 3000 for x, y in itertools.pairwise(nominal)), nominal
        for r, n in zip(runs, nominal, strict=True):
            due = n + jitter_ms(jid, n, 2)
            assert epoch_ms(r.created_at) >= due, "fired before its jittered due time"
            assert r.trigger == "cron"
        due, nxt = due_and_nominal(app, jid)
        assert due == nxt + jitter_ms(jid, nxt, 2)


def test_the_beat_reads_a_changed_tenant_default(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planning, "TENANT_JITTER_REFRESH_S", 0.0)  # re-read at every page
    job = app.jobs.put(
        "live", tenant=TENANT, tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True
    )
    jid = job.id
    beat = Beat(app, name="b1")
    tick_until(beat, lambda: runs_of(app, jid), "a first run")
    due, nxt = due_and_nominal(app, jid)
    assert due == nxt  # no jitter anywhere yet
    app.tenants.set(TENANT, jitter_s=0.5)
    n = len(runs_of(app, jid))
    tick_until(beat, lambda: len(runs_of(app, jid)) >= n + 2, "runs after the change")
    due, nxt = due_and_nominal(app, jid)
    assert due == nxt + jitter_ms(jid, nxt, 0.5)
    app.tenants.set(TENANT, jitter_s=0)
    n = len(runs_of(app, jid))
    tick_until(beat, lambda: len(runs_of(app, jid)) >= n + 2, "runs after the reset")
    due, nxt = due_and_nominal(app, jid)
    assert due == nxt  # the default is 0 again
    # a score stored with the old default by someone else (not this beat's fire), the
    # default now 0 and known to the beat: the jittered score is not the nominal time
    monkeypatch.setattr(planning, "TENANT_JITTER_REFRESH_S", 3600.0)
    k = app.broker.keys
    far = nxt + 3_000
    app.broker.client.hset(k.job(0, jid), "next_fire", far)
    app.broker.client.zadd(k.schedule(0), {jid: far + 777})
    tick_until(
        beat,
        lambda: epoch_ms(runs_of(app, jid)[-1].scheduled_for) > nxt,
        "the fire after the moved score",
    )
    runs = runs_of(app, jid)
    assert epoch_ms(runs[-1].scheduled_for) == far, runs[-1]
    assert all(epoch_ms(r.scheduled_for) % 1000 == 0 for r in runs), runs
    assert all(r.id == f"{jid}@{epoch_ms(r.scheduled_for)}" for r in runs)
