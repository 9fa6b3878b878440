"""``inputs.lua`` (issue 32 §1): what tasks of runs receive from their run, read
in one call, at the script level on a real Redis: the run's params, then each
upstream task's result in ``depends_on`` order; nothing for a one-off task; an
upstream with no result (not succeeded, or its record gone) reads nil."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest

from redcron import App
from redcron.model.jobs import Task

TENANT = "acme"


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    a.broker.ensure_meta()
    yield a
    a.close()


def inputs_of(app: App, shard: int, *iids: str) -> Any:
    """inputs.lua's raw reply for ``iids`` on ``shard``."""
    return app.broker.scripts.run("inputs", [app.broker.keys.shard(shard)], list(iids))


def test_params_and_upstream_results_in_deps_order(app: App) -> None:
    tasks = {
        "a": Task("t"),
        "b": Task("t"),
        "c": Task("t", depends_on=["b", "a"]),
    }
    app.jobs.put("j", tasks=tasks, tenant=TENANT, allow_unregistered=True)
    rid = app.jobs.trigger("j", tenant=TENANT, params={"day": "mon"})
    b, keys, shard = app.broker, app.broker.keys, int(rid.partition("-")[0])
    # a succeeded with a result; b has none yet (its record says pending/ready)
    b.client.hset(keys.ti(shard, f"{rid}/a"), "result", msgpack.packb({"n": 1}))
    got = inputs_of(app, shard, f"{rid}/c", f"{rid}/a", "0-one-off")
    c_row, a_row, one_off = got
    assert json.loads(c_row[0]) == {"day": "mon"}
    assert c_row[1:] == [b"b", None, b"a", msgpack.packb({"n": 1})]
    assert json.loads(a_row[0]) == {"day": "mon"} and a_row[1:] == []  # a root task
    assert one_off == [None]  # a one-off task is of no run
    # the record of an upstream gone (its run's retention): nil, not an error
    b.client.delete(keys.ti(shard, f"{rid}/a"))
    (row,) = inputs_of(app, shard, f"{rid}/c")
    assert row[1:] == [b"b", None, b"a", None]
    # decoded: only the upstream that holds a result
    (inputs,) = b.inspection.run_inputs(shard, [f"{rid}/c"])
    assert inputs.params == {"day": "mon"} and inputs.upstream == {}


def test_a_run_without_params_reads_nil(app: App) -> None:
    app.jobs.put("k", tasks={"x": Task("t")}, tenant=TENANT, allow_unregistered=True)
    rid = app.jobs.trigger("k", tenant=TENANT)
    shard = int(rid.partition("-")[0])
    (row,) = inputs_of(app, shard, f"{rid}/x")
    assert row[0] in (None, b"{}")  # a manual trigger without params writes {}
    (inputs,) = app.broker.inspection.run_inputs(shard, [f"{rid}/x"])
    assert inputs.params == {} and inputs.upstream == {}
