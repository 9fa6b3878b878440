"""The dead-letter queue: list (``dlq_prune.lua`` drops entries whose instance
is gone), replay (``dlq_replay.lua``: the same operation as a retry, DESIGN.md
§4) and discard (``dlq_discard.lua``).

Each tenant's DLQ is a stream ``keys.dlq(shard, tenant)`` of self-contained
entries (the instance's last error and log tail).  :meth:`DlqStore.page` lists
them a page at a time across tenants without reading every tenant: each shard's
``dlqidx`` holds the tenants whose stream may have entries (``lib/dead.lua``
adds, ``dlq_unindex.lua`` drops one found empty), read in name order.
"""

from __future__ import annotations

import builtins
import heapq
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from redcron.engine import argv
from redcron.engine.core import MAX_BATCH, Core, fields_of, shard_of_id
from redcron.engine.indexes import ensure_indexes
from redcron.engine.partial import note_unavailable, shards_to_read
from redcron.errors import NotFound
from redcron.keys import shard_of
from redcron.model import DlqEntry
from redcron.serde import text as _s

log = logging.getLogger(__name__)

#: ``list`` is a DlqStore method: annotations in the class use these aliases
Entries = list[DlqEntry]
ArgvBuilder = Callable[[Sequence[str], int | None, str | None], list[Any]]
#: what :meth:`DlqStore.act` does
DlqVerb = Literal["replay", "discard"]
_SCRIPTS: dict[str, tuple[str, ArgvBuilder]] = {
    "replay": ("dlq_replay", argv.dlq_replay),
    "discard": ("dlq_discard", argv.dlq_discard),
}

#: a DLQ stream entry id (``<ms>-<seq>``): what a page cursor may carry
DLQ_ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
#: tenants whose streams one round trip reads while a page fills
PAGE_BATCH = 8
#: entries a task-name filter reads per request at most (a page may come back
#: short, with a cursor, rather than read on without bound)
NAME_SCAN = 1_000


@dataclass(frozen=True, slots=True)
class DlqPage:
    """One page of dead tasks in (tenant, entry id) order, and the cursor of the
    next page: (tenant, entry id) of the last entry read (None: the last page)."""

    entries: list[DlqEntry]
    next_cursor: tuple[str, str] | None


#: one read entry: (tenant, entry id, raw fields)
_Read = tuple[str, str, Any]
_Reads = list[_Read]


class DlqStore:
    """List, replay and discard dead-lettered instances."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def list(self, tenant: str | None = None, count: int = 100) -> Entries:
        """Dead tasks, oldest first: up to ``count`` per tenant (of ``tenant``).
        Two pipelined round trips per shard (a tenant's: its shard only)."""
        client, keys = self.core.client, self.core.keys
        out: Entries = []
        shards = [shard_of(tenant, self.core.shards)] if tenant else range(self.core.shards)
        for shard in shards:
            tenants = (
                [tenant] if tenant else [_s(t) for t in client.zrange(keys.tenants(shard), 0, -1)]
            )
            if not tenants:
                continue
            pipe = client.pipeline(transaction=False)
            for t in tenants:
                pipe.xrange(keys.dlq(shard, t), count=count)
            streams: list[tuple[str, Any]] = list(zip(tenants, pipe.execute(), strict=True))
            gone = self._gone(shard, streams)
            for t, entries in streams:
                for eid, fields in entries:
                    if _s(eid) not in gone:
                        out.append(DlqEntry.from_fields(_s(eid), t, shard, fields_of(fields)))
        return out

    def page(
        self,
        tenant: str | None,
        after: tuple[str, str] | None,
        limit: int,
        name: str | None = None,
    ) -> DlqPage:
        """Dead tasks in (tenant, entry id) order: ``limit`` after ``after`` (the
        (tenant, entry id) of the last one shown; an empty entry id: past the
        whole tenant), of ``tenant`` only when given, named ``name`` only when
        given (among at most :data:`NAME_SCAN` entries read: the page may be short).

        Reads per shard one ``dlqidx`` range of ``limit`` + 1 tenants and their
        streams, :data:`PAGE_BATCH` a round trip, until ``limit`` + 1 entries are
        in: the work grows with the page, never with the tenants or entries."""
        ensure_indexes(self.core)
        want = (NAME_SCAN if name else limit) + 1
        shards = [shard_of(tenant, self.core.shards)] if tenant else range(self.core.shards)
        reads: list[_Reads] = []
        #: past this tenant some shard was not read (stale index entries filled its range)
        horizon: str | None = None
        for shard in shards if tenant else shards_to_read(self.core, shards):
            try:
                got, cut = self._read_shard(shard, tenant, after, want)
            except Exception as exc:
                # every tenant's: a shard whose master is down is left out, named
                # (partial_reads); a tenant's own shard down is the caller's error
                if tenant is None and note_unavailable(self.core, shard, exc):
                    continue
                raise
            reads.append(got)
            if cut is not None and (horizon is None or cut < horizon):
                horizon = cut
        # a tenant lives on one shard: entries compare by tenant across shards
        merged = [r for r in heapq.merge(*reads, key=lambda r: r[0])]
        if horizon is not None:
            merged = [r for r in merged if r[0] <= horizon]
        more = len(merged) >= want or horizon is not None
        merged = merged[: want - 1] if len(merged) >= want else merged
        chosen = [r for r in merged if name is None or _s(r[2].get(b"name", b"")) == name]
        if len(chosen) > limit:
            chosen, more = chosen[:limit], True
            merged = merged[: merged.index(chosen[-1]) + 1]
        cursor: tuple[str, str] | None = None
        if more:
            cursor = (merged[-1][0], merged[-1][1]) if merged else (horizon or "", "")
        return DlqPage(self._alive(chosen), cursor)

    def _read_shard(
        self, shard: int, tenant: str | None, after: tuple[str, str] | None, want: int
    ) -> tuple[_Reads, str | None]:
        """Up to ``want`` entries of one shard past ``after``, and the last tenant
        read when the shard may hold more past it that were not (else None)."""
        client, keys = self.core.client, self.core.keys
        if tenant is not None:
            past = after is not None and (after[0] > tenant or after == (tenant, ""))
            tenants = [] if past else [tenant]
        else:
            low = "-" if after is None else (f"[{after[0]}" if after[1] else f"({after[0]}")
            tenants = [_s(t) for t in client.zrangebylex(keys.dlqidx(shard), low, "+", 0, want)]
        got: _Reads = []
        empty: list[str] = []
        done = 0
        while len(got) < want and done < len(tenants):
            batch = tenants[done : done + PAGE_BATCH]
            done += len(batch)
            pipe = client.pipeline(transaction=False)
            for t in batch:
                start = f"({after[1]}" if after is not None and t == after[0] else "-"
                pipe.xrange(keys.dlq(shard, t), start, "+", count=want - len(got))
            for t, entries in zip(batch, pipe.execute(), strict=True):
                if not entries and (after is None or t != after[0]):
                    empty.append(t)
                got += [(t, _s(eid), fields) for eid, fields in entries]
        if empty and tenant is None:
            self.core._run("dlq_unindex", shard, empty)
        got = got[:want]
        # fewer than wanted, and the index range was full: more tenants may follow
        cut = tenants[done - 1] if len(got) < want and len(tenants) >= want and done else None
        return got, cut

    def _alive(self, reads: Sequence[_Read]) -> Entries:
        """``reads`` as entries, less those whose instance is gone (pruned)."""
        by_shard: dict[int, list[tuple[str, Any]]] = {}
        for t, eid, fields in reads:
            by_shard.setdefault(shard_of(t, self.core.shards), []).append((t, [(eid, fields)]))
        gone: set[str] = set()
        for shard, streams in by_shard.items():
            gone |= self._gone(shard, streams)
        return [
            DlqEntry.from_fields(eid, t, shard_of(t, self.core.shards), fields_of(fields))
            for t, eid, fields in reads
            if eid not in gone
        ]

    def replay(self, iids: Sequence[str], now: int | None = None) -> int:
        """Make dead instances ready again; how many were (the others are left alone)."""
        return sum(map(len, self.act("replay", iids, now=now).values()))

    def discard(self, iids: Sequence[str], now: int | None = None) -> int:
        """Take dead instances out of the DLQ for good (they end ``cancelled``, error
        "discarded from the DLQ"); how many were (the others are left alone)."""
        return sum(map(len, self.act("discard", iids, now=now).values()))

    def act(
        self,
        what: DlqVerb,
        iids: Sequence[str],
        tenant: str | None = None,
        now: int | None = None,
    ) -> dict[str, builtins.list[str]]:
        """:meth:`replay` or :meth:`discard` ``iids``, of ``tenant`` only when given
        (another tenant's are left alone, checked inside the script: a caller
        scoped to one tenant reads nothing per id first); the ids acted on, by
        their tenant.  Shard by shard, :data:`MAX_BATCH` ids a call."""
        script, build = _SCRIPTS[what]
        by_shard: dict[int, list[str]] = {}
        for iid in iids:
            try:
                shard = shard_of_id(iid)
            except NotFound:
                continue  # no task id at all: left alone, as an unknown one is
            if shard < self.core.shards:
                by_shard.setdefault(shard, []).append(iid)
        out: dict[str, builtins.list[str]] = {}
        for shard, ids in by_shard.items():
            for i in range(0, len(ids), MAX_BATCH):
                chunk = ids[i : i + MAX_BATCH]
                got = self.core._run(script, shard, build(chunk, now, tenant))
                for iid, owner in zip(chunk, got, strict=True):
                    if isinstance(owner, bytes | str):  # 0: left alone
                        out.setdefault(_s(owner), []).append(iid)
        return out

    def _gone(self, shard: int, streams: Sequence[tuple[str, Any]]) -> set[str]:
        """Drop (``dlq_prune.lua``) the DLQ entries whose instance is gone: replay and
        discard could never act on them.  One EXISTS pipeline for every tenant's
        entries; returns the dropped entry ids."""
        listed = [(t, _s(eid), fields) for t, entries in streams for eid, fields in entries]
        if not listed:
            return set()
        pipe = self.core.client.pipeline(transaction=False)
        for _t, _eid, fields in listed:
            pipe.exists(self.core.keys.ti(shard, _s(fields.get(b"i", b""))))
        suspects: dict[str, list[str]] = {}
        for (t, eid, _f), alive in zip(listed, pipe.execute(), strict=True):
            if not alive:
                suspects.setdefault(t, []).append(eid)
        dropped_ids: set[str] = set()
        for t, eids in suspects.items():
            for eid, iid in self.core._run("dlq_prune", shard, [t, *eids]):
                log.warning(
                    "dropped DLQ entry %s of tenant %s: its task %s no longer exists (expired "
                    "or deleted), so it could not be replayed or discarded",
                    _s(eid),
                    t,
                    _s(iid),
                )
                dropped_ids.add(_s(eid))
        return dropped_ids
