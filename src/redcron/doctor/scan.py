"""Reading a shard for doctor in two steps: discover, then verify each batch in
one ``MULTI``/``EXEC`` snapshot.  Discovering SCANs the keys of a kind, or pages
through an index or a stream; verifying in a snapshot keeps work a live system
moves between the two reads from showing up as a finding.  Every read is at
most ``BATCH`` keys or members, so memory stays bounded however large the
shard.  The key scan itself is :func:`redcron.engine.connection.scan_keys`,
which the attempt audit shares."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import redis

from redcron.engine.connection import raise_unreachable
from redcron.keys import GROUP
from redcron.serde import text as _s

#: keys (or index members) read per round trip, and verified per MULTI snapshot
BATCH = 200

#: what an instance hash is read for
FIELDS = (
    "state",
    "loc",
    "queue",
    "tenant",
    "priority",
    "lease_entry",
    "deadline",
    "run",
    "due",
    "worker",
    "name",  # with ck: a waiting instance's concurrency key list (ckwaiting:)
    "ck",
)

#: a command: a pipeline method name and its arguments
Cmd = tuple[Any, ...]


def zpages(r: redis.Redis, key: str) -> Iterator[list[tuple[str, float]]]:
    """Pages of (member, score) of sorted set ``key``, in score order."""
    start = 0
    while True:
        page: Any = r.zrange(key, start, start + BATCH - 1, withscores=True)
        if not page:
            return
        yield [(_s(m), float(sc)) for m, sc in page]
        if len(page) < BATCH:
            return
        start += BATCH


def xpages(r: redis.Redis, stream: str, start: str = "-") -> Iterator[Any]:
    """Pages of (id, fields) entries of ``stream`` from ``start`` on (``(<id>``
    starts after that id)."""
    while True:
        page: Any = r.xrange(stream, start, "+", count=BATCH)
        if not page:
            return
        yield page
        if len(page) < BATCH:
            return
        start = "(" + _s(page[-1][0])


def pending_pages(r: redis.Redis, stream: str) -> Iterator[list[str]]:
    """Pages of the ids of the entries pending in ``stream``'s consumer group."""
    low = "-"
    while True:
        rows: Any = r.xpending_range(stream, GROUP, low, "+", BATCH)
        if not rows:
            return
        ids = [_s(row["message_id"]) for row in rows]
        yield ids
        if len(rows) < BATCH:
            return
        low = "(" + ids[-1]


def _execute(r: redis.Redis, cmds: Sequence[Cmd], transaction: bool) -> list[Any]:
    if not cmds:
        return []
    pipe = r.pipeline(transaction=transaction)
    for name, *args in cmds:
        getattr(pipe, name)(*args)
    replies = list(pipe.execute(raise_on_error=False))
    # an error reply in place is the key's (WRONGTYPE: a finding); a node down or a
    # CLUSTERDOWN reply is no finding about any key: the examination stops
    raise_unreachable(replies)
    return replies


def tx(r: redis.Redis, cmds: Sequence[Cmd]) -> list[Any]:
    """Run ``(method, *args)`` commands as one MULTI/EXEC (a consistent view);
    a command that failed gives its exception as its reply."""
    return _execute(r, cmds, transaction=True)


def pipelined(r: redis.Redis, cmds: Sequence[Cmd]) -> list[Any]:
    """Run commands in one round trip, with no snapshot (discovery reads)."""
    return _execute(r, cmds, transaction=False)


def snapshot(r: redis.Redis, groups: Sequence[Sequence[Cmd]]) -> list[list[Any]]:
    """Run every group's commands in one MULTI/EXEC; the replies grouped as the
    commands were (one group per key or member judged)."""
    replies = iter(tx(r, [cmd for group in groups for cmd in group]))
    return [[next(replies) for _ in group] for group in groups]


def entry_cmds(stream: str, eid: str) -> list[Cmd]:
    """Read entry ``eid`` of ``stream``, and whether it is pending (delivered)."""
    return [("xrange", stream, eid, eid), ("xpending_range", stream, GROUP, eid, eid, 1)]


def instance_fields(values: Sequence[Any]) -> dict[str, str]:
    """An ``HMGET <instance> FIELDS`` reply as text, without the fields not set."""
    return {n: _s(v) for n, v in zip(FIELDS, values, strict=True) if v is not None}


def named(entry_fields: Mapping[bytes, bytes]) -> str:
    """The instance id a ready-stream or DLQ entry names (its ``i`` field)."""
    return _s(entry_fields.get(b"i", b""))


def names(entry: Any, iid: str) -> bool:
    """Is ``entry`` (an ``XRANGE id id`` reply) there, naming instance ``iid``?"""
    return bool(entry) and named(entry[0][1]) == iid
