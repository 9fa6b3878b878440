"""The beat's Redis side: the live-beats registry, shard ownership
(``beat_own.lua``), due schedule rows, job heads and specs, parking
(``job_park.lua``), fires (``fire.lua``, ``fire_batch.lua``, pipelined) and
run deadlines (``deadline_sweep.lua``).

The beat (``beat/``) decides what to own and what to fire; every round
trip it makes goes through :class:`BeatStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis

from redcron.engine import argv
from redcron.engine.argv import FireArgs
from redcron.engine.connection import is_cluster, raise_unreachable
from redcron.engine.core import Core, time_ms
from redcron.serde import text as _s

#: fires per fire_batch.lua call: amortizes the per-call cost while keeping one
#: script call short (~50 runs created, a few ms of Redis time)
FIRES_PER_CALL = 50
#: fires per pipeline round trip
PIPELINE_FIRES = 1_000
#: due deadlines one deadline_sweep.lua call looks at (a short call, as promote's)
SWEEP_LIMIT = 500


class DueRow(NamedTuple):
    """A schedule row: a job and when the beat is to fire it (ms, nominal + jitter;
    -1 for a job read ahead of being due)."""

    job_id: str
    due_ms: int


@dataclass(frozen=True, slots=True)
class ShardClaim:
    """The answer for one shard to acquire/renew/release: owned or not, and the
    fencing epoch its fires must present."""

    shard: int
    owned: bool
    epoch: str


#: a parked job's reason is cut to this many characters (an exception text can be long)
REASON_MAX = 500


@dataclass(frozen=True, slots=True)
class JobHead:
    """The fields of a job hash the beat reads before firing it.

    ``version`` is None when the job hash is gone (deleted since it was scheduled).
    ``malformed`` says why a hash that exists cannot be planned (a field edited by
    hand into garbage); None when it can.
    """

    version: str | None
    next_fire: int | None
    paused: bool
    tenant: str
    malformed: str | None = None


def _head(version: Any, nf: Any, paused: Any, tenant: Any) -> JobHead:
    """A job head from its raw HMGET reply, never raising on what is stored."""
    text = None if nf is None else _s(nf)
    try:
        next_fire = int(text) if text else None
    except ValueError:
        shown = text if text is not None and len(text) <= 40 else f"{(text or '')[:40]}..."
        return JobHead(
            "" if version is None else _s(version), None, False, _s(tenant or b""),
            f"next_fire {shown!r} in the job hash is not a time in ms",
        )  # fmt: skip
    if version is None and tenant is not None:
        return JobHead("", next_fire, False, _s(tenant), "the job hash has no version")
    return JobHead(
        None if version is None else _s(version),
        next_fire,
        _s(paused or b"") == "1",
        _s(tenant or b""),
    )


@dataclass(frozen=True, slots=True)
class Park:
    """One job the beat cannot plan or fire: park it if still at (version, score)."""

    job_id: str
    version: str
    score: int
    reason: str
    tenant: str = ""  # for the log line only


class Fired(NamedTuple):
    """fire.lua's answer for one fire (a NamedTuple: callers unpack it)."""

    #: created | buffered | skipped | paused | malformed ... (lua/fire.lua's header)
    status: str
    #: the run's id ("" when none; for ``malformed``, the reason)
    run_id: str


@dataclass(frozen=True, slots=True)
class LateRun:
    """A run deadline_sweep.lua marked late: not ended by its deadline."""

    run_id: str
    tenant: str
    job_name: str
    #: the nominal fire time (ms) its deadline counts from
    scheduled_for_ms: int
    #: when it was to end by (ms): ``scheduled_for_ms`` + the job's deadline
    deadline_ms: int


class Swept(NamedTuple):
    """One deadline_sweep.lua call: due deadlines taken off the index, and the
    runs of those that it marked late."""

    looked: int
    late: list[LateRun]


class BeatStore:
    """Every Redis operation of a beat.

    ``broker`` is the :class:`~redcron.engine.core.Core` (in practice the
    :class:`~redcron.engine.Broker`) it runs scripts through.
    """

    def __init__(self, broker: Core) -> None:
        self.broker = broker
        self.keys = broker.keys

    # -- registry and ownership ---------------------------------------------------

    def register(self, beat: str, now: int, ttl_ms: int) -> int:
        """Renew ``beat`` in the live-beats registry until ``now + ttl_ms``, drop the
        beats expired by ``now``; returns how many are live (one round trip)."""
        key = self.keys.beats()
        pipe = self.broker.client.pipeline(transaction=False)
        pipe.zadd(key, {beat: now + ttl_ms})
        pipe.zremrangebyscore(key, "-inf", now)
        pipe.zcard(key)
        return int(pipe.execute()[-1])

    def unregister(self, beat: str) -> None:
        """Leave the live-beats registry (a stopping beat)."""
        self.broker.client.zrem(self.keys.beats(), beat)

    def own(self, shards: Sequence[int], beat: str, ttl_ms: int, mode: str) -> list[ShardClaim]:
        """Acquire, renew or release the ownership leases of ``shards`` in one round
        trip."""
        pipe = self.broker.client.pipeline(transaction=False)
        for shard in shards:
            self.broker._run("beat_own", shard, argv.beat_own(beat, ttl_ms, mode), pipe)
        return [
            ShardClaim(shard, bool(int(ok)), _s(epoch))
            for shard, (ok, epoch, _owner) in zip(shards, self.broker._execute(pipe), strict=True)
        ]

    # -- the schedule --------------------------------------------------------------

    def due(self, shard: int, now: int, limit: int) -> list[DueRow]:
        """Up to ``limit`` schedule rows due by ``now``, earliest first."""
        rows: list[Any] = self.broker.client.zrangebyscore(
            self.keys.schedule(shard), "-inf", now, start=0, num=limit, withscores=True
        )
        return [DueRow(_s(member), int(score)) for member, score in rows]

    def due_page(
        self, shard: int, start: int, end: int, after: DueRow | None, limit: int
    ) -> list[DueRow]:
        """Up to ``limit`` schedule rows scored in ``[start, end]``, earliest first,
        following the row ``after`` (None: from ``start``).

        A page resumes by rank (ZRANK, then ZRANGE by rank: O(log N + limit)),
        not by an offset, which Redis walks (O(offset)): 100,000 jobs due in the
        same second are read ahead in pages of equal cost.  When ``after`` has
        moved (fired, rescheduled or deleted) the page starts again at ``start``.
        """
        key = self.keys.schedule(shard)
        client = self.broker.client
        if after is not None:
            pipe = client.pipeline(transaction=False)
            pipe.zrank(key, after.job_id)
            pipe.zscore(key, after.job_id)
            rank, at = pipe.execute()
            if rank is not None and at is not None and int(at) == after.due_ms:
                page: list[Any] = client.zrange(key, rank + 1, rank + limit, withscores=True)
                found = [DueRow(_s(member), int(score)) for member, score in page]
                return [row for row in found if start <= row.due_ms <= end]
        rows: list[Any] = client.zrangebyscore(key, start, end, start=0, num=limit, withscores=True)
        return [DueRow(_s(member), int(score)) for member, score in rows]

    def next_due(self, shards: Sequence[int]) -> tuple[int, list[int | None]]:
        """The server time (ms) and each shard's earliest due score (None: nothing
        scheduled), in one round trip (two on a cluster)."""
        client = self.broker.client
        pipe = client.pipeline(transaction=False)
        if is_cluster(client):
            # a cluster pipeline refuses TIME (a command of no key): asked apart
            now = self.broker.server_ms()
        else:
            pipe.time()
        for shard in shards:
            pipe.zrange(self.keys.schedule(shard), 0, 0, withscores=True)
        res = pipe.execute() if shards or not is_cluster(client) else []
        if not is_cluster(client):
            now, res = time_ms(res[0]), res[1:]
        return now, [int(head[0][1]) if head else None for head in res]

    # -- jobs and tenants ----------------------------------------------------------

    def job_heads(
        self, shard: int, job_ids: Sequence[str], tenants: Sequence[str]
    ) -> tuple[list[JobHead], list[Any]]:
        """The head of each job, and the stored default ``jitter_s`` of each tenant
        (raw: None if never set), in one round trip."""
        pipe = self.broker.client.pipeline(transaction=False)
        for jid in job_ids:
            pipe.hmget(self.keys.job(shard, jid), "version", "next_fire", "paused", "tenant")
        for tenant in tenants:
            pipe.hget(self.keys.tenant(shard, tenant), "jitter_s")
        # errors in place: a job key that is not a hash (WRONGTYPE) is that job's fault
        res = pipe.execute(raise_on_error=False)
        raise_unreachable(res)  # a cluster pipeline's unreachable node: no reply at all
        heads = [
            JobHead("", None, False, "", f"the job key is not a readable hash ({row})")
            if isinstance(row, redis.ResponseError)
            else _head(*row)
            for row in res[: len(job_ids)]
        ]
        for raw in res[len(job_ids) :]:
            if isinstance(raw, Exception):
                raise raw  # a tenant hash of the wrong type: doctor's, not one job's
        return heads, list(res[len(job_ids) :])

    def job_specs(
        self, shard: int, job_ids: Sequence[str], tenants: Sequence[str]
    ) -> tuple[list[tuple[str, str, str] | None], list[Any]]:
        """The stored spec of each job as (JSON text, tenant, name): the text
        leaves out the job's tenant and name (``spec_json``; ``spec_from_json``
        takes them back); None: the job is gone.  And the stored default
        ``jitter_s`` of each tenant (raw), in one round trip."""
        pipe = self.broker.client.pipeline(transaction=False)
        for jid in job_ids:
            pipe.hmget(self.keys.job(shard, jid), "spec", "tenant", "name")
        for tenant in tenants:
            pipe.hget(self.keys.tenant(shard, tenant), "jitter_s")
        res = pipe.execute()
        specs = [
            None if text is None else (_s(text), _s(tenant or b""), _s(name or b""))
            for text, tenant, name in res[: len(job_ids)]
        ]
        return specs, list(res[len(job_ids) :])

    def park(self, shard: int, parks: Sequence[Park]) -> list[bool]:
        """Park jobs of one shard (job_park.lua, pipelined): for each, whether it was
        parked (False: changed, moved or deleted since it was read)."""
        pipe = self.broker.client.pipeline(transaction=False)
        for p in parks:
            args = argv.job_park(p.job_id, p.version, p.score, p.reason[:REASON_MAX])
            self.broker._run("job_park", shard, args, pipe)
        return [
            not isinstance(res, redis.ResponseError) and bool(int(res))
            for res in self.broker.execute(pipe)
        ]

    # -- firing --------------------------------------------------------------------

    def fire_one(self, shard: int, fire: FireArgs, now: int | None = None) -> Fired:
        """One fire of one job (a beat fire, or a manual run)."""
        status, run_id = self.broker._run("fire", shard, argv.fire(fire, now))
        return Fired(_s(status), _s(run_id))

    def fire_batch(
        self, shard: int, fires: Sequence[FireArgs], now: int | None = None, pipe: Any = None
    ) -> Any:
        """Fire many jobs of one shard in one call: a {status, run_id} per fire."""
        return self.broker._run("fire_batch", shard, argv.fire_batch(fires, now), pipe)

    def fire(self, shard: int, fires: Sequence[FireArgs]) -> list[Any]:
        """Send fires of one shard, ``FIRES_PER_CALL`` per fire_batch.lua call and
        those calls pipelined.  One result per fire, in order: fire.lua's
        ``{status, run_id}``, or for each fire of a refused call (STALE) its error
        reply (:data:`redcron.engine.retry.ErrorReply`)."""
        out: list[Any] = []
        for i in range(0, len(fires), PIPELINE_FIRES):
            pipe = self.broker.client.pipeline(transaction=False)
            chunks = []
            page = fires[i : i + PIPELINE_FIRES]
            for j in range(0, len(page), FIRES_PER_CALL):
                chunk = page[j : j + FIRES_PER_CALL]
                self.fire_batch(shard, chunk, pipe=pipe)
                chunks.append(len(chunk))
            for n, res in zip(chunks, self.broker.execute(pipe), strict=True):
                out += [res] * n if isinstance(res, redis.ResponseError) else list(res)
        return out

    # -- deadlines -----------------------------------------------------------------

    def sweep_deadlines(
        self, shard: int, now: int | None = None, limit: int = SWEEP_LIMIT
    ) -> Swept:
        """Mark late the runs of ``shard`` whose deadline is due by ``now`` (None:
        the server clock) and that have not ended: at most ``limit`` deadlines
        looked at (``looked == limit``: more may be due)."""
        raw = self.broker._run("deadline_sweep", shard, argv.deadline_sweep(limit, now))
        late = [
            LateRun(_s(rid), _s(tenant), _s(job), int(fire_ms), int(deadline))
            for rid, tenant, job, fire_ms, deadline in raw[1:]
        ]
        return Swept(int(raw[0]), late)
