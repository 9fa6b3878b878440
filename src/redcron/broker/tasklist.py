"""``task list``: the newest task instances matching a filter.

Read from each shard's ``recent`` index (instance id -> created ms; enqueue
and run creation add, each call trims it to the newest 100,000), newest first,
a page at a time, filtering on the instance hash's state/tenant/queue/name:
no SCAN over the keyspace.  Ids whose hash has expired (past its result TTL)
are dropped from the index on the way.  A tenant filter reads only that
tenant's shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redcron.broker.broker import PAYLOADS, fields_of
from redcron.keys import shard_of
from redcron.model import TaskRecord
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.broker import Broker

PAGE = 500
_FILTERED = ("state", "tenant", "queue", "name")


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """What ``task list`` matches on (None: anything)."""

    state: str | None = None
    tenant: str | None = None
    queue: str | None = None
    name: str | None = None

    def matches(self, values: dict[str, str]) -> bool:
        return all(
            want is None or values.get(f) == want
            for f, want in zip(
                _FILTERED, (self.state, self.tenant, self.queue, self.name), strict=True
            )
        )


def list_tasks(broker: Broker, where: TaskFilter, limit: int = 50) -> list[TaskRecord]:
    """Up to ``limit`` instances matching ``where``, newest first (all shards)."""
    return scan_tasks(broker, where, limit)[0]


def scan_tasks(
    broker: Broker, where: TaskFilter, limit: int, scan: int | None = None
) -> tuple[list[TaskRecord], bool]:
    """:func:`list_tasks` reading at most ``scan`` index entries per shard (None:
    all): the dashboard's bound, whatever the filter matches.  Returns the
    records and whether some shard's index was cut short by the bound."""
    if where.tenant is not None:
        shards = [shard_of(where.tenant, broker.shards)]
    else:
        shards = list(range(broker.shards))
    found: list[tuple[float, TaskRecord]] = []
    cut = False
    for shard in shards:
        got, short = _from_shard(broker, shard, where, limit, scan)
        found += got
        cut = cut or short
    found.sort(key=lambda pair: (pair[0], pair[1].id), reverse=True)
    return [record for _created, record in found[:limit]], cut


def _from_shard(
    broker: Broker, shard: int, where: TaskFilter, limit: int, scan: int | None = None
) -> tuple[list[tuple[float, TaskRecord]], bool]:
    client, keys = broker.client, broker.keys
    index = keys.recent(shard)
    out: list[tuple[float, TaskRecord]] = []
    start = read = 0
    while len(out) < limit:
        if scan is not None and read >= scan:
            return out, True
        size = PAGE if scan is None else min(PAGE, scan - read)
        raw_page: Any = client.zrevrange(index, start, start + size - 1, withscores=True)
        page = [(_s(member), float(score)) for member, score in raw_page]
        if not page:
            break
        start += len(page)
        read += len(page)
        pipe = client.pipeline(transaction=False)
        for iid, _score in page:
            pipe.hmget(keys.ti(shard, iid), list(_FILTERED))
        gone: list[str] = []
        wanted: list[tuple[str, float]] = []
        for (iid, score), values in zip(page, pipe.execute(), strict=True):
            if values[0] is None:  # expired after its retention
                gone.append(iid)
            elif where.matches({f: _s(v or b"") for f, v in zip(_FILTERED, values, strict=True)}):
                wanted.append((iid, score))
        if gone:
            client.zrem(index, *gone)
            start -= len(gone)  # the ranks after them moved up
        wanted = wanted[: limit - len(out)]
        if wanted:
            pipe = client.pipeline(transaction=False)
            for iid, _score in wanted:
                pipe.hgetall(keys.ti(shard, iid))
            for (_iid, score), raw in zip(wanted, pipe.execute(), strict=True):
                if raw:
                    out.append(
                        (score, TaskRecord.from_fields(fields_of(raw, keep=PAYLOADS), shard))
                    )
    return out, False
