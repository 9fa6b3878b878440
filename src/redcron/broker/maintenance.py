"""Maintenance: ``promote.lua`` (due timers back to ready), ``reap.lua`` (expired
leases retried or dead-lettered), the per-shard lock that lets one caller at a
time run them, and the pruning of the ``recent`` index.

Workers and beats alike call :meth:`Maintenance.maintain` (DESIGN.md §2), so a
deployment of workers alone keeps every guarantee of one-off tasks.
"""

from __future__ import annotations

import logging
import time
from typing import Any, NamedTuple

from redcron.broker import argv
from redcron.broker.core import MAX_MAINTENANCE, Core
from redcron.keys import MAINT_RECENT_CURSOR
from redcron.serde import text as _s

log = logging.getLogger(__name__)

#: ``recent`` ids a maintenance pass checks for expired hashes
PRUNE_BATCH = 500
#: a shard's ``recent`` index is pruned by this process at most this often (s):
#: a prune is a ZRANGE and PRUNE_BATCH EXISTS, a third of a busy worker's keeper
#: when it ran every maintenance pass (0.2 s), and hashes expire after days,
#: not seconds (100 ids a second walked still keeps up with 8M tasks a day)
PRUNE_EVERY_S = 5.0


# NamedTuples (not dataclasses) so callers that unpacked the bare tuples
# these returned keep working; new code reads the names.


class Reaped(NamedTuple):
    """What one reap.lua call did."""

    reaped: int
    #: when a stream next needs a look (ms), -1: none has pending entries
    next_ms: int
    #: streams still due: the call's bound cut the pass short
    due: int
    #: entries left pending because their instance hash is missing (strays:
    #: a half-finished slot migration, lib/take.lua)
    strays: int = 0


class Promoted(NamedTuple):
    """What one promote.lua call did."""

    promoted: int
    #: the next timer's due time (ms), -1: none left
    next_ms: int


class Maintained(NamedTuple):
    """What one maintenance pass of a shard did, in total."""

    promoted: int
    reaped: int


class Maintenance:
    """Promote, reap and prune, shard by shard."""

    def __init__(self, core: Core) -> None:
        self.core = core
        #: when this process last pruned each shard's ``recent`` index (monotonic)
        self._pruned: dict[int, float] = {}

    def reap(
        self,
        shard: int,
        limit: int = MAX_MAINTENANCE,
        now: int | None = None,
        jitter: float | None = None,
    ) -> Reaped:
        """End expired leases (retry or DLQ) with XAUTOCLAIM over the streams that
        have pending entries."""
        core = self.core
        n, nxt, due, strays = core._run(
            "reap",
            shard,
            argv.reap(min(limit, MAX_MAINTENANCE), core.min_idle_ms, now, jitter),
        )
        return Reaped(int(n), int(nxt), int(due), int(strays))

    def promote(self, shard: int, limit: int = MAX_MAINTENANCE, now: int | None = None) -> Promoted:
        n, nxt = self.core._run("promote", shard, argv.promote(min(limit, MAX_MAINTENANCE), now))
        return Promoted(int(n), int(nxt))

    def try_lock(self, shard: int, owner: str, interval_s: float) -> bool:
        """At most one promote/reap caller per shard per interval (short SET NX PX lock)."""
        return bool(
            self.core.client.set(
                self.core.keys.lock(shard, "maintenance"),
                owner,
                nx=True,
                px=max(1, int(interval_s * 1000)),
            )
        )

    def maintain(self, shard: int, now: int | None = None) -> Maintained:
        """Promote due timers and reap expired leases until none are left (bounded);
        prune the ``recent`` index every :data:`PRUNE_EVERY_S` at most."""
        promoted = reaped = 0
        for _ in range(20):
            p = self.promote(shard, now=now)
            promoted += p.promoted
            if p.promoted < MAX_MAINTENANCE:
                break
        for _ in range(20):
            r = self.reap(shard, now=now)
            reaped += r.reaped
            if r.reaped < MAX_MAINTENANCE and not r.due:
                break
        if reaped:
            log.info("shard %d: reaped %d expired leases (retried or dead-lettered)", shard, reaped)
        at = time.monotonic()
        if at >= self._pruned.get(shard, -PRUNE_EVERY_S) + PRUNE_EVERY_S:
            self._pruned[shard] = at
            self.prune_recent(shard)
        return Maintained(promoted, reaped)

    def prune_recent(self, shard: int, batch: int = PRUNE_BATCH) -> int:
        """Drop ids whose instance hash expired from ``batch`` entries of the
        shard's ``recent`` index, walking it a window per call (cursor in the
        ``maintenance`` field ``recent_cursor``) so it holds about the retained
        instances rather than its cap of newest ids; how many were dropped.  Ids
        are never reused, so an id found without its hash is gone for good."""
        client, keys = self.core.client, self.core.keys
        start = int(client.hget(keys.maintenance(shard), MAINT_RECENT_CURSOR) or 0)
        ids: Any = client.zrange(keys.recent(shard), start, start + batch - 1)
        if not ids:
            client.hset(keys.maintenance(shard), MAINT_RECENT_CURSOR, 0)
            return 0
        pipe = client.pipeline(transaction=False)
        for iid in ids:
            pipe.exists(keys.ti(shard, _s(iid)))
        gone = [iid for iid, alive in zip(ids, pipe.execute(), strict=True) if not alive]
        if gone:
            client.zrem(keys.recent(shard), *gone)
        following = start + len(ids) - len(gone) if len(ids) == batch else 0
        client.hset(keys.maintenance(shard), MAINT_RECENT_CURSOR, following)
        return len(gone)
