"""Mapped tasks at the script level (issue 32 §2; real Redis, no worker): the
upstream's success marks the mapped task mapping and writes a follow-up of
kind map in the same call; maintenance makes the instances page by page
(``map_expand.lua``, fenced by ``map_made``), each once however often or by
whomever the follow-up is applied; the join is made ready once, when the
last instance succeeds; the inputs of an instance and of the join; a dead
instance cancelled after its run ended is counted once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from followups import follow  # tests/helpers
from test_runs import Runs

from redcron import App, serde
from redcron.doctor import examine
from redcron.engine import argv
from redcron.engine.maintenance import MAP_PAGE
from redcron.model.jobs import Task


@pytest.fixture
def runs(redis_url: str, key_prefix: str) -> Iterator[Runs]:
    app = App(redis_url, prefix=key_prefix.rstrip(":"))
    app.broker.ensure_meta()
    yield Runs(app)
    app.close()


def mapped_job(runs: Runs, name: str = "maps", **mapped: Any) -> str:
    return runs.job(
        name,
        {
            "extract": Task("t"),
            "transform": Task("t", map_over="extract", **mapped),
            "load": Task("t", depends_on=["transform"]),
        },
    )


def finish_extract(runs: Runs, value: Any, apply: bool = True) -> None:
    [lease] = runs.lease().values()
    assert runs.b.leases.complete(runs.shard, "w1", [(lease.iid, lease.epoch, serde.dumps(value))])
    if apply:
        follow(runs.b)


def made(runs: Runs, rid: str) -> list[str]:
    return sorted(i for i in runs.ready() if i.startswith(f"{rid}/transform["))


def test_the_upstreams_success_writes_the_map_and_maintenance_makes_it_once(runs: Runs) -> None:
    mapped_job(runs)
    rid = runs.trigger("maps")
    finish_extract(runs, ["a", "b", "c"], apply=False)
    # in the same call as extract's success: mapping, and the follow-up to make it
    assert runs.states(rid)["transform"] == "mapping"
    assert runs.ready() == []
    follow(runs.b)
    assert made(runs, rid) == [f"{rid}/transform[{i}]" for i in range(3)]
    assert runs.counters(rid)["total"] == 6  # three tasks and three instances
    # a page made already is fenced off: nothing is made twice
    again = argv.map_expand(f"{rid}/transform", 0, 3, [serde.dumps("x")])
    assert runs.b._run("map_expand", runs.shard, again) == -1
    assert len(made(runs, rid)) == 3
    # each instance holds its element; the inputs hand it over as extract's result
    rows = runs.b.run_inputs(runs.shard, [f"{rid}/transform[1]", f"{rid}/load"])
    assert rows[0].upstream == {"extract": "b"}
    assert rows[1].upstream == {"transform": [None, None, None]}  # none succeeded yet


def test_a_large_map_is_made_in_pages_and_a_caller_that_died_midway_is_continued(
    runs: Runs,
) -> None:
    n = 2 * MAP_PAGE + 1
    mapped_job(runs)
    rid = runs.trigger("maps")
    finish_extract(runs, list(range(n)), apply=False)
    # a caller made the first page and died before the rest
    first = argv.map_expand(f"{rid}/transform", 0, n, [serde.dumps(i) for i in range(MAP_PAGE)])
    assert runs.b._run("map_expand", runs.shard, first) == MAP_PAGE
    follow(runs.b)
    ready = runs.ready()
    assert len(ready) == len(set(ready)) == n
    info = runs.app.get(f"{rid}/transform").info()
    assert info.mapped is not None and (info.mapped.count, info.mapped.made) == (n, n)


def test_the_join_is_made_ready_once_when_the_last_instance_succeeds(runs: Runs) -> None:
    mapped_job(runs)
    rid = runs.trigger("maps")
    finish_extract(runs, [1, 2, 3])
    leased = runs.lease()
    assert sorted(leased) == ["transform[0]", "transform[1]", "transform[2]"]
    done = [(x.iid, x.epoch, serde.dumps(int(x.iid[-2]) * 10)) for x in leased.values()]
    assert runs.b.leases.complete(runs.shard, "w1", done[:2]) == [True, True]
    assert runs.states(rid)["transform"] == "mapping"
    assert runs.ready() == []
    assert runs.b.leases.complete(runs.shard, "w1", done[2:]) == [True]
    assert runs.states(rid)["transform"] == "succeeded"
    assert runs.ready() == [f"{rid}/load"]
    [row] = runs.b.run_inputs(runs.shard, [f"{rid}/load"])
    assert row.upstream == {"transform": [0, 10, 20]}
    runs.ok(runs.lease()["load"])
    assert runs.run(rid).state == "succeeded"
    assert runs.counters(rid) == {
        "total": 6, "done": 6, "succeeded": 6, "failed": 0, "cancelled": 0
    }  # fmt: skip


def test_a_dead_instance_fails_the_map_when_the_last_ends_and_cancelling_it_counts_once(
    runs: Runs,
) -> None:
    mapped_job(runs)
    rid = runs.trigger("maps")
    finish_extract(runs, [1, 2])
    leased = runs.lease()
    assert runs.fail(leased["transform[0]"]) == "dead"
    assert runs.states(rid)["transform"] == "mapping"  # its sibling still runs
    runs.ok(leased["transform[1]"])
    assert runs.run(rid).state == "failed"
    assert runs.states(rid)["transform"] == "failed"
    assert runs.states(rid)["load"] == "upstream_failed"
    before = runs.counters(rid)
    # cancelling the dead instance moves it out of the DLQ: counted once still
    runs.app.get(f"{rid}/transform[0]").cancel()
    follow(runs.b)
    info = runs.app.get(f"{rid}/transform").info()
    assert info.mapped is not None and info.mapped.ended == 2
    assert runs.counters(rid)["done"] == before["done"]
    assert examine(runs.b).findings == ()


def test_the_doctor_finds_a_run_mid_map_in_order(runs: Runs) -> None:
    mapped_job(runs)
    rid = runs.trigger("maps")
    finish_extract(runs, [1, 2, 3])
    leased = runs.lease(n=2)
    runs.ok(leased["transform[0]"])
    # one instance succeeded, one leased, one ready: every count and place as it should be
    assert examine(runs.b).findings == ()
    assert runs.run(rid).state == "running"


@pytest.mark.parametrize("value", [{"a": 1}, 7, None])
def test_a_value_that_is_not_a_list_fails_the_map(runs: Runs, value: Any) -> None:
    mapped_job(runs)
    rid = runs.trigger("maps")
    finish_extract(runs, value)
    states = runs.states(rid)
    assert (states["transform"], states["load"]) == ("failed", "upstream_failed")
    assert runs.run(rid).state == "failed"
