"""``task list``: the newest task instances matching a filter.

Read from two indexes of each shard, newest first and merged by creation
time: ``recent`` (one-off instance id -> created ms; enqueue adds, each call
trims it to the newest 100,000) and the run listing (run id -> created ms:
``runidx``, or the tenant's ``truns`` under a tenant filter), whose runs stand
for their tasks (a run's tasks are created with it, so its score is theirs).
A run's tasks are not in ``recent``: that would repeat, per task, what the
run's one entry says.  Older deployments wrote them there; such an id is read
once (the same instance through its run is skipped).  Filtering is on the
instance hash's state/tenant/queue/name, a page at a time: no SCAN over the
keyspace.  One-off ids whose hash has expired (past their result TTL) are
dropped from ``recent`` on the way.  A tenant filter reads only that tenant's
shard.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redcron.engine.core import PAYLOADS, fields_of
from redcron.engine.partial import note_unavailable, shards_to_read
from redcron.keys import shard_of
from redcron.model import TaskRecord
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core

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


def list_tasks(broker: Core, where: TaskFilter, limit: int = 50) -> list[TaskRecord]:
    """Up to ``limit`` instances matching ``where``, newest first (all shards)."""
    return scan_tasks(broker, where, limit)[0]


def scan_tasks(
    broker: Core, where: TaskFilter, limit: int, scan: int | None = None
) -> tuple[list[TaskRecord], bool]:
    """:func:`list_tasks` reading at most ``scan`` instances per shard (None:
    all): the dashboard's bound, whatever the filter matches.  Returns the
    records and whether some shard's index was cut short by the bound."""
    if where.tenant is not None:
        shards = [shard_of(where.tenant, broker.shards)]
    else:
        shards = list(range(broker.shards))
    found: list[tuple[float, TaskRecord]] = []
    cut = False
    every = where.tenant is None
    for shard in shards_to_read(broker, shards) if every else shards:
        try:
            got, short = _from_shard(broker, shard, where, limit, scan)
        except Exception as exc:
            # every tenant's: a shard whose master is down is left out, named
            # (partial_reads); a tenant's own shard down is the caller's error
            if every and note_unavailable(broker, shard, exc):
                continue
            raise
        found += got
        cut = cut or short
    found.sort(key=lambda pair: (pair[0], pair[1].id), reverse=True)
    return [record for _created, record in found[:limit]], cut


def _from_shard(
    broker: Core, shard: int, where: TaskFilter, limit: int, scan: int | None = None
) -> tuple[list[tuple[float, TaskRecord]], bool]:
    client, keys = broker.client, broker.keys
    runs = keys.truns(shard, where.tenant) if where.tenant is not None else keys.runidx(shard)
    ids = heapq.merge(
        _one_offs(broker, shard), _run_tasks(broker, shard, runs), key=lambda pair: -pair[1]
    )
    out: list[tuple[float, TaskRecord]] = []
    read = 0
    seen: set[str] = set()
    while len(out) < limit:
        if scan is not None and read >= scan:
            return out, True
        size = PAGE if scan is None else min(PAGE, scan - read)
        chunk = list(itertools.islice(ids, size))
        if not chunk:
            break
        read += len(chunk)
        page = []
        for pair in chunk:
            if pair[0] not in seen:
                seen.add(pair[0])
                page.append(pair)
        pipe = client.pipeline(transaction=False)
        for iid, _score in page:
            pipe.hmget(keys.ti(shard, iid), list(_FILTERED))
        wanted = [
            (iid, score)
            for (iid, score), values in zip(page, pipe.execute(), strict=True)
            if values[0] is not None
            and where.matches({f: _s(v or b"") for f, v in zip(_FILTERED, values, strict=True)})
        ][: limit - len(out)]
        if wanted:
            pipe = client.pipeline(transaction=False)
            for iid, _score in wanted:
                pipe.hgetall(keys.ti(shard, iid))
            for (iid, score), raw in zip(wanted, pipe.execute(), strict=True):
                if raw:
                    out.append(
                        (score, TaskRecord.from_fields(fields_of(raw, keep=PAYLOADS), shard, iid))
                    )
    return out, False


def _one_offs(broker: Core, shard: int) -> Iterator[tuple[str, float]]:
    """(instance id, created ms) of ``recent``, newest first, a page at a time;
    ids whose hash expired are dropped from the index as they are met."""
    client, keys = broker.client, broker.keys
    index = keys.recent(shard)
    start = 0
    while True:
        raw_page: Any = client.zrevrange(index, start, start + PAGE - 1, withscores=True)
        page = [(_s(member), float(score)) for member, score in raw_page]
        if not page:
            return
        pipe = client.pipeline(transaction=False)
        for iid, _score in page:
            pipe.exists(keys.ti(shard, iid))
        alive = pipe.execute()
        gone = [iid for (iid, _score), there in zip(page, alive, strict=True) if not there]
        if gone:
            client.zrem(index, *gone)
        start += len(page) - len(gone)  # the ranks after the dropped ids moved up
        yield from (pair for pair, there in zip(page, alive, strict=True) if there)


def _run_tasks(broker: Core, shard: int, index: str) -> Iterator[tuple[str, float]]:
    """(instance id, created ms) of the tasks of the runs in ``index`` (``runidx``
    or ``truns:<tenant>``), newest run first; a run gone with its retention has
    none (run ends drop its entry)."""
    client, keys = broker.client, broker.keys
    start = 0
    while True:
        raw_page: Any = client.zrevrange(index, start, start + PAGE - 1, withscores=True)
        page = [(_s(member), float(score)) for member, score in raw_page]
        if not page:
            return
        start += len(page)
        pipe = client.pipeline(transaction=False)
        for rid, _score in page:
            pipe.hget(keys.run(shard, rid), "tasks")
        for (rid, score), tasks in zip(page, pipe.execute(), strict=True):
            for task in _s(tasks or b"").split(","):
                if task:
                    yield f"{rid}/{task}", score
