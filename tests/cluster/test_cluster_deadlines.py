"""Deadlines on a real 3-master Redis Cluster, 12 shards: two beats share the
shards, and every shard's late run is marked once, its counter and event in
its own slot (issue 21 §2)."""

from __future__ import annotations

from beats import tick_until  # tests/helpers

from conftest import SHARDS  # tests/cluster/conftest.py
from redcron import App
from redcron.beat.beat import Beat
from redcron.keys import shard_of
from redcron.model.jobs import Task
from redcron.store import read_metrics


def tenants_on_every_shard(shards: int = SHARDS) -> list[str]:
    by_shard: dict[int, str] = {}
    i = 0
    while len(by_shard) < shards:
        by_shard.setdefault(shard_of(f"t{i}", shards), f"t{i}")
        i += 1
    return [by_shard[s] for s in range(shards)]


def test_late_runs_are_marked_once_on_every_shard(capp: App) -> None:
    tenants = tenants_on_every_shard()
    past = capp.broker.server_ms() - 120_000
    runs = {}
    for t in tenants:
        capp.jobs.put(
            "report", tenant=t, tasks={"t": Task("noop")}, deadline_s=60, allow_unregistered=True
        )
        runs[t] = capp.jobs.trigger("report", tenant=t, now=past)
    a = Beat(capp, name="a", shard_ttl=1.0, apply_declared=False)
    b = Beat(capp, name="b", shard_ttl=1.0, apply_declared=False)
    try:
        tick_until(
            [a, b], lambda: all(capp.jobs.run(r).late for r in runs.values()), "every run late"
        )
        for _ in range(3):
            a.tick()
            b.tick()
    finally:
        a.close()
        b.close()
    late = [e for e in capp.jobs.events() if e.type == "run_late"]
    assert sorted(e.shard for e in late) == list(range(SHARDS))  # once per run
    m = read_metrics(capp.broker, tenants)
    assert m.runs_late == dict.fromkeys(tenants, 1)
    assert m.runs_late_all == SHARDS
