"""Beats SIGKILLed and restarted while sub-minute jobs fire: invariant 1 (one run per
fire time) and invariant 2 (no fire lost: overdue fires within the catch-up window
are all fired, so a failover only delays them).

Each beat is a subprocess running ``Beat(App(), shard_ttl=1.0, catchup_window=60)``
against the test's deployment (four shards, jobs of several tenants spread over them).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from server_time import server_ms  # tests/helpers
from workload import BeatProc, beat_spawner

from redcron import App
from redcron.keys import shard_of
from redcron.model.jobs import Task
from redcron.model.records import epoch_ms

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

SHARDS = 4


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), shards=SHARDS)
    yield a
    a.close()


@pytest.fixture
def spawn(redis_url: str, key_prefix: str, tmp_path: Path) -> Iterator[Callable[[str], BeatProc]]:
    with beat_spawner(redis_url, key_prefix, tmp_path, {"REDCRON_SHARDS": str(SHARDS)}) as start:
        yield start


def tenants_on_every_shard(per_shard: int) -> list[str]:
    """Tenant names, ``per_shard`` of them on each shard."""
    found: dict[int, list[str]] = {s: [] for s in range(SHARDS)}
    for i in itertools.count():
        t = f"tenant{i}"
        if len(found[shard_of(t, SHARDS)]) < per_shard:
            found[shard_of(t, SHARDS)].append(t)
        if all(len(v) == per_shard for v in found.values()):
            return [t for ts in found.values() for t in ts]
    raise AssertionError("unreachable")


def make_jobs(app: App, n: int) -> list[dict[str, Any]]:
    tenants = tenants_on_every_shard(max(1, n // (2 * SHARDS)))
    jobs = []
    for i in range(n):
        every = "1s" if i % 2 == 0 else "2s"
        job = app.jobs.put(
            f"job{i}",
            tenant=tenants[i % len(tenants)],
            tasks={"t": Task("noop")},
            every=every,
            overlap="allow",
            allow_unregistered=True,
        )
        jobs.append({"id": job.id, "name": job.name, "shard": job.shard,
                     "step": 1000 * int(every[:-1])})  # fmt: skip
    assert {j["shard"] for j in jobs} == set(range(SHARDS))
    return jobs


def check_invariants(app: App, jobs: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Every job's runs: one per nominal fire time, contiguous, none skipped."""
    seen: dict[str, list[int]] = {}
    for job in jobs:
        jid = job["id"]
        step = job["step"]
        runs = app.jobs.runs(jid, limit=10_000)
        nominal = sorted(epoch_ms(r.scheduled_for) for r in runs)
        assert len(nominal) == len(set(nominal)), f"{jid}: two runs for one fire time"
        assert all(r.id == f"{jid}@{epoch_ms(r.scheduled_for)}" for r in runs)
        gaps = [(a, b) for a, b in itertools.pairwise(nominal) if b - a != step]
        assert not gaps, f"{jid}: missed fire times between {gaps}"
        assert {r.trigger for r in runs} <= {"every"}
        info = app.jobs.get_by_id(jid)
        assert info.fires_skipped == 0, f"{jid}: fires skipped"
        seen[jid] = nominal
    return seen


def owners(app: App) -> list[str]:
    k = app.broker.keys
    return [
        (app.broker.client.hget(k.maintenance(s), "beat_owner") or b"").decode()
        for s in range(SHARDS)
    ]


def test_killed_and_restarted_beats_fire_every_time_exactly_once(
    app: App, spawn: Callable[[str], BeatProc]
) -> None:
    jobs = make_jobs(app, 20)
    names = (f"beat{i}" for i in itertools.count())
    beats = [spawn(next(names)) for _ in range(3)]
    start = server_ms(app)
    end = time.monotonic() + 15
    victim = 0
    while time.monotonic() < end:
        time.sleep(3)
        beats[victim].sigkill()
        beats[victim] = spawn(next(names))
        victim = (victim + 1) % len(beats)
    # let the backlog of the last kill drain (shard ttl 1 s), then stop cleanly
    time.sleep(3)
    stop = server_ms(app)
    for b in beats:
        b.close()
    seen = check_invariants(app, jobs)
    for job in jobs:
        nominal = seen[job["id"]]
        # fired from the start to the end, through every kill
        assert nominal and nominal[0] <= start + 3000, (job["name"], nominal[:3], start)
        assert nominal[-1] >= stop - 4000, (job["name"], nominal[-3:], stop)


def test_a_killed_beats_shards_move_after_their_ttl_and_the_backlog_fires(
    app: App, spawn: Callable[[str], BeatProc]
) -> None:
    jobs = make_jobs(app, 8)
    a, _b = spawn("a"), spawn("b")
    deadline = time.monotonic() + 15
    while sorted(owners(app)) != ["a", "a", "b", "b"]:
        assert time.monotonic() < deadline, f"no even split: {owners(app)}"
        time.sleep(0.05)
    time.sleep(1.5)  # a few fires on every shard
    held = [s for s, o in enumerate(owners(app)) if o == "a"]
    a.sigkill()
    killed = time.monotonic()
    # fenced: nobody else holds a's shards while its lease may still be live
    while time.monotonic() - killed < 0.5:
        assert all(owners(app)[s] in ("a", "") for s in held), owners(app)
        time.sleep(0.05)
    while owners(app) != ["b"] * SHARDS:
        # the lease (1 s) and its registry entry expire, then b's next round takes them
        assert time.monotonic() - killed < 4.0, f"shards not taken over: {owners(app)}"
        time.sleep(0.05)
    took = time.monotonic() - killed
    time.sleep(2.5)  # the survivor fires the backlog and goes on
    now = server_ms(app)
    seen = check_invariants(app, jobs)
    for job in jobs:
        if job["shard"] in held:
            # the fires due while nobody owned the shard were fired late, not lost
            assert seen[job["id"]][-1] >= now - 3000, (job["name"], took)
