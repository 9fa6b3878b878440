"""Maintenance: ``promote``, ``reap`` and the follow-ups, the per-shard lock
around them, and the pruning of the ``recent`` index.  ``promote.lua`` moves
due timers back to ready, ``reap.lua`` retries or dead-letters expired leases,
and the follow-ups (``follow_ends.lua``, ``follow_runs.lua``,
``follow_chain.lua``) are what reacts to the ends the scripts wrote beside them
(docs/architecture.md "Follow-ups beside the hot path"); the lock lets one
caller at a time run them on a shard.

Workers and beats alike call :meth:`Maintenance.maintain` (DESIGN.md §2), so a
deployment of workers alone keeps every guarantee of one-off tasks.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, NamedTuple

from redcron import serde
from redcron.engine import argv
from redcron.engine.core import MAX_MAINTENANCE, Core
from redcron.keys import MAINT_RECENT_CURSOR, run_of_task
from redcron.model import edges
from redcron.model.jobs import MAP_MAX, MAP_PARAMS
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
    #: follow-up entries applied
    followed: int = 0


#: the script that applies each kind of follow-up entry (lua/lib/followup.lua)
FOLLOW_SCRIPTS = {
    "ends": "follow_ends",
    "runs": "follow_runs",
    "chain": "follow_chain",
    "cancel": "follow_cancel",
    "map": "map",  # read here, applied page by page: Maintenance.expand_map
}
#: follow-up entries read per round, and rows applied per script call at most
#: (an entry holds the rows of one ending call: up to a batch of 256)
FOLLOW_READ = 200
#: seconds a pass of follow-ups may begin reads for: a backlog (the midnight
#: burst's 100,000 ends) is drained over several passes, so the beat or worker
#: applying it still renews its shard leases and heartbeats in time (a single
#: pass over 20 reads of batched ends took the beat past its 10 s shard lease)
FOLLOW_BUDGET_S = 1.0
FOLLOW_ROWS = MAX_MAINTENANCE
#: instances of a mapped task made per map_expand.lua call (issue 32 §2)
MAP_PAGE = 500


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

    def try_lock(
        self, shard: int, owner: str, interval_s: float, name: str = "maintenance"
    ) -> bool:
        """At most one caller per shard per interval (short SET NX PX lock): of
        promote/reap (``maintenance``), or of the follow-ups (``followups``)."""
        return bool(
            self.core.client.set(
                self.core.keys.lock(shard, name),
                owner,
                nx=True,
                px=max(1, int(interval_s * 1000)),
            )
        )

    def maintain(self, shard: int, now: int | None = None, follow: bool = True) -> Maintained:
        """Promote due timers and reap expired leases until none are left (bounded);
        apply the follow-ups (unless ``follow`` is off: the caller does that under
        a lock of its own, :meth:`follow_all`); prune the ``recent`` index every
        :data:`PRUNE_EVERY_S` at most."""
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
        followed = self.follow_all(shard) if follow else 0
        at = time.monotonic()
        if at >= self._pruned.get(shard, -PRUNE_EVERY_S) + PRUNE_EVERY_S:
            self._pruned[shard] = at
            self.prune_recent(shard)
        return Maintained(promoted, reaped, followed)

    def follow_all(self, shard: int, rounds: int = 20, budget_s: float = FOLLOW_BUDGET_S) -> int:
        """Apply the shard's follow-ups, up to ``rounds`` reads of
        :data:`FOLLOW_READ` entries and no read begun after ``budget_s``
        seconds; the number applied."""
        followed = 0
        deadline = time.monotonic() + budget_s
        for _ in range(rounds):
            applied, left = self.follow_up(shard)
            followed += applied
            if not left or time.monotonic() >= deadline:
                break
        return followed

    def follow_up(self, shard: int, read: int = FOLLOW_READ) -> tuple[int, bool]:
        """Apply the oldest ``read`` follow-up entries of ``shard`` (each by the
        script of its kind, in stream order, at most :data:`FOLLOW_ROWS` rows a
        call); returns (entries applied, whether entries may be left).  Each
        script deletes what it applies in the same call, so an entry applied
        by a caller that died right after is never applied twice, and one read
        by two callers at once is applied by one of them."""
        core = self.core
        entries: Any = core.client.xrange(core.keys.followups(shard), count=read)
        calls: list[tuple[str, list[str]]] = []
        rows = 0
        for eid, fields in entries:
            kind = _s(fields.get(b"kind", fields.get("kind", "")))
            script = FOLLOW_SCRIPTS.get(kind)
            if script is None:
                continue  # not ours (an older or newer version's): left alone
            n = sum(len(json.loads(v)) for k, v in fields.items() if _s(k) not in ("kind", "at"))
            if not calls or calls[-1][0] != script or rows + n > FOLLOW_ROWS:
                calls.append((script, []))
                rows = 0
            calls[-1][1].append(_s(eid))
            rows += n
        applied, more = 0, len(entries) == read
        metrics = core.settings.metrics
        for script, ids in calls:
            if script == "map":
                applied += sum(self.expand_map(shard, eid) for eid in ids)
                continue
            args = argv.follow_ends(metrics, ids) if script == "follow_ends" else ids
            n = int(core._run(script, shard, args))
            applied += n
            # the end of a run may add a follow-up of its own (kind chain)
            more = more or (script in ("follow_runs", "follow_cancel") and n > 0)
        return applied, more

    def expand_map(self, shard: int, eid: str, now: int | None = None) -> int:
        """Apply the follow-up ``eid`` of kind map (issue 32 §2): make the
        instances of each mapped task it names, from the list its upstream's
        result (or its run's param) holds, :data:`MAP_PAGE` a call
        (``map_expand.lua``, each page fenced by the task's ``map_made``, so a
        caller that died midway, or two at once, make each instance once);
        then delete the entry.  Returns 1 when applied, 0 when it was gone."""
        core = self.core
        client, keys = core.client, core.keys
        stream = keys.followups(shard)
        entry: Any = client.xrange(stream, eid, eid)
        if not entry:
            return 0
        fields = {_s(k): v for k, v in entry[0][1].items()}
        for (iid,) in json.loads(fields.get("map") or "[]"):
            self._expand(shard, iid, now)
        client.xdel(stream, eid)
        return 1

    def _expand(self, shard: int, iid: str, now: int | None) -> None:
        core = self.core
        client, keys = core.client, core.keys
        state, made, over, limit = client.hmget(
            keys.ti(shard, iid), "state", "map_made", "map_over", "map_max"
        )
        run_task = run_of_task(iid)
        if _s(state or "") != "mapping" or not over or run_task is None:
            return  # ended meanwhile (cancelled...), or made already
        run_id, over = run_task[0], _s(over)
        if over.startswith(MAP_PARAMS):
            raw = client.hget(keys.run(shard, run_id), "params")
            params = json.loads(raw) if raw else {}
            name = over[len(MAP_PARAMS) :]
            value = params.get(name) if isinstance(params, dict) else None
            got: list[Any] | str = (
                f"the run has no param {name!r} to map over"
                if value is None
                else edges.map_items(value, over, int(limit or MAP_MAX))
            )
        else:
            result: Any = client.hget(keys.ti(shard, f"{run_id}/{over}"), "result")
            got = (
                f"the result of {over!r} is gone"
                if result is None
                else edges.map_items(serde.loads(result), over, int(limit or MAP_MAX))
            )
        if isinstance(got, str):
            core._run("map_expand", shard, argv.map_expand(iid, 0, -1, [got.encode()], now))
            return
        items = [serde.dumps(x) for x in got]
        start = int(made or 0)
        while True:
            page = items[start : start + MAP_PAGE]
            start = int(
                core._run("map_expand", shard, argv.map_expand(iid, start, len(items), page, now))
            )
            if start < 0 or start >= len(items):
                return

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
