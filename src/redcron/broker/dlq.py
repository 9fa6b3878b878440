"""The dead-letter queue: list (``dlq_prune.lua`` drops entries whose instance
is gone), replay (``dlq_replay.lua``: the same operation as a retry, DESIGN.md
§4) and discard (``dlq_discard.lua``).

Each tenant's DLQ is a stream ``keys.dlq(shard, tenant)`` of self-contained
entries (the instance's last error and log tail).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from redcron.broker import argv
from redcron.broker.core import MAX_BATCH, Core, fields_of, shard_of_id
from redcron.keys import shard_of
from redcron.model import DlqEntry
from redcron.serde import text as _s

log = logging.getLogger(__name__)

#: ``list`` is a DlqStore method: annotations in the class use these aliases
Entries = list[DlqEntry]
ArgvBuilder = Callable[[Sequence[str], int | None], list[Any]]


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
                [tenant] if tenant else sorted(_s(t) for t in client.smembers(keys.tenants(shard)))
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

    def replay(self, iids: Sequence[str], now: int | None = None) -> int:
        """Make dead instances ready again; how many were (the others are left alone)."""
        return self._each("dlq_replay", argv.dlq_replay, iids, now)

    def discard(self, iids: Sequence[str], now: int | None = None) -> int:
        """Take dead instances out of the DLQ for good (they end ``cancelled``, error
        "discarded from the DLQ"); how many were (the others are left alone)."""
        return self._each("dlq_discard", argv.dlq_discard, iids, now)

    def _each(
        self,
        script: str,
        build: ArgvBuilder,
        iids: Sequence[str],
        now: int | None,
    ) -> int:
        """Run a per-instance DLQ script shard by shard, in chunks: the count of 1s."""
        by_shard: dict[int, list[str]] = {}
        for iid in iids:
            by_shard.setdefault(shard_of_id(iid), []).append(iid)
        total = 0
        for shard, ids in by_shard.items():
            for i in range(0, len(ids), MAX_BATCH):
                chunk = ids[i : i + MAX_BATCH]
                total += sum(int(x) for x in self.core._run(script, shard, build(chunk, now)))
        return total

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
