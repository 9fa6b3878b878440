"""The follow-up stream (docs/architecture.md, "Follow-ups beside the hot path"):
what only reacts to an end is written in the same call as the end, applied by
maintenance once however often it is asked, and nothing is lost while no one
applies it; ``metrics=basic`` keeps the lifetime figures only."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from lua_ops import T0, Ops, new_id, row

from redcron.config import Settings
from redcron.engine import Broker

LUA = os.path.join(os.path.dirname(__file__), "..", "..", "src", "redcron", "lua")


def entries(ops: Ops) -> list[tuple[str, dict[str, str]]]:
    raw: Any = ops.r.xrange(ops.k.followups(0))
    return [(eid.decode(), {k.decode(): v.decode() for k, v in f.items()}) for eid, f in raw]


def attempts(ops: Ops) -> dict[str, int]:
    raw: Any = ops.r.hgetall(ops.k.counters(0))
    # the per-tenant fields (attempts:<tenant>|<outcome>), not the sums (attempts:*|...)
    return {
        k.decode().removeprefix("attempts:"): int(v)
        for k, v in raw.items()
        if k.startswith(b"attempts:") and not k.startswith(b"attempts:*|")
    }


def minute(ops: Ops) -> dict[str, int]:
    # the minute's attempts (attempts:<tenant>|<kind>), as act:<minute> held them
    raw: Any = ops.r.hgetall(ops.k.minute(0, T0 // 60_000))
    return {
        k.decode().removeprefix("attempts:"): int(v)
        for k, v in raw.items()
        if k.startswith(b"attempts:")
    }


@pytest.fixture
def quiet(broker: Broker) -> Ops:
    """Script calls whose follow-ups wait until the test applies them."""
    return Ops(broker, follow=False)


def test_an_end_writes_its_follow_up_in_the_same_call_and_maintenance_applies_it(
    quiet: Ops,
) -> None:
    iids = [new_id() for _ in range(3)]
    quiet.enqueue(*(row(i) for i in iids))
    toks = quiet.lease("w1", n=3)
    assert quiet.complete("w1", toks) == [1, 1, 1]
    # the end is written; what reacts to it is one entry of the stream, not yet applied
    assert all(quiet.info(i)["state"] == "succeeded" for i in iids)
    [(_eid, fields)] = entries(quiet)
    assert (fields["kind"], int(fields["at"])) == ("ends", T0)
    rows = json.loads(fields["attempts"])
    assert sorted(r[0] for r in rows) == sorted(iids)
    # the task's name and how long it took ride along: applying it reads no instance
    assert all(r[1:] == [1, "succeeded", "acme", 0, "", "job", 0] for r in rows), rows
    assert attempts(quiet) == {}
    assert quiet.follow() == 1
    assert attempts(quiet) == {"acme|succeeded": 3}
    assert minute(quiet) == {"acme|succeeded": 3, "*|succeeded": 3}
    assert entries(quiet) == []  # applied and deleted in the same call


def test_an_entry_is_applied_once_however_often_it_is_asked(quiet: Ops) -> None:
    iid = new_id()
    quiet.enqueue(row(iid, max_attempts=1))
    [t] = quiet.lease("w1")
    assert quiet.fail("w1", t, retryable=False) == "dead"
    [(eid, fields)] = entries(quiet)
    assert json.loads(fields["dead"])[0][:4] == [iid, "acme", "job", "failed"]
    # two callers racing (or one retried after a lost reply) name the same entry
    assert quiet.run("follow_ends", ["full", eid, eid]) == 1
    assert quiet.run("follow_ends", ["full", eid]) == 0
    assert attempts(quiet) == {"acme|failed": 1}
    assert quiet.r.hget(quiet.k.counters(0), "dead") == b"1"
    events: Any = quiet.r.xrange(quiet.k.events(0))
    assert [f[b"type"] for _id, f in events] == [b"dead_lettered"]


def test_an_entry_of_another_kind_is_left_for_its_own_script(quiet: Ops) -> None:
    quiet.enqueue(row(new_id()))
    quiet.complete("w1", quiet.lease("w1"))
    [(eid, _fields)] = entries(quiet)
    assert quiet.run("follow_runs", [eid]) == 0
    assert quiet.run("follow_chain", [eid]) == 0
    assert len(entries(quiet)) == 1


def test_nothing_is_lost_while_no_one_applies_the_follow_ups(quiet: Ops) -> None:
    # a maintainer killed (or none running) for a while: the ends pile up, then
    # one pass applies them all, in order, each once
    for _ in range(40):
        quiet.enqueue(row(new_id()))
        quiet.complete("w1", quiet.lease("w1"))
    assert len(entries(quiet)) == 40 and attempts(quiet) == {}
    assert quiet.b.maintenance.follow_up(0, read=15) == (15, True)
    assert quiet.follow() == 25
    assert attempts(quiet) == {"acme|succeeded": 40}
    assert entries(quiet) == []


def test_a_pass_begins_no_read_past_its_budget(quiet: Ops, monkeypatch: Any) -> None:
    # a backlog (the midnight burst's 100,000 ends) once took a beat's pass past
    # its 10 s shard lease: a pass stops reading once its budget is spent
    for _ in range(5):
        quiet.enqueue(row(new_id()))
        quiet.complete("w1", quiet.lease("w1"))
    m = quiet.b.maintenance
    read_two = m.follow_up
    monkeypatch.setattr(m, "follow_up", lambda shard: read_two(shard, read=2))
    assert m.follow_all(0, budget_s=0) == 2  # one read, then the budget is spent
    assert len(entries(quiet)) == 3
    assert m.follow_all(0) == 3  # the next pass goes on where it stopped
    assert attempts(quiet) == {"acme|succeeded": 5}


def test_maintenance_applies_the_follow_ups_of_its_pass(quiet: Ops) -> None:
    quiet.enqueue(row(new_id()))
    quiet.complete("w1", quiet.lease("w1"))
    done = quiet.b.maintenance.maintain(0, now=quiet.now)
    assert done.followed == 1 and attempts(quiet) == {"acme|succeeded": 1}


@pytest.fixture
def basic(redis_url: str, key_prefix: str) -> Iterator[Ops]:
    b = Broker(
        Settings(redis_url=redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.1,
                 metrics="basic")
    )  # fmt: skip
    b.ensure_meta()
    yield Ops(b)
    b.close()


def test_metrics_basic_keeps_the_lifetime_figures_and_no_minute(basic: Ops) -> None:
    basic.enqueue(row(new_id()))
    [t] = basic.lease("w1")
    basic.start("w1", [t])
    basic.now += 30
    assert basic.complete("w1", [t]) == [1]
    assert attempts(basic) == {"acme|succeeded": 1}  # /metrics reads these
    durations: Any = basic.r.hgetall(basic.k.durations(0, "acme"))
    assert durations[b"task:job|0.1"] == b"1" and durations[b"task:job|sum_ms"] == b"30"
    assert minute(basic) == {}  # the per-minute figures only the charts read
    # nor lease's dispatch shares: no minute hash at all
    assert not basic.r.exists(basic.k.minute(0, T0 // 60_000))


def _includes(name: str, seen: set[str]) -> set[str]:
    with open(os.path.join(LUA, name)) as fh:
        for dep in re.findall(r"^-- @include (\S+)", fh.read(), re.M):
            if dep not in seen:
                seen.add(dep)
                _includes(dep, seen)
    return seen


SCRIPTS = sorted(f for f in os.listdir(LUA) if f.endswith(".lua"))


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_that_notes_follow_ups_writes_them(name: str) -> None:
    """A script whose libraries note follow-ups (lib/followup.lua) flushes them
    before it returns: a follow-up noted and never written would be lost."""
    if "lib/followup.lua" not in _includes(name, set()):
        return
    with open(os.path.join(LUA, name)) as fh:
        assert "follow_flush(" in fh.read(), f"{name} notes follow-ups but never writes them"
