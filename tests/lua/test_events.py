"""What the scripts write to the events stream (the notifier's input): every
event names its tenant, job and run; a late scheduled fire records one
trigger_lag event per job per interval, however many late fires come."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from followups import follow  # tests/helpers

from redcron import App
from redcron.engine import FailItem
from redcron.engine.argv import FireArgs
from redcron.keys import EVENT_LAG_MS, run_id
from redcron.model.jobs import Task


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))

    @a.task(name="ev.t", retries=0)
    def t() -> None: ...

    yield a
    a.close()


def late_fire(app: App, job_id: str, late_ms: int) -> str:
    """Fire the job's next due time as the beat would, ``late_ms`` after it."""
    b = app.broker
    due = int(b.client.zscore(b.keys.schedule(0), job_id) or 0)
    version = b.client.hget(b.keys.job(0, job_id), "version")
    assert version is not None
    nxt = due + 60_000
    status, rid = b.beat.fire_one(
        0,
        FireArgs(job_id, due, version.decode(), due, nxt, nxt, "", "cron", 0, run_id(job_id, due)),
        now=due + late_ms,
    )
    assert status == "created", (status, rid)
    follow(app)  # the lag and its event are a follow-up of the fire
    return str(rid)


def test_a_late_fire_records_trigger_lag_once_per_job_per_interval(app: App) -> None:
    app.jobs.put("every-minute", cron="* * * * *", tasks={"t": Task("ev.t")}, overlap="allow")
    job_id = app.jobs.job_id("every-minute")
    late_fire(app, job_id, EVENT_LAG_MS - 1)
    assert app.jobs.events(kind="trigger_lag") == []  # under the threshold
    b = app.broker
    first_due = int(b.client.zscore(b.keys.schedule(0), job_id) or 0)
    first = late_fire(app, job_id, EVENT_LAG_MS + 10_000)
    for _ in range(4):  # a minute apart: all within EVENT_LAG_EVERY_MS of the first
        late_fire(app, job_id, EVENT_LAG_MS + 10_000)
    [event] = app.jobs.events(kind="trigger_lag")
    assert (event.tenant, event.job_id, event.run_id) == ("default", job_id, first)
    assert event.detail == "fired 40 s late"
    # the job hash remembers when (the server time of the first's fire) ...
    alert_at = b.client.hget(b.keys.job(0, job_id), "lag_alert_at")
    assert alert_at == str(first_due + EVENT_LAG_MS + 10_000).encode()
    # ... and the late fire one interval after it records again
    again = late_fire(app, job_id, EVENT_LAG_MS + 10_000)
    assert sorted(e.run_id for e in app.jobs.events(kind="trigger_lag")) == sorted([first, again])


def test_dead_letters_and_failed_runs_name_tenant_job_and_run(app: App) -> None:
    app.jobs.put("once", tasks={"t": Task("ev.t")})
    job_id = app.jobs.job_id("once")
    rid = app.jobs.trigger("once")
    [lease] = app.broker.leases.lease(0, "w", 1, 60_000, ["default"])
    app.broker.leases.fail(0, "w", [FailItem(lease.iid, lease.epoch, "failed", "boom", False)])
    follow(app)
    got = {e.type: e for e in app.jobs.events()}
    assert set(got) == {"dead_lettered", "run_failed"}
    for e in got.values():
        assert (e.tenant, e.job_id, e.run_id) == ("default", job_id, rid)
    assert '"error":"boom"' in (got["dead_lettered"].detail or "")
    assert got["run_failed"].detail == "1 of 1 task(s) failed"
