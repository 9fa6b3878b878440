"""The beat against a real Redis: fires once per fire time, fencing, fair shards,
catch-up policies (invariants 1 and 2), pause, one-shots, jitter, throughput,
idle cost and the ``redcron beat`` command.

Tests call :meth:`Beat.tick` directly and poll with deadlines; downtime is
simulated by moving a job's ``next_fire`` field and schedule score into the past.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from beats import runs_of, tick_until  # tests/helpers
from server_time import server_ms  # tests/helpers

from redcron import App
from redcron.beat.beat import Beat, beats_key
from redcron.engine.argv import FireArgs
from redcron.errors import ShardLeaseLost
from redcron.model.jobs import JobSpec, Task
from redcron.model.records import epoch_ms
from redcron.schedule.jitter import jitter_ms

ROOT = Path(__file__).resolve().parents[2]
TASKS = {"t": Task("noop")}


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    yield a
    a.close()


@pytest.fixture
def app4(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), shards=4)
    yield a
    a.close()


def set_overdue(app: App, job_id: str, nominal_ms: int) -> None:
    """Simulate downtime: the job's next fire time (and due score) is ``nominal_ms``."""
    shard = app.jobs.get_by_id(job_id).shard
    k = app.broker.keys
    app.broker.client.hset(k.job(shard, job_id), "next_fire", nominal_ms)
    app.broker.client.zadd(k.schedule(shard), {job_id: nominal_ms})


def whole_second_ago(app: App, seconds: int) -> int:
    return (server_ms(app) // 1000 - seconds) * 1000


# -- one run per fire time ------------------------------------------------------------


def test_due_job_fires_once_per_fire_time_and_the_schedule_advances(app: App) -> None:
    job = app.jobs.put("tick", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True)
    beat = Beat(app, name="b1")
    tick_until([beat], lambda: len(runs_of(app, job.id)) >= 3, "three runs")
    for _ in range(5):
        beat.tick()  # nothing new is due right after a fire
    runs = runs_of(app, job.id)
    nominal = [epoch_ms(r.scheduled_for) for r in runs]
    assert [r.id for r in runs] == [f"{job.id}@{n}" for n in nominal]
    assert all(b - a == 1000 for a, b in itertools.pairwise(nominal)), nominal
    assert nominal[0] == epoch_ms(job.next_fire)
    assert {r.trigger for r in runs} == {"every"}
    info = app.jobs.get_by_id(job.id)
    assert epoch_ms(info.next_fire) == nominal[-1] + 1000 == epoch_ms(info.scheduled_due)
    assert epoch_ms(info.last_fire) == nominal[-1]
    assert beat.owned == {0: beat.owned[0]}
    # fired no earlier than due (server clock)
    assert all(epoch_ms(r.created_at) >= epoch_ms(r.scheduled_for) for r in runs)


def test_seconds_cron_fires_every_two_seconds(app: App) -> None:
    job = app.jobs.put(
        "cron2", tasks=TASKS, cron="*/2 * * * * *", overlap="allow", allow_unregistered=True
    )
    beat = Beat(app, name="b1")
    tick_until([beat], lambda: len(runs_of(app, job.id)) >= 2, "two runs", timeout=12)
    nominal = [epoch_ms(r.scheduled_for) for r in runs_of(app, job.id)]
    assert nominal[1] - nominal[0] == 2000
    assert all(n % 2000 == 0 for n in nominal)
    assert {r.trigger for r in runs_of(app, job.id)} == {"cron"}


def test_a_stale_beat_cannot_fire(app: App) -> None:
    job = app.jobs.put("fenced", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True)
    old = Beat(app, name="old", shard_ttl=30)
    old.tick()
    epoch = old.owned[0]
    k = app.broker.keys
    # the old beat's lease expires (it stalled) and another beat takes the shard
    app.broker.client.hset(k.maintenance(0), "beat_expiry", 0)
    [claim] = app.broker.beat.own([0], "new", 30_000, "acquire")
    assert claim.owned and int(claim.epoch) == int(epoch) + 1
    assert app.broker.client.hget(k.maintenance(0), "beat_owner") == b"new"
    before = len(runs_of(app, job.id))
    # fire.lua itself refuses the old epoch
    due = app.jobs.get_by_id(job.id).scheduled_due
    assert due is not None
    score = epoch_ms(due)
    with pytest.raises(ShardLeaseLost, match="shard lease lost"):
        app.broker.beat.fire_one(
            0, FireArgs(job.id, score, "", score, None, None, epoch, "cron", 0, "x")
        )
    # and the old beat, still believing it owns the shard, fires nothing once due
    time.sleep(max(0, (score - server_ms(app)) / 1000) + 0.05)
    assert old.tick() == 0
    assert old.owned == {}
    assert len(runs_of(app, job.id)) == before
    assert app.jobs.get_by_id(job.id).scheduled_due == due  # not moved


def test_two_beats_share_four_shards_fairly(app4: App) -> None:
    a = Beat(app4, name="a", shard_ttl=0.6, catchup_window=60)
    b = Beat(app4, name="b", shard_ttl=0.6, catchup_window=60)
    a.tick()
    assert len(a.owned) == 4  # alone: everything
    tick_until([a, b], lambda: len(a.owned) == 2 and len(b.owned) == 2, "an even split", timeout=10)
    assert set(a.owned).isdisjoint(b.owned)
    assert app4.broker.client.zcard(beats_key(app4.settings.prefix)) == 2
    assert app4.broker.client.hget(app4.broker.keys.meta(), "shards") == b"4"
    b.close()  # released at once: the survivor takes them at its next round
    tick_until([a], lambda: len(a.owned) == 4, "the survivor to own everything", timeout=5)


def test_jobs_on_every_shard_fire_with_two_beats(app4: App) -> None:
    jobs = [
        app4.jobs.put(f"j{i}", tenant=f"t{i}", tasks=TASKS, every="1s", allow_unregistered=True)
        for i in range(8)
    ]
    assert len({j.shard for j in jobs}) > 1
    a = Beat(app4, name="a", shard_ttl=0.6)
    b = Beat(app4, name="b", shard_ttl=0.6)
    tick_until(
        [a, b],
        lambda: all(len(runs_of(app4, j.id)) >= 2 for j in jobs),
        "every job to fire twice",
    )
    for j in jobs:
        nominal = [epoch_ms(r.scheduled_for) for r in runs_of(app4, j.id)]
        assert len(set(nominal)) == len(nominal)
        assert all(y - x == 1000 for x, y in itertools.pairwise(nominal))


# -- catch-up (invariant 2) -------------------------------------------------------------


def skipped(app: App, job_id: str) -> tuple[int, int]:
    info = app.jobs.get_by_id(job_id)
    stats = app.broker.client.hget(app.broker.keys.counters(info.shard), "fires_skipped")
    return info.fires_skipped, int(stats or 0)


def test_fires_overdue_within_the_window_are_all_fired(app: App) -> None:
    job = app.jobs.put(
        "late", tasks=TASKS, every="1s", overlap="allow", catchup="none", allow_unregistered=True
    )
    start = whole_second_ago(app, 10)
    set_overdue(app, job.id, start)
    beat = Beat(app, name="b1")
    beat.tick()
    now = server_ms(app)
    runs = runs_of(app, job.id)
    nominal = [epoch_ms(r.scheduled_for) for r in runs]
    assert nominal[0] == start
    assert nominal == list(range(start, nominal[-1] + 1, 1000))  # late, never collapsed
    assert nominal[-1] >= now - 1500
    assert {r.trigger for r in runs} == {"every"}
    assert skipped(app, job.id) == (0, 0)


def split(runs: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """Nominal fire times of the catch-up runs and of the on-time runs (cron or every)."""
    old = [epoch_ms(r.scheduled_for) for r in runs if r.trigger == "catchup"]
    recent = [epoch_ms(r.scheduled_for) for r in runs if r.trigger != "catchup"]
    return old, recent


def fire_overdue(app: App, job_id: str, start: int) -> tuple[int, int]:
    """One beat tick over a backlog from ``start``; the server time before and after."""
    set_overdue(app, job_id, start)
    before = server_ms(app)
    Beat(app, name="b1").tick()
    return before, server_ms(app)


def test_catchup_latest_fires_the_newest_old_fire_and_every_recent_one(app: App) -> None:
    job = app.jobs.put(
        "latest", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True
    )  # latest by default
    start = whole_second_ago(app, 120)
    before, after = fire_overdue(app, job.id, start)
    runs = runs_of(app, job.id)
    (latest,), recent = split(runs)
    # the newest fire older than the window (the beat's now lies in [before, after])
    assert before - 61_000 <= latest < after - 60_000
    assert f"{job.id}@{latest}" in {r.id for r in runs}
    # each fire within the window is fired, late but never collapsed
    assert recent == list(range(latest + 1000, recent[-1] + 1, 1000))
    assert before - 1000 <= recent[-1] <= after
    missed = (latest - start) // 1000  # every fire in [start, latest) was skipped
    assert skipped(app, job.id) == (missed, missed)
    assert epoch_ms(app.jobs.get_by_id(job.id).next_fire) == recent[-1] + 1000


def test_catchup_all_fires_the_latest_old_ones_up_to_the_limit(app: App) -> None:
    job = app.jobs.put(
        "all",
        tasks=TASKS,
        every="1s",
        overlap="allow",
        catchup="all",
        catchup_limit=5,
        allow_unregistered=True,
    )
    start = whole_second_ago(app, 90)
    before, after = fire_overdue(app, job.id, start)
    old, recent = split(runs_of(app, job.id))
    assert len(old) == 5
    assert old + recent == list(range(old[0], recent[-1] + 1, 1000))
    assert before - 61_000 <= old[-1] < after - 60_000
    missed = (old[0] - start) // 1000
    assert 24 <= missed <= 27
    assert skipped(app, job.id) == (missed, missed)
    assert epoch_ms(app.jobs.get_by_id(job.id).next_fire) == recent[-1] + 1000


def test_catchup_all_within_the_limit_fires_everything(app: App) -> None:
    job = app.jobs.put(
        "allc",
        tasks=TASKS,
        cron="* * * * * *",
        overlap="allow",
        catchup="all",
        allow_unregistered=True,
    )
    start = whole_second_ago(app, 70)
    set_overdue(app, job.id, start)
    Beat(app, name="b1").tick()
    nominal = [epoch_ms(r.scheduled_for) for r in runs_of(app, job.id)]
    assert nominal[0] == start and len(nominal) >= 70
    assert nominal == list(range(start, nominal[-1] + 1, 1000))
    assert skipped(app, job.id) == (0, 0)


def test_catchup_none_skips_only_the_old_fires(app: App) -> None:
    job = app.jobs.put(
        "none",
        tasks=TASKS,
        cron="*/2 * * * * *",
        overlap="allow",
        catchup="none",
        allow_unregistered=True,
    )
    start = whole_second_ago(app, 100) // 2000 * 2000
    before, after = fire_overdue(app, job.id, start)
    old, recent = split(runs_of(app, job.id))
    assert old == []
    assert recent == list(range(recent[0], recent[-1] + 1, 2000))
    # the first fire within the window (the beat's now lies in [before, after])
    assert before - 60_000 <= recent[0] and recent[0] - 2000 < after - 60_000
    n, stats = skipped(app, job.id)
    assert n == stats == (recent[0] - start) // 2000
    nxt = epoch_ms(app.jobs.get_by_id(job.id).next_fire)
    assert nxt == recent[-1] + 2000 and before < nxt <= after + 2000


# -- pause, one-shot, jitter, spec changes ---------------------------------------------------


def test_a_paused_job_does_not_fire(app: App) -> None:
    job = app.jobs.put("p", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True)
    app.jobs.pause("p")
    beat = Beat(app, name="b1")
    end = time.monotonic() + 2.2
    while time.monotonic() < end:
        beat.tick()
        time.sleep(0.05)
    assert runs_of(app, job.id) == []
    # a paused flag seen by fire.lua (the schedule entry left behind) fires nothing either
    k = app.broker.keys
    app.broker.client.hset(k.job(0, job.id), "paused", "1")
    app.broker.client.zadd(k.schedule(0), {job.id: whole_second_ago(app, 1)})
    beat.tick()
    assert runs_of(app, job.id) == []


def test_a_one_shot_job_fires_once_and_leaves_the_schedule(app: App) -> None:
    at = app.jobs.server_now() + timedelta(seconds=1.5)
    job = app.jobs.put("once", tasks=TASKS, at=at, allow_unregistered=True)
    beat = Beat(app, name="b1")
    tick_until([beat], lambda: runs_of(app, job.id), "the one-shot run")
    for _ in range(5):
        beat.tick()
    runs = runs_of(app, job.id)
    assert len(runs) == 1 and runs[0].trigger == "at"
    info = app.jobs.get_by_id(job.id)
    assert info.scheduled_due is None and info.next_fire is None


def test_jitter_keeps_the_due_time_within_the_window(app: App) -> None:
    job = app.jobs.put(
        "jit", tasks=TASKS, every="2s", jitter_s=1.5, overlap="allow", allow_unregistered=True
    )
    beat = Beat(app, name="b1")
    tick_until([beat], lambda: len(runs_of(app, job.id)) >= 2, "two runs", timeout=12)
    for r in runs_of(app, job.id):
        n = epoch_ms(r.scheduled_for)
        due = n + jitter_ms(job.id, n, 1.5)
        assert n <= due <= n + 1500
        assert epoch_ms(r.created_at) >= due  # not before its jittered due time
    info = app.jobs.get_by_id(job.id)
    assert 0 <= epoch_ms(info.scheduled_due) - epoch_ms(info.next_fire) <= 1500


def test_an_updated_job_fires_with_its_new_spec(app: App) -> None:
    job = app.jobs.put("upd", tasks=TASKS, every="1s", overlap="allow", allow_unregistered=True)
    beat = Beat(app, name="b1")
    tick_until([beat], lambda: runs_of(app, job.id), "a first run")
    app.jobs.put(
        "upd",
        tasks={"t": Task("noop", args=[1])},
        every="1s",
        overlap="allow",
        allow_unregistered=True,
    )
    n = len(runs_of(app, job.id))
    tick_until([beat], lambda: len(runs_of(app, job.id)) >= n + 2, "runs after the update")
    nominal = [epoch_ms(r.scheduled_for) for r in runs_of(app, job.id)]
    assert all(y - x == 1000 for x, y in itertools.pairwise(nominal))


def test_declared_jobs_are_applied_on_start(app: App) -> None:
    @app.cron(every="1s", name="declared")
    def declared() -> None:
        pass

    beat = Beat(app, name="b1")
    job_id = tick_until(
        [beat],
        lambda: app.jobs.job_id("declared"),
        "the declared job",
    )
    tick_until([beat], lambda: runs_of(app, job_id), "a run of the declared job")


# -- throughput and idle cost --------------------------------------------------------------


def evalsha_ms(app: App) -> float:
    stats = app.broker.client.info("commandstats").get("cmdstat_evalsha", {})
    return float(stats.get("usec", 0)) / 1000


@pytest.mark.slow
def test_ten_thousand_jobs_due_in_one_second_fire_pipelined(app: App) -> None:
    """A burst of 10,000 fires in one second: every job fires exactly once for
    that fire time.  The lag is printed, not asserted (speed is the job of
    ``redcron bench trigger``; a timed assertion fails on a busy machine).
    One-shot jobs: a slow machine may create or fire them late (still within
    the catch-up window), but never gives them a second fire time."""
    at = app.jobs.server_now() + timedelta(seconds=3)
    specs = [JobSpec(name=f"j{i}", tasks=dict(TASKS), at=at) for i in range(10_000)]
    ids = [r.id for r in app.jobs.put_many(specs, allow_unregistered=True)]
    beat = Beat(app, name="b1")
    beat.tick()  # acquire the shard before the fire time
    redis_before = evalsha_ms(app)
    t = threading.Thread(target=beat.run, daemon=True)
    t.start()
    k = app.broker.keys
    try:

        def all_fired() -> bool:  # cheap: polling must not steal the beat's CPU
            return int(app.broker.client.hget(k.counters(0), "fires") or 0) >= len(ids)

        deadline = time.monotonic() + 30
        while not all_fired():
            assert time.monotonic() < deadline, "not every job fired within 30 s"
            time.sleep(0.2)
        redis_ms = evalsha_ms(app) - redis_before
    finally:
        beat.stop()
        t.join(10)
    pipe = app.broker.client.pipeline(transaction=False)
    for jid in ids:
        pipe.zrange(k.runs(0, jid), 0, -1)
    histories = pipe.execute()
    assert all(len(h) == 1 for h in histories), "a job fired more than once"
    first = [h[0].decode() for h in histories]
    pipe = app.broker.client.pipeline(transaction=False)
    for rid in first:
        pipe.hmget(k.run(0, rid), "created", "scheduled_for")
    rows = pipe.execute()
    # one run per job, named by the job and the (one, shared) nominal fire time
    nominals = {rid.rsplit("@", 1)[1] for rid in first}
    assert len(nominals) == 1, nominals
    assert all(rid.startswith(f"{jid}@") for jid, rid in zip(ids, first, strict=True))
    assert all(c is not None and int(s) == int(next(iter(nominals))) for c, s in rows)
    lags = sorted(int(c) - int(s) for c, s in rows)
    p99 = lags[int(len(lags) * 0.99)]
    print(f"p99 trigger lag {p99} ms, max {lags[-1]} ms; fire.lua Redis time {redis_ms:.0f} ms")


# -- run() and the CLI ---------------------------------------------------------------------


def test_run_stops_and_releases_its_shards(app: App) -> None:
    beat = Beat(app, name="b1")
    t = threading.Thread(target=beat.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    while app.broker.client.hget(app.broker.keys.maintenance(0), "beat_owner") != b"b1":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    beat.stop()
    t.join(5)
    assert not t.is_alive()
    assert app.broker.client.hget(app.broker.keys.maintenance(0), "beat_owner") == b""
    assert app.broker.client.zcard(beats_key(app.settings.prefix)) == 0


def test_beat_command_fires_declared_jobs_until_sigterm(
    app: App, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDCRON_")}
    env.update(
        PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT / 'tests' / 'apps'}",
        REDCRON_PREFIX=key_prefix.rstrip(":"),
    )
    out = (tmp_path / "beat.log").open("wb")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "redcron.cli.main", "beat", "-A", "beat_app:app"),
            *("--redis", redis_url, "--shard-ttl", "2", "--loglevel", "info"),
        ],
        env=env,
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                job_id = app.jobs.job_id("heartbeat")
                if runs_of(app, job_id):
                    break
            except Exception:  # not declared yet
                pass
            assert proc.poll() is None, (tmp_path / "beat.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "beat.log").read_text()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0, (tmp_path / "beat.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
    assert app.broker.client.hget(app.broker.keys.maintenance(0), "beat_owner") == b""


def test_catchup_window_must_exceed_the_shard_ttl(app: App) -> None:
    from redcron.errors import ConfigError

    with pytest.raises(ConfigError, match="catchup_window"):
        Beat(app, shard_ttl=10, catchup_window=5)
