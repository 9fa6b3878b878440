"""Item rows as one msgpack map per item (issue 28 §2): enqueue, fail, fire and
fire_batch decode them with cmsgpack, refuse a malformed one before writing
anything, and store what they stored when every field was an argument of its
own, byte for byte (numbers travel as text: Redis 6.2 writes a Lua number
back with %.17g)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
import redis
from lua_ops import T0, Ops, new_id, row
from redis.connection import Encoder

from redcron.engine import FailItem, argv
from redcron.engine.argv import FireArgs
from redcron.errors import Rejected

#: how redis-py sent each value when it was an ARGV entry of its own, so what a
#: script stored verbatim (int -> str, float -> repr, str -> utf-8)
OLD = Encoder("utf-8", "strict", False).encode


def _keys(r: redis.Redis, prefix: str) -> list[bytes]:
    return sorted(r.scan_iter(match=f"{prefix}*", count=1000))


def _packed(fields: dict[str, Any]) -> bytes:
    return msgpack.packb(fields, use_bin_type=False)


def _good(iid: str) -> dict[str, Any]:
    """A good enqueue row's fields (values as bytes)."""
    return {k.decode(): v for k, v in msgpack.unpackb(argv.enqueue_row(row(iid)), raw=True).items()}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b"not msgpack \xc1", "is not a msgpack map"),
        (_packed([1, 2]), "task row 1: iid must be a string"),  # an array: a table, no iid
        (msgpack.packb({"iid": "x"}, use_bin_type=True), "must be a string"),
        # bytes packed as bin: cmsgpack cannot decode the row at all
        (msgpack.packb(_good("0-bin"), use_bin_type=True), "msgpack map"),
        (_packed({k: v for k, v in _good("0-noname").items() if k != "name"}), "name must be"),
        (_packed({**_good("0-int"), "timeout_ms": 5}), "timeout_ms"),
        (_packed({**_good("0-cpu"), "cpu": 0.5}), "cpu must be a string"),
        (_packed({**_good("0-ck"), "ck": "k"}), "max_concurrent"),
    ],
)
def test_enqueue_rejects_a_malformed_row_naming_it_and_writes_nothing(
    ops: Ops, r: redis.Redis, key_prefix: str, bad: bytes, message: str
) -> None:
    before = _keys(r, key_prefix)
    good = argv.enqueue_row(row(new_id()))
    with pytest.raises(Rejected, match=message):
        ops.run("enqueue", [ops.now, good, bad])
    assert _keys(r, key_prefix) == before


def test_an_enqueued_hash_stores_each_value_as_the_positional_arguments_did(
    ops: Ops, r: redis.Redis
) -> None:
    iid = new_id()
    task = row(iid)._replace(
        name="naïve.task",
        args=b"\x92\x00\xff\xc1",  # msgpack task args: any bytes
        timeout_ms=123_456_789_012,
        max_attempts=7,
        retry_base_ms=1500,
        retry_cap_ms=2**53 + 1,  # past a Lua number's exact integers
        result_ttl_s=86_400,
        cpu=0.1,  # 0.10000000000000001 had it travelled as a Lua number on 6.2
        mem=2**40 + 1,
        ck="tenant-db",
        ckn=3,
    )
    assert ops.enqueue(task) == 1
    stored = r.hgetall(ops.k.ti(0, iid))
    verbatim = ("name", "kind", "args", "queue", "tenant", "priority", "timeout_ms",
                "max_attempts", "retry_base_ms", "retry_cap_ms", "result_ttl_s", "cpu", "mem",
                "ck", "ckn")  # fmt: skip
    for field in verbatim:
        assert stored[field.encode()] == OLD(getattr(task, field)), field
    assert stored[b"state"] == b"ready" and stored[b"created"] == str(T0).encode()
    # no resource request: neither field; one of them: both, the other empty (as before)
    plain, half = new_id(), new_id()
    ops.enqueue(row(plain), row(half)._replace(mem=512))
    assert b"cpu" not in r.hgetall(ops.k.ti(0, plain))
    assert (r.hget(ops.k.ti(0, half), "cpu"), r.hget(ops.k.ti(0, half), "mem")) == (b"", b"512")


def test_a_failed_attempt_stores_its_error_and_exit_code_verbatim(ops: Ops, r: redis.Redis) -> None:
    iid = new_id()
    ops.enqueue(row(iid, max_attempts=1))
    [tok] = ops.lease("w1")
    item = FailItem(iid, tok.epoch, "failed", "bad thing: ünïcode\nline 2", False, exit_code=137)
    [(state, delay)] = ops.run("fail", argv.fail("w1", [item], ops.now, 0.25))
    assert (state, delay) == (b"dead", -1)
    stored = r.hgetall(ops.k.ti(0, iid))
    assert stored[b"error"] == stored[b"a:1:error"] == OLD(item.error)
    assert stored[b"exit_code"] == stored[b"a:1:exit"] == b"137"


def test_fail_rejects_a_malformed_item_before_ending_any_attempt(ops: Ops, r: redis.Redis) -> None:
    iid = new_id()
    ops.enqueue(row(iid))
    [tok] = ops.lease("w1")
    good = argv.fail("w1", [FailItem(iid, tok.epoch, "failed", "e", True)], ops.now, 0.5)
    before = r.hgetall(ops.k.ti(0, iid))
    for bad in (b"\xc1", _packed({"iid": iid, "epoch": tok.epoch})):
        with pytest.raises(Rejected, match="fail item 1"):
            ops.run("fail", [*good, bad])
    assert r.hgetall(ops.k.ti(0, iid)) == before


def test_a_fire_batch_call_is_one_beats() -> None:
    a = FireArgs("j1", "", "", 1, None, None, "1", "cron", 0, "j1@1")
    b = FireArgs("j2", "", "", 1, None, None, "2", "cron", 0, "j2@1")
    with pytest.raises(ValueError, match="one beat's"):
        argv.fire_batch([a, b])
    assert argv.fire_batch([a, a])[:2] == ["", "1"]


@pytest.mark.parametrize("script", ["fire", "fire_batch"])
def test_fire_rejects_a_malformed_row_and_writes_nothing(
    ops: Ops, r: redis.Redis, key_prefix: str, script: str
) -> None:
    before = _keys(r, key_prefix)
    for bad in (b"\xc1", _packed({"job_id": "j", "run_id": "j@1", "skipped": 2})):
        with pytest.raises(Rejected, match="fire row 0"):
            ops.run(script, ["", "", bad])
    assert _keys(r, key_prefix) == before


def _job_row(**change: Any) -> dict[str, Any]:
    """A good job_put row's fields (issue 28: one msgpack map, task args nested)."""
    fields: dict[str, Any] = {
        "tenant": "acme", "name": "j", "id": "0-J1", "spec": '{"tasks":{"t":{"ref":"m.f"}}}',
        "template": '[{"task":"t","name":"m.f","max_attempts":1}]',
        "sig": "[null, null, null, \"UTC\"]", "args": {"t": b"\x92\x90\x80"},
    }  # fmt: skip
    fields.update(change)
    return {k: v for k, v in fields.items() if v is not None}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b"\xc1", "is not a msgpack map"),
        (_packed(_job_row(spec=None)), "spec must be a string"),
        (_packed(_job_row(keep_runs=5)), "keep_runs must be a string"),
        (_packed(_job_row(args="x")), "args must be a map"),
        (_packed(_job_row(args={"t": 1})), "args must map task names"),
        (_packed(_job_row(template="{")), "template is not a JSON list"),
    ],
)
def test_job_put_rejects_a_malformed_row_naming_it_and_writes_nothing(
    ops: Ops, r: redis.Redis, key_prefix: str, bad: bytes, message: str
) -> None:
    before = _keys(r, key_prefix)
    with pytest.raises(Rejected, match=message):
        ops.run("job_put", [ops.now, bad])
    assert _keys(r, key_prefix) == before


def test_job_put_writes_no_default_and_fills_the_template_in(ops: Ops, r: redis.Redis) -> None:
    jid, version, change = ops.run("job_put", [ops.now, _packed(_job_row(keep_runs="5"))])
    assert (jid, version, change) == (b"0-J1", 1, b"created")
    jk = ops.k.job(0, "0-J1")
    fields = {k.decode() for k in r.hkeys(jk)}
    assert fields == {"tenant", "name", "created", "version", "spec", "template", "trigger_sig",
                      "next_fire", "args:t", "keep_runs"}  # fmt: skip
    assert r.hget(jk, "args:t") == b"\x92\x90\x80"
    assert r.sismember(ops.k.queues(0), "default")  # the row's queue, by its default
