"""``progress.lua`` (issue 34 §1) at the script level on a real Redis: a value is
stored only under the current lease token (a stale epoch, another worker, an
ended attempt write nothing), with the server's time and the attempt, and the
recent messages stay bounded."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from redcron import App
from redcron.engine import Lease
from redcron.keys import shard_of_id
from redcron.model.progress import MESSAGE_MAX, RECENT_MAX, Pending, Value, check, cut

NOW = 1_800_000_000_000


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))

    @a.task(name="p.work")
    def work() -> None:
        pass

    a.broker.ensure_meta()
    yield a
    a.close()


def leased(app: App, worker: str = "w1") -> Lease:
    handle = app.enqueue("p.work")
    shard = shard_of_id(handle.id)
    (got,) = app.broker.leases.lease(shard, worker, 1, 30_000, ["default"])
    return got


def said(done: float, total: float | None = None, message: str | None = None) -> Pending:
    value = check(done, total, message)
    return Pending(value, ((value.done, value.message),) if value.message else ())


def fields(app: App, lease: Lease) -> dict[bytes, bytes]:
    got: dict[bytes, bytes] = app.broker.client.hgetall(app.broker.keys.ti(lease.shard, lease.iid))
    return got


def test_only_the_current_token_writes(app: App) -> None:
    lease = leased(app)
    put = app.broker.leases.progress
    stale = str(int(lease.epoch) - 1)
    before = fields(app, lease)
    assert put(lease.shard, "w1", [(lease.iid, stale, said(1, 10))], NOW) == [False]
    assert put(lease.shard, "w2", [(lease.iid, lease.epoch, said(1, 10))], NOW) == [False]
    assert fields(app, lease) == before  # nothing written, not even a field
    assert put(lease.shard, "w1", [(lease.iid, lease.epoch, said(3, 10, "three"))], NOW) == [True]
    got = app.broker.inspection.task_info(lease.iid).progress
    assert got is not None
    assert (got.done, got.total, got.message, got.attempt) == (3, 10, "three", 1)
    assert got.at is not None and int(got.at.timestamp() * 1000) == NOW
    assert [(n.done, n.message, n.attempt) for n in got.recent] == [(3, "three", 1)]
    # the hash explains itself (redis-cli HGETALL)
    raw = json.loads(fields(app, lease)[b"progress"])
    assert raw == {"done": 3, "total": 10, "message": "three", "at": NOW, "attempt": 1}
    # once the attempt ended, its token writes nothing more
    assert app.broker.leases.complete(lease.shard, "w1", [(lease.iid, lease.epoch, b"\xc0")])
    assert put(lease.shard, "w1", [(lease.iid, lease.epoch, said(9, 10))], NOW) == [False]
    assert app.broker.inspection.task_info(lease.iid).progress == got


def test_recent_messages_are_bounded_and_values_without_one_add_none(app: App) -> None:
    lease = leased(app)
    put = app.broker.leases.progress
    for i in range(RECENT_MAX + 5):
        assert put(lease.shard, "w1", [(lease.iid, lease.epoch, said(i, message=f"m{i}"))], NOW)
    put(lease.shard, "w1", [(lease.iid, lease.epoch, said(99))], NOW + 1)
    got = app.broker.inspection.task_info(lease.iid).progress
    assert got is not None
    assert (got.done, got.total, got.message) == (99, None, None)
    assert [n.message for n in got.recent] == [f"m{i}" for i in range(5, RECENT_MAX + 5)]
    # several notes in one write (a coalesced batch) keep their own done
    many = Pending(Value(7), ((5, "five"), (6, "six")))
    put(lease.shard, "w1", [(lease.iid, lease.epoch, many)], NOW)
    got = app.broker.inspection.task_info(lease.iid).progress
    assert got is not None
    assert [(n.done, n.message) for n in got.recent][-2:] == [(5, "five"), (6, "six")]
    assert len(got.recent) == RECENT_MAX


def test_a_hand_edited_record_reads_none_and_is_started_again(app: App) -> None:
    lease = leased(app)
    ti = app.broker.keys.ti(lease.shard, lease.iid)
    app.broker.client.hset(ti, mapping={"progress": "garbage", "progress_recent": "{nope"})
    assert app.broker.inspection.task_info(lease.iid).progress is None
    assert app.broker.leases.progress(
        lease.shard, "w1", [(lease.iid, lease.epoch, said(1, 2, "x" * (MESSAGE_MAX + 50)))]
    ) == [True]
    got = app.broker.inspection.task_info(lease.iid).progress
    assert got is not None and got.message == cut("x" * (MESSAGE_MAX + 50))
    assert len(got.message) == MESSAGE_MAX and [n.done for n in got.recent] == [1]
