"""One job can no longer stop the beat (issue 16 item 5, DESIGN §8a).

Failing jobs are injected among healthy ones, by writing their hashes
directly: a ``next_fire`` that is not a number, a spec whose zone is not in
tzdata, a DAG template that is not JSON, a next fire the engine cannot compute
(past the year 9999).  The beat ticks on: the healthy jobs fire, each bad one is
parked with its reason (off the schedule, in the ``attention`` ZSET, one
WARNING), shown by ``jobs list/show``, the JSON record and ``/metrics``; an update
or a resume clears it.  A cron whose fires are decades apart fires and is
scheduled decades on, not refused.  An error no job is parked for (one the beat
does not expect) stops that shard's fires only, logged once.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from beats import runs_of, tick_until  # tests/helpers
from click.testing import CliRunner
from polling import wait_for  # tests/helpers

from redcron import App
from redcron.beat.beat import Beat
from redcron.beat.firing import Firer
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.engine import Engine
from redcron.engine.beat import BeatStore, Park
from redcron.keys import ATTENTION_PARKED, prefix_range, shard_of
from redcron.model.jobs import Task, spec_from_json
from redcron.model.records import JobRecord, epoch_ms
from redcron.model.serialize import to_json
from redcron.store.metrics import read_metrics

TASKS = {"t": Task("noop")}
ADMIN = "admin-token-for-parking"
FEB29_2016 = int(datetime(2016, 2, 29, tzinfo=UTC).timestamp() * 1000)
FEB29_2044 = datetime(2044, 2, 29, tzinfo=UTC)
YEAR_9999 = int(datetime(9999, 6, 1, tzinfo=UTC).timestamp() * 1000)


def parked_ids(app: App, shard: int) -> set[str]:
    """The jobs the shard's ``attention`` ZSET lists as parked (``parked:<job id>``)."""
    got = app.broker.client.zrangebylex(
        app.broker.keys.attention(shard), *prefix_range(ATTENTION_PARKED)
    )
    return {m.decode().removeprefix(ATTENTION_PARKED) for m in got}


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    yield a
    a.close()


def _hset(app: App, job: JobRecord, **fields: object) -> None:
    app.broker.client.hset(app.broker.keys.job(job.shard, job.id), mapping=fields)  # type: ignore[arg-type]


def _parked_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "parked, not fired" in r.getMessage()
    ]


def _cli(app: App, *args: str) -> str:
    result = CliRunner().invoke(
        main,
        [*args, "--redis", app.settings.redis_url],
        env={"REDCRON_PREFIX": app.settings.prefix},
    )
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return result.output


def test_bad_jobs_are_parked_and_the_beat_fires_the_others(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="redcron.beat.beat")
    ok = [
        app.jobs.put(f"ok{i}", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True)
        for i in range(2)
    ]
    # a malformed hash: next_fire edited by hand into a word
    garbage = app.jobs.put(
        "garbage", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True
    )
    _hset(app, garbage, next_fire="soon")
    # a zone that a tzdata update removed: the stored spec names it
    zone = app.jobs.put(
        "zone", tasks=TASKS, cron="* * * * * *", tz="Europe/Berlin", allow_unregistered=True
    )
    spec = json.loads(zone.spec)
    spec["tz"] = "Mars/Olympus_Mons"
    _hset(app, zone, spec=json.dumps(spec, sort_keys=True))
    # a DAG template no run can be made from (fire.lua must write nothing)
    template = app.jobs.put(
        "template", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True
    )
    _hset(app, template, template="[{broken")
    # the engine cannot compute the next fire (none before the year 9999 ends)
    engine = app.jobs.put("engine", tasks=TASKS, cron="0 0 1 1 *", allow_unregistered=True)
    _hset(app, engine, next_fire=YEAR_9999)
    # fires decades apart: due at 2016-02-29, next on 2044-02-29 (the 8-year
    # horizon raised ScheduleError in the tick here, and the beat exited)
    decades = app.jobs.put("decades", tasks=TASKS, cron="0 0 * FEB 1#5", allow_unregistered=True)
    _hset(app, decades, next_fire=FEB29_2016)
    app.broker.client.zadd(app.broker.keys.schedule(decades.shard), {decades.id: FEB29_2016})
    for job in (garbage, zone, template, engine):  # due now
        app.broker.client.zadd(app.broker.keys.schedule(job.shard), {job.id: 1})
    bad = {
        garbage.id: "next_fire 'soon'",
        zone.id: "Mars/Olympus_Mons",
        template.id: "no readable template",
        engine.id: "ScheduleError",
    }

    beat = Beat(app, name="b1", shard_ttl=2.0)

    def done() -> bool:
        fired = all(len(runs_of(app, j.id)) >= 2 for j in ok)
        return fired and all(app.jobs.get_by_id(jid).parked_reason for jid in bad)

    tick_until(beat, done, "the healthy jobs to fire and the bad ones to be parked")
    for _ in range(20):
        beat.tick()  # parked jobs are retried by no tick: no further WARNING
    assert beat.owned  # the beat is still at work

    parked_index = parked_ids(app, 0)
    assert parked_index == set(bad)
    for jid, why in bad.items():
        rec = app.jobs.get_by_id(jid)
        assert rec.parked_reason and why in rec.parked_reason, (rec.name, rec.parked_reason)
        assert rec.parked_at is not None
        assert rec.scheduled_due is None  # off the schedule
        assert to_json(rec)["parked_reason"] == rec.parked_reason
    assert runs_of(app, template.id) == []  # refused before anything was written
    warnings = _parked_warnings(caplog)
    assert len(warnings) == len(bad), warnings
    assert all(any(jid in w for w in warnings) for jid in bad)

    # the long-gap cron fired its one due fire and waits for 2044, unparked
    fired = runs_of(app, decades.id)
    assert [epoch_ms(r.scheduled_for) for r in fired] == [FEB29_2016]
    rec = app.jobs.get_by_id(decades.id)
    assert rec.parked_reason is None and rec.next_fire == FEB29_2044

    # shown: jobs list / show, /metrics, the dashboard's pages
    listing = _cli(app, "jobs", "list")
    assert "parked by the beat" in listing and "next_fire 'soon'" in listing
    assert "parked" in _cli(app, "jobs", "show", "garbage")
    assert "Mars/Olympus_Mons" in _cli(app, "jobs", "show", "zone")  # a spec with no trigger
    assert read_metrics(app.broker).jobs_parked == {"default": len(bad)}
    web = create_app(app, admin_token=ADMIN).test_client()
    metrics = web.get("/metrics").get_data(as_text=True)
    assert f'redcron_jobs_parked{{tenant="default"}} {float(len(bad))}' in metrics
    admin = {"Authorization": f"Bearer {ADMIN}"}
    api = web.get(f"/v1/jobs/{garbage.id}", headers=admin)
    assert api.status_code == 200, api.get_data(as_text=True)
    assert "next_fire 'soon'" in api.get_json()["parked_reason"]
    assert web.get("/login").status_code == 200
    with web.session_transaction() as session:
        csrf = session["csrf_token"]
    assert web.post("/login", data={"token": ADMIN, "csrf_token": csrf}).status_code == 303
    page = web.get(f"/jobs/{garbage.id}").get_data(as_text=True)
    assert 'id="parked"' in page and "next_fire &#39;soon&#39;" in page
    listing_page = web.get("/jobs").get_data(as_text=True)
    assert 'class="parked"' in listing_page

    # an update (even of the same spec, here through the API) or a resume clears
    # it, and it fires again
    body = {"name": "template", "every": "1s", "overlap": "allow", "tasks": {"t": {"ref": "noop"}}}
    put = web.put(  # no app here registers noop
        f"/v1/jobs/{template.id}?allow_unregistered=true", json=body, headers=admin
    )
    assert put.status_code == 200, put.get_data(as_text=True)
    again = app.jobs.get_by_id(template.id)
    assert again.parked_reason is None and again.scheduled_due is not None
    assert spec_from_json(again.spec) == spec_from_json(template.spec)  # the same spec
    app.jobs.resume("garbage")
    assert app.jobs.get_by_id(garbage.id).parked_reason is None
    tick_until(
        beat,
        lambda: runs_of(app, template.id) and runs_of(app, garbage.id),
        "the repaired jobs to fire",
    )
    left = parked_ids(app, 0)
    assert left == {zone.id, engine.id}
    assert read_metrics(app.broker).jobs_parked == {"default": 2}
    assert len(_parked_warnings(caplog)) == len(bad)


def _inject(app: App, kind: str) -> tuple[JobRecord, str]:
    """One failing job of ``kind``, due now; and a fragment of its parked reason."""
    if kind == "next_fire":
        job = app.jobs.put("bad", tasks=TASKS, every="1s", allow_unregistered=True)
        _hset(app, job, next_fire="soon")
        why = "next_fire 'soon'"
    elif kind == "zone":
        job = app.jobs.put(
            "bad", tasks=TASKS, every="1s", tz="Europe/Berlin", allow_unregistered=True
        )
        _hset(app, job, spec=job.spec.replace('"Europe/Berlin"', '"Mars/Olympus_Mons"'))
        why = "unknown time zone 'Mars/Olympus_Mons'"
    elif kind == "template":
        job = app.jobs.put("bad", tasks=TASKS, every="1s", allow_unregistered=True)
        _hset(app, job, template="[{broken")
        why = "no readable template"
    else:  # the engine raising
        job = app.jobs.put("bad", tasks=TASKS, cron="0 0 1 1 *", allow_unregistered=True)
        _hset(app, job, next_fire=YEAR_9999)
        why = "ScheduleError"
    app.broker.client.zadd(app.broker.keys.schedule(job.shard), {job.id: 1})
    return job, why


@pytest.mark.parametrize("kind", ["next_fire", "zone", "template", "engine"])
def test_one_bad_job_among_healthy_ones(
    app: App, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.WARNING, logger="redcron.beat.beat")
    ok = [
        app.jobs.put(f"ok{i}", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True)
        for i in range(3)
    ]
    bad, why = _inject(app, kind)
    beat = Beat(app, name="b1", shard_ttl=2.0)
    tick_until(
        beat,
        lambda: all(len(runs_of(app, j.id)) >= 2 for j in ok),
        "the healthy jobs to fire twice",
    )
    rec = app.jobs.get_by_id(bad.id)
    assert rec.parked_reason and why in rec.parked_reason, rec.parked_reason
    assert rec.scheduled_due is None and runs_of(app, bad.id) == []
    warnings = _parked_warnings(caplog)
    assert len(warnings) == 1 and bad.id in warnings[0], warnings


def test_a_fire_that_fails_alone_is_parked_and_its_call_goes_on(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """A script error in one fire aborts its whole fire_batch call: the call is
    sent again one fire at a time, and the job whose fire fails alone is parked."""
    caplog.set_level(logging.WARNING, logger="redcron.beat.beat")
    jobs = [
        app.jobs.put(f"j{i}", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True)
        for i in range(4)
    ]
    beat = Beat(app, name="b1", shard_ttl=2.0)
    tick_until(beat, lambda: all(runs_of(app, j.id) for j in jobs), "every job to fire")
    # the beat knows these jobs at their scores and will not read them before the
    # next fire: replace one hash by a string, so fire.lua's first read fails
    bad, ok = jobs[1], [jobs[0], *jobs[2:]]
    r, k = app.broker.client, app.broker.keys
    r.delete(k.job(bad.shard, bad.id))
    r.set(k.job(bad.shard, bad.id), "not a hash")
    before = {j.id: len(runs_of(app, j.id)) for j in ok}
    tick_until(
        beat,
        lambda: all(len(runs_of(app, j.id)) >= before[j.id] + 2 for j in ok),
        "the other jobs to fire twice more",
    )
    assert r.zscore(k.schedule(bad.shard), bad.id) is None
    assert parked_ids(app, bad.shard) == {bad.id}
    warnings = _parked_warnings(caplog)
    assert len(warnings) == 1 and bad.id in warnings[0], warnings
    # Redis 6.2 words a script error "Error running script (...): ... WRONGTYPE ..."
    assert "fire failed:" in warnings[0] and "WRONGTYPE" in warnings[0], warnings


def test_when_every_fire_fails_alone_none_is_parked(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """Every fire failing on its own is a server's or script's fault, not one job's:
    parking them all would stop every tenant the other way."""
    caplog.set_level(logging.WARNING, logger="redcron.beat.beat")
    jobs = [
        app.jobs.put(f"j{i}", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True)
        for i in range(2)
    ]
    beat = Beat(app, name="b1", shard_ttl=2.0)
    tick_until(beat, lambda: all(runs_of(app, j.id) for j in jobs), "every job to fire")
    r, k = app.broker.client, app.broker.keys
    for j in jobs:
        r.delete(k.job(j.shard, j.id))
        r.set(k.job(j.shard, j.id), "not a hash")
    tick_until(
        beat,
        lambda: any("none parked" in rec.getMessage() for rec in caplog.records),
        "the beat to give up on the call without parking",
    )
    assert len(parked_ids(app, 0)) == 0 and r.zcard(k.schedule(0)) == 2
    assert _parked_warnings(caplog) == []
    # a healthy job due with them shows the fault is theirs: both are parked then
    ok = app.jobs.put("ok", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True)
    tick_until(beat, lambda: len(parked_ids(app, 0)) == 2, "the two to be parked")
    tick_until(beat, lambda: runs_of(app, ok.id), "the healthy job to fire")


def test_a_job_changed_after_the_beat_read_it_is_not_parked(app: App) -> None:
    """job_park compares version and score: a job fixed meanwhile keeps its schedule."""
    job = app.jobs.put("j", tasks=TASKS, every="1h", allow_unregistered=True)
    store = BeatStore(app.broker)
    score = int(app.broker.client.zscore(app.broker.keys.schedule(job.shard), job.id) or 0)
    stale = Park(job.id, str(job.version - 1), score, "old fault")
    moved = Park(job.id, str(job.version), score + 1, "old fault")
    assert store.park(job.shard, [stale, moved]) == [False, False]
    assert app.jobs.get_by_id(job.id).parked_reason is None
    assert store.park(job.shard, [Park(job.id, str(job.version), score, "fault")]) == [True]
    rec = app.jobs.get_by_id(job.id)
    assert rec.parked_reason == "fault" and rec.scheduled_due is None
    app.jobs.delete("j")
    assert len(parked_ids(app, job.shard)) == 0


# -- a fault no job is parked for stops its shard, not the beat -----------------------


def test_an_unexpected_error_in_one_shards_fire_pass_leaves_the_other_firing(
    redis_url: str,
    key_prefix: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug hit on one shard's data (an exception the beat does not expect)
    used to end Beat.run, and so every tenant's fires; the other shard fires on,
    the error is logged once with its traceback, and the shard fires once it is gone."""
    caplog.set_level(logging.WARNING, logger="redcron.beat.beat")
    app = App(redis_url, prefix=key_prefix.rstrip(":"), shards=2)
    by_shard = {shard_of(f"t{i}", 2): f"t{i}" for i in range(8)}
    bad, ok = (
        app.jobs.put(
            f"j{s}",
            tenant=by_shard[s],
            tasks=TASKS,
            every="1s",
            overlap="allow",
            allow_unregistered=True,
        )
        for s in (0, 1)
    )
    real = Firer.fire_shard

    def fire_shard(self: Firer, store: Engine, shard: int, now: int, budget: float) -> int:
        if shard == bad.shard:
            raise KeyError("injected")
        return real(self, store, shard, now, budget)

    monkeypatch.setattr(Firer, "fire_shard", fire_shard)
    beat = Beat(app, name="b1", shard_ttl=2.0)
    t = threading.Thread(target=beat.run, daemon=True)
    t.start()
    try:
        wait_for(lambda: len(runs_of(app, ok.id)) >= 3 or not t.is_alive(), "3 runs", 15)
        assert t.is_alive(), "the beat stopped"
        assert runs_of(app, bad.id) == []
        errors = [
            r
            for r in caplog.records
            if r.name == "redcron.beat.beat" and r.levelno >= logging.ERROR
        ]
        assert len(errors) == 1, [r.getMessage() for r in errors]
        assert f"shard {bad.shard}" in errors[0].getMessage() and errors[0].exc_info
        monkeypatch.undo()
        wait_for(lambda: runs_of(app, bad.id), "the shard to fire again", 15)
    finally:
        beat.stop()
        t.join(10)
        app.close()
    assert not t.is_alive()
