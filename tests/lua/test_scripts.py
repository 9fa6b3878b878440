"""Script loading and key placement: NOSCRIPT reloads, every key sits in its shard's slot."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.crc import key_slot
from slot_check import exercise_every_shard_key  # tests/helpers

from redcron.clock import ulid
from redcron.config import Settings
from redcron.engine import Broker
from redcron.engine.argv import EnqueueRow
from redcron.engine.scripts import SCRIPT_NAMES, full_source, source
from redcron.errors import Conflict, Rejected
from redcron.keys import (
    TEMPLATES,
    Keys,
    job_of_run,
    lua_key_functions,
    manual_run_id,
    run_id,
)
from redcron.model.states import (
    RUN_ACTIVE,
    RUN_TERMINAL,
    TASK_LEASED,
    TASK_TERMINAL,
    lua_state_tables,
)

T0 = 1_700_000_000_000


def row(iid: str, tenant: str = "acme", queue: str = "default", delay: int = 0) -> EnqueueRow:
    return EnqueueRow(
        iid=iid,
        name="t",
        kind="python",
        args=b"\x90",
        queue=queue,
        tenant=tenant,
        priority="normal",
        timeout_ms=0,
        max_attempts=2,
        retry_base_ms=100,
        retry_cap_ms=1000,
        delay_ms=delay,
        result_ttl_s=3600,
    )


@pytest.fixture
def broker(redis_url: str, key_prefix: str) -> Iterator[Broker]:
    b = Broker(Settings(redis_url=redis_url, prefix=key_prefix.rstrip(":"), shards=4))
    b.ensure_meta()
    yield b
    b.close()


def test_noscript_is_reloaded_transparently(broker: Broker, r: redis.Redis) -> None:
    assert broker.enqueuer.enqueue([row(f"0-{ulid()}")]) == 1
    sha = broker.scripts.script("enqueue").sha
    assert r.script_exists(sha) == [True]
    r.script_flush()
    assert r.script_exists(sha) == [False]
    assert broker.enqueuer.enqueue([row(f"0-{ulid()}")]) == 1
    assert r.script_exists(sha) == [True]
    # the pipelined path (several shards / > 256 rows) reloads too
    r.script_flush()
    rows = [row(f"0-{ulid()}") for _ in range(300)]
    assert broker.enqueuer.enqueue(rows) == 300
    r.script_flush()
    held = broker.leases.lease(0, "w1", 5, 10_000, ["default"])
    assert len(held) == 5
    # a pipelined call that finds no script is re-run once, in place, after loading it
    r.script_flush()
    done, failed = broker.leases.report(
        0, "w1", [(x.iid, x.epoch, b"\xc0") for x in held[:3]], [], []
    )
    assert done == [True] * 3 and failed == []
    r.script_flush()
    done, failed = broker.leases.report(0, "w1", [(x.iid, x.epoch, b"\xc0") for x in held], [], [])
    assert done == [False] * 3 + [True] * 2  # each call ran once: the first three were done


def test_every_script_loads_and_declares_its_interface(r: redis.Redis) -> None:
    for name in SCRIPT_NAMES:
        text = source(name)
        assert "@include" not in text, name
        header = text.split("]]", 1)[0]
        assert header.startswith(f"--[[ {name}:"), name
        assert "KEYS[1]" in header, name
        assert "Returns" in header, name
        # a script reads only KEYS[1]: every other key is built from it, except
        # the refusal key of a multi-call enqueue batch (keys.py builds it in the
        # shard's slot; a token per batch, so it is passed in)
        batch = {"2"} if name in ("enqueue", "enqueue_check") else set()
        assert set(re.findall(r"KEYS\[(\d+)\]", full_source(name))) == {"1", *batch}, name
        r.script_load(full_source(name))


def test_lua_key_builders_match_python_keys(r: redis.Redis, key_prefix: str) -> None:
    keys = Keys(key_prefix.rstrip(":"))
    # one call per template, with awkward-but-valid parts
    parts = {
        kind: [f"{kind}-{i}.x_y" for i in range(len(names))]
        for kind, (_t, names) in TEMPLATES.items()
    }
    parts["log"] = ["3-01ARYZ6S41TSV4RRFFQ69G5FAV", "12"]
    calls = ", ".join(
        f"key_{kind}({', '.join(repr(p).replace(chr(39), chr(34)) for p in args)})"
        for kind, args in parts.items()
    )
    script = lua_key_functions() + f"return {{{calls}}}"
    for shard in (0, 3, 17):
        got = [x.decode() for x in r.eval(script, 1, keys.shard(shard))]
        want = [keys.build(shard, kind, *args) for kind, args in parts.items()]
        assert got == want
    # numbers are formatted the same way as in Python (attempt counters)
    got_num = r.eval(lua_key_functions() + "return key_log('x', 2)", 1, keys.shard(1))
    assert got_num.decode() == keys.log(1, "x", 2)


def test_lua_run_id_builder_and_parser_match_python(r: redis.Redis, key_prefix: str) -> None:
    # fire_ms arrives as ARGV text or as a number (tonumber of a stored field)
    script = lua_key_functions() + (
        "return {make_run_id(ARGV[1], ARGV[2]), make_run_id(ARGV[1], tonumber(ARGV[2])),"
        " job_of_run(ARGV[3]), job_of_run(ARGV[4]) or false}"
    )
    job_id, fire_ms = "3-01ARYZ6S41TSV4RRFFQ69G5FAV.2", 1_764_561_600_000
    manual = manual_run_id(job_id, "01ARYZ6S41TSV4RRFFQ69G5FAW")
    got = r.eval(script, 1, Keys(key_prefix.rstrip(":")).shard(3), job_id, fire_ms, manual, "x")
    assert [x.decode() if x else x for x in got] == [
        run_id(job_id, fire_ms),
        run_id(job_id, fire_ms),
        job_of_run(manual),
        None,  # no '@': Lua's nil (Python's job_of_run returns the whole text)
    ]
    assert job_of_run(run_id(job_id, fire_ms)) == job_id == job_of_run(manual)


@pytest.mark.parametrize("prefix", ["rc", "t0:x", "prod.eu-1"])
def test_every_key_of_a_shard_has_the_shards_slot(prefix: str) -> None:
    keys = Keys(prefix)
    for shard in (0, 1, 7, 255, 1023):
        slot = key_slot(keys.shard(shard).encode())
        for tenant in ("acme", "a-b.c_d", "x" * 64, "0"):
            for queue in ("default", "gpu", "q.1"):
                for kind, (_t, names) in TEMPLATES.items():
                    values = {
                        "iid": f"{shard}-{ulid()}",
                        "tenant": tenant,
                        "queue": queue,
                        "priority": "high",
                        "attempt": 3,
                        "key": f"k:{tenant}",
                        "name": "m",
                        "job_id": f"{shard}-{ulid()}",
                        "run_id": f"{shard}-{ulid()}@1795000000000",
                        "minute": 29932000,
                        "token": ulid(),
                        "digest": "0beec7b5ea3f0fdbc95d0dd47f3c5bc275da8a33",
                        "mode": "debounce",
                        "ck": "{cust:42}",  # a key value with braces: the tag holds
                        "group": "{cust:7}",  # a rate group, likewise
                    }
                    key = keys.build(shard, kind, *(values[n] for n in names))
                    assert key_slot(key.encode()) == slot, key


def test_shards_use_distinct_tags() -> None:
    keys = Keys("rc")
    assert len({keys.shard(s) for s in range(64)}) == 64


def _scan(r: redis.Redis, prefix: str) -> list[str]:
    return sorted(k.decode() for k in r.scan_iter(match=f"{prefix}*", count=1000))


def test_keys_written_by_the_protocol_stay_in_the_shards_slot(
    broker: Broker, r: redis.Redis, key_prefix: str
) -> None:
    exercise_every_shard_key(broker, r, key_prefix.rstrip(":"))


# -- enqueue: checks before writes -------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("priority", "urgent", "priority"),
        ("delay_ms", "soon", "delay_ms"),
        ("delay_ms", -5, "delay_ms"),
        ("max_attempts", 0, "max_attempts"),
        ("retry_base_ms", "x", "retry_base_ms"),
        ("queue", "", "queue"),
    ],
)
def test_enqueue_rejects_a_malformed_row_and_writes_nothing(
    broker: Broker, r: redis.Redis, key_prefix: str, field: str, value: Any, message: str
) -> None:
    good = row(f"0-{ulid()}")
    bad = row(f"0-{ulid()}")._replace(**{field: value})
    with pytest.raises(Rejected, match=message):
        broker.enqueuer.enqueue([good, bad])
    assert _scan(r, key_prefix) == [key_prefix + "{g}:meta"]


def test_enqueue_rejects_a_row_that_is_not_a_msgpack_map(broker: Broker) -> None:
    with pytest.raises(Rejected, match="task row 0 is not a msgpack map"):
        broker.scripts.run("enqueue", [broker.keys.shard(0)], ["", "0-x", "t"])


def test_enqueue_refuses_an_existing_or_repeated_id(
    broker: Broker, r: redis.Redis, key_prefix: str
) -> None:
    iid = f"0-{ulid()}"
    with pytest.raises(Conflict):
        broker.enqueuer.enqueue([row(iid), row(iid)])
    assert _scan(r, key_prefix) == [key_prefix + "{g}:meta"]
    broker.enqueuer.enqueue([row(iid)])
    before = r.hgetall(broker.keys.ti(0, iid))
    with pytest.raises(Conflict):
        broker.enqueuer.enqueue([row(f"0-{ulid()}"), row(iid, tenant="acme")])
    assert r.hgetall(broker.keys.ti(0, iid)) == before
    assert r.xlen(broker.keys.q(0, "default", "acme", "normal")) == 1


def test_enqueue_registers_tenants_and_queues(broker: Broker, r: redis.Redis) -> None:
    broker.enqueuer.enqueue(
        [
            row(f"0-{ulid()}", tenant="acme"),
            row(f"0-{ulid()}", queue="later", tenant="acme", delay=60_000),
        ]
    )
    assert r.zrange(broker.keys.tenants(0), 0, -1) == [b"acme"]
    # a queue with only countdown work so far is listed too
    assert r.smembers(broker.keys.queues(0)) == {b"default", b"later"}


def test_lua_state_tables_match_the_python_enums(broker: Broker) -> None:
    """Evaluated by Redis itself: the generated tables are what the scripts see."""
    names = ("TASK_TERMINAL", "TASK_LEASED", "RUN_ACTIVE", "RUN_TERMINAL")
    body = "local out = {}\n"
    for i, name in enumerate(names, 1):
        body += (
            f"out[{i}] = {{}}\nfor s, v in pairs({name}) do if v == true then "
            f"table.insert(out[{i}], s) end end\ntable.sort(out[{i}])\n"
        )
    raw = broker.client.eval(lua_state_tables() + body + "return out", 0)
    got = [{x.decode() for x in group} for group in raw]
    expected = [TASK_TERMINAL, TASK_LEASED, RUN_ACTIVE, RUN_TERMINAL]
    assert got == [{s.value for s in e} for e in expected]
