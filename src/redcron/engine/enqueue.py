"""Admission and enqueue: ``enqueue_check.lua`` admits a batch before its first
write, then ``enqueue.lua`` writes it.

A batch of :class:`~redcron.engine.argv.EnqueueRow` is written whole or not at
all; how a batch bigger than one call is admitted before its first write is
:meth:`Enqueuer.enqueue`'s docstring.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from redcron.clock import ulid
from redcron.engine import argv
from redcron.engine.argv import EnqueueRow
from redcron.engine.core import MAX_BATCH, Core, shard_of_id
from redcron.errors import Conflict, NotReplicated, RedcronError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What one submission did: instances ``created``, and the rows that folded
    into an existing task (a unique key's duplicate, a debounce call: issue 21
    §4) as row id -> that task's id (such a row created nothing)."""

    created: int
    folded: dict[str, str] = field(default_factory=dict)


def _outcome(reply: Any, chunk: Sequence[EnqueueRow], into: dict[str, str]) -> int:
    """One enqueue.lua reply: a count, or {created, index, id, ...} (see its header)."""
    if not isinstance(reply, list):
        return int(reply)
    for i in range(1, len(reply) - 1, 2):
        existing = reply[i + 1]
        into[chunk[int(reply[i])].iid] = (
            existing.decode() if isinstance(existing, bytes) else str(existing)
        )
    return int(reply[0])


class Enqueuer:
    """Create task instances (one-off tasks; a run's instances come from fire.lua)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def enqueue(self, rows: Sequence[EnqueueRow], now: int | None = None) -> int:
        """Create instances (see :meth:`_enqueue`); the number created."""
        return self.submit(rows, now).created

    def submit(self, rows: Sequence[EnqueueRow], now: int | None = None) -> Enqueued:
        """Create instances (see :meth:`_enqueue`); what was created and what
        folded into existing tasks.  Under ``durability="strict"``
        a :class:`NotReplicated` names the task ids it concerns: they are queued
        on the master, and enqueueing them again would run the work twice."""
        shards = {shard_of_id(row.iid) for row in rows}
        try:
            # a shard whose master is down fails at once, naming it (Core.gated)
            return self.core.gated(shards, "enqueue", lambda: self._enqueue(rows, now))
        except NotReplicated as exc:
            ids = [row.iid for row in rows]
            if len(exc.results or []) == 1 and len({shard_of_id(i) for i in ids}) == 1:
                # one enqueue.lua call (run_replicated): its reply names the rows
                # that folded into an existing task, whose id is the one to look up
                folded: dict[str, str] = {}
                _outcome((exc.results or [0])[0], rows, folded)
                ids = [folded.get(i, i) for i in ids]
            shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            raised = NotReplicated(f"{exc} (tasks {shown}: look them up, do not enqueue again)")
            raised.task_ids = ids
            raised.results = exc.results
            raise raised from exc

    def _enqueue(self, rows: Sequence[EnqueueRow], now: int | None = None) -> Enqueued:
        """Create instances, one per row (a row with a unique key or a debounce
        may fold into an existing task instead: ``Enqueued.folded``).

        All or nothing: a batch refused for a tenant's ``max_queued``
        (:class:`QuotaExceeded`), a command or container row of a tenant
        without the grant ``allow_commands`` (:class:`Forbidden`) or an id that
        exists or comes twice (:class:`Conflict`) writes nothing.  Up to ``MAX_BATCH`` rows on one
        shard are one (atomic) enqueue.lua call.  A bigger batch is admitted
        whole before its first write, in one round trip of bounded
        enqueue_check.lua calls: every id, then each shard's admission for the
        whole batch, which reserves its room under ``max_queued`` (counted by
        every other submission and fire, so nothing can take that room before
        the batch is written, and the batch cannot be refused half-way).  The
        first refusing call sets the batch's refusal marker, so the calls
        after it refuse too; reservations already made on other shards are
        released.  The bounded enqueue.lua calls that follow write the batch,
        using up the reservation: in the same pipeline (one round trip) on
        one shard, in a second one when the batch spans shards.  No call is
        bigger than ``MAX_BATCH`` and there is no multi-call transaction, so
        Redis is never blocked for a whole batch.

        Rows are checked for shape by their own call: the App validates every
        row before sending, so a malformed row (REJECTED) only comes from a
        caller that bypasses it, and the calls before it stay written.  If the
        client dies between admission and the last write, the part written
        stays and the rest's reservation expires after 60 s.  All of this
        holds on Redis Cluster too: every call touches one shard's slot.
        """
        core = self.core
        by_shard: dict[int, list[EnqueueRow]] = {}
        for row in rows:
            by_shard.setdefault(shard_of_id(row.iid), []).append(row)
        folded: dict[str, str] = {}
        if len(by_shard) == 1 and len(rows) <= MAX_BATCH:
            shard, chunk = next(iter(by_shard.items()))
            reply = core._run("enqueue", shard, argv.enqueue(chunk, now))
            return Enqueued(_outcome(reply, chunk, folded), folded)
        seen: set[str] = set()
        ready: dict[int, dict[str, int]] = {}  # shard -> tenant -> rows ready at once
        for shard, shard_rows in by_shard.items():
            counts = ready[shard] = {}
            for row in shard_rows:
                if row.iid in seen:
                    raise Conflict(f"task id {row.iid} comes twice in the batch; nothing written")
                seen.add(row.iid)
                if not _delayed(row.delay_ms):
                    counts[row.tenant] = counts.get(row.tenant, 0) + 1
        token = ulid()
        # the batch key, a short-lived marker as the locks are (lock:batch:<token>):
        # it names the batch's reservations and, once a call refused, the refusal
        batch = {shard: core.keys.lock(shard, f"batch:{token}") for shard in by_shard}
        tenants = {
            shard: {row.tenant for row in shard_rows} for shard, shard_rows in by_shard.items()
        }
        # checked with the admission, so a tenant without the grant is refused
        # before the first write, not half-way (enqueue.lua checks each call too)
        needing = {
            shard: {row.tenant for row in shard_rows if row.kind != "python"}
            for shard, shard_rows in by_shard.items()
        }
        # 1. admit the whole batch (checks, then reservations): nothing written yet
        pipe = core.client.pipeline(transaction=False)
        for shard, shard_rows in by_shard.items():
            for i in range(0, len(shard_rows), MAX_BATCH):
                final = i + MAX_BATCH >= len(shard_rows)
                ids = [row.iid for row in shard_rows[i : i + MAX_BATCH]]
                args = argv.enqueue_check(
                    ready[shard] if final else None, ids, needing[shard] if final else ()
                )
                core._run("enqueue_check", shard, args, pipe, batch[shard])
        if len(by_shard) > 1:
            # a call sees only its own shard's refusal marker (one slot per call):
            # the writes wait for every shard's admission, a round trip later
            for marker in batch.values():  # one DEL each: the markers lie in different slots
                pipe.delete(marker)
            try:
                core._execute(pipe, ordered=True)
            except RedcronError:
                self._release(batch, tenants)
                raise
            pipe = core.client.pipeline(transaction=False)
        # 2. write it (on one shard in the same round trip: a refused admission
        # has set the marker, and every write call then refuses)
        start = len(pipe.command_stack)
        chunks: list[Sequence[EnqueueRow]] = []
        for shard, shard_rows in by_shard.items():
            for i in range(0, len(shard_rows), MAX_BATCH):
                chunk = shard_rows[i : i + MAX_BATCH]
                chunks.append(chunk)
                core._run("enqueue", shard, argv.enqueue(chunk, now), pipe, batch[shard])
        end = len(pipe.command_stack)
        for marker in batch.values():
            pipe.delete(marker)
        try:
            results = core._execute(pipe, ordered=True)
        except RedcronError:
            self._release(batch, tenants)
            raise
        created = sum(
            _outcome(reply, chunk, folded)
            for reply, chunk in zip(results[start:end], chunks, strict=True)
        )
        if folded:
            # admission reserved room for every ready row, and a folded row used
            # none: what is left would count against max_queued until it expired
            self._release(batch, tenants)
        return Enqueued(created, folded)

    def _release(self, batch: dict[int, str], tenants: dict[int, set[str]]) -> None:
        """Drop a batch's reservations and refusal markers (it was refused).

        Best effort: what is left (the connection is gone) expires in 60 s.
        """
        pipe = self.core.client.pipeline(transaction=False)
        for shard, key in batch.items():
            for tenant in tenants[shard]:
                pipe.hdel(self.core.keys.reserved(shard, tenant), key, f"{key}:exp")
            pipe.delete(key)
        try:
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("could not release a refused batch's reservations: %s", exc)


def _delayed(delay_ms: Any) -> bool:
    """Is a row a countdown task (not counted against max_queued until due)?"""
    try:
        return float(delay_ms) > 0
    except (TypeError, ValueError):
        return False  # malformed: enqueue.lua refuses the row
