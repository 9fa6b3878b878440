"""The broker: every operation on Redis, one method per Lua script.

Methods take plain data and return plain data, or records (``redcron.model``)
for what people read; the App and the worker build on them.  Ids carry their
shard (``<shard>-<ulid>``), so any id routes to its hash slot without a lookup.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from redcron.broker import argv
from redcron.broker.argv import FailItem, FireArgs
from redcron.broker.cancel import TaskCancel, task_cancel
from redcron.broker.connection import connect
from redcron.broker.scripts import Scripts, Wait
from redcron.clock import ulid
from redcron.config import Settings
from redcron.errors import (
    ConfigError,
    Conflict,
    ConnectionLost,
    NotFound,
    NotReplicated,
    RedcronError,
    from_script_error,
)
from redcron.keys import GROUP, PRIORITIES, Keys, shard_of

# shard_of_id lives in keys.py (ids and shards, DESIGN §2); re-exported here so
# that modules importing it from redcron.broker.broker (on other branches too) keep working
from redcron.keys import shard_of_id as shard_of_id
from redcron.model import DlqEntry, TaskRecord, TenantLoad
from redcron.serde import text as _s

log = logging.getLogger(__name__)

#: bounded work per script call: no script walks an unbounded set at once
MAX_BATCH = 256
MAX_MAINTENANCE = 500
#: the longest a wake list gets (lib/rings.lua's wake() trims to the same bound)
WAKE_MAX = 16
#: ``recent`` ids a maintenance pass checks for expired hashes
PRUNE_BATCH = 500


#: scripts whose success a caller takes as an acknowledgement (a task is queued,
#: an attempt's result recorded, a fire or a job change stored...): under
#: durability="strict" they return only once replicas confirm them (WAIT)
ACKED = frozenset({
    "enqueue", "complete", "fail", "fire", "fire_batch", "job_put", "job_pause", "job_park",
    "job_delete", "cancel", "dlq_replay", "dlq_discard", "run_cancel", "run_retry",
})  # fmt: skip

#: the task hash fields that hold msgpack (every other field is plain text)
PAYLOADS = ("args", "result")

_KINDS = {b"command": "command", b"container": "container", b"python": "python"}


@dataclass(frozen=True, slots=True)
class Lease:
    """One leased attempt, as handed to a worker."""

    iid: str
    epoch: str
    attempt: int
    name: str
    kind: str
    args: bytes
    timeout_ms: int
    shard: int
    tenant: str = "default"
    cpu: float = 0.0
    mem: int = 0
    queue: str = "default"
    #: the number of the last attempt allowed: the task's max_attempts plus the
    #: attempts that do not count (handed back, or before a DLQ replay)
    max_attempts: int = 1


@dataclass(frozen=True, slots=True)
class FailResult:
    """What reporting one failed attempt did to its task."""

    #: the task's new state (retry_wait, ready, dead, cancelled); None: the lease
    #: was lost and nothing was written
    state: str | None
    #: a retry: ms until the next attempt may run (0: ready at once); else None
    retry_in_ms: int | None = None


def _fail_results(raw: Any) -> list[FailResult]:
    """fail.lua's reply: one {state or 0, retry_in_ms or -1} per failure."""
    return [
        FailResult(None if state == 0 else _s(state), None if delay < 0 else int(delay))
        for state, delay in raw
    ]


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """What a worker asks :meth:`Broker.lease` for (see its arguments)."""

    worker: str
    max_tasks: int
    ttl_ms: int
    queues: tuple[str, ...]
    tenants: tuple[str, ...] = ()
    capacity: tuple[float | None, int | None] = (None, None)


class Broker:
    """All Redis operations of one deployment (one key prefix)."""

    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.client: redis.Redis = client or connect(settings.redis_url, health_check_interval=30)
        self.scripts = Scripts(self.client)
        strict = settings.durability == "strict" and settings.durability_replicas > 0
        self._wait = (
            Wait(settings.durability_replicas, max(1, int(settings.durability_timeout * 1000)))
            if strict
            else None
        )
        self._acked = frozenset(self.scripts.script(name).sha for name in ACKED)
        self._shards: int | None = None
        self._min_idle_ms: int | None = None
        self._names: dict[bytes | None, str] = {}

    # -- deployment ---------------------------------------------------------

    @property
    def shards(self) -> int:
        """The deployment's shard count (stored in the meta key at first use)."""
        if self._shards is None:
            self._shards = self.ensure_meta()
        return self._shards

    @property
    def min_idle_ms(self) -> int:
        """The deployment's minimum lease TTL in ms: no live lease goes longer
        without a heartbeat, so the reaper looks only at entries idle this long."""
        if self._min_idle_ms is None:
            self.ensure_meta()
        assert self._min_idle_ms is not None
        return self._min_idle_ms

    def ensure_meta(self, check_policy: bool = True) -> int:
        """Create the meta key if missing; refuse an evicting Redis.

        Returns the deployment's shard count (the stored one wins over settings).
        """
        if check_policy:
            self.check_eviction_policy()
            self.check_durability()
        meta = self.keys.meta()
        pipe = self.client.pipeline(transaction=False)
        pipe.hsetnx(meta, "shards", self.settings.shards)
        pipe.hsetnx(meta, "lease_ttl_s", self.settings.lease_ttl)
        pipe.hsetnx(meta, "min_lease_ttl_s", self.settings.min_lease_ttl)
        pipe.hmget(meta, ["shards", "min_lease_ttl_s"])
        shards, min_ttl = pipe.execute()[-1]
        self._shards = int(shards)
        self._min_idle_ms = int(float(min_ttl) * 1000)
        return self._shards

    def server_ms(self) -> int:
        """The Redis server's clock in ms: every process reads "now" from it (invariant 8)."""
        return time_ms(self.client.time())

    def check_eviction_policy(self) -> None:
        try:
            policy = self.client.config_get("maxmemory-policy").get("maxmemory-policy")
        except redis.ResponseError:  # CONFIG disabled (managed Redis): cannot check
            log.warning("cannot read maxmemory-policy; make sure it is noeviction")
            return
        if policy is not None and _s(policy) != "noeviction":
            raise ConfigError(
                f"Redis maxmemory-policy is {_s(policy)!r}; redcron needs 'noeviction' "
                "(an evicted key is lost work): CONFIG SET maxmemory-policy noeviction"
            )

    def check_durability(self) -> None:
        """``durability="strict"`` on one server (``durability_replicas`` 0) holds
        only if every write is fsynced before it is acknowledged: refuse a server
        that does not run ``appendonly yes`` with ``appendfsync always``."""
        if self.settings.durability != "strict" or self.settings.durability_replicas > 0:
            return
        try:
            got = self.client.config_get("append*")
        except redis.ResponseError:  # CONFIG disabled (managed Redis): cannot check
            log.warning("cannot read appendfsync; durability=strict needs appendfsync always")
            return
        if (_s(got.get("appendonly", b"")), _s(got.get("appendfsync", b""))) != ("yes", "always"):
            raise ConfigError(
                "durability=strict with durability_replicas=0 needs a server with appendonly "
                "yes and appendfsync always (redcron up --fsync always); or name the "
                "replicas each write waits for with durability_replicas"
            )

    def _run(self, name: str, shard: int, args: list[Any], client: Any = None, *keys: str) -> Any:
        if client is None and self._wait is not None and name in ACKED:
            return self.scripts.run_replicated(
                name, [self.keys.shard(shard), *keys], args, self._wait
            )
        return self.scripts.run(name, [self.keys.shard(shard), *keys], args, client)

    # -- producing ----------------------------------------------------------

    def enqueue(self, rows: Sequence[Sequence[Any]], now: int | None = None) -> int:
        """Create instances (see :meth:`_enqueue`).  Under ``durability="strict"``
        a :class:`NotReplicated` names the task ids it concerns: they are queued
        on the master, and enqueueing them again would run the work twice."""
        try:
            return self._enqueue(rows, now)
        except NotReplicated as exc:
            ids = [str(row[0]) for row in rows]
            shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            raised = NotReplicated(f"{exc} (tasks {shown}: look them up, do not enqueue again)")
            raised.task_ids = ids
            raised.results = exc.results
            raise raised from exc

    def _enqueue(self, rows: Sequence[Sequence[Any]], now: int | None = None) -> int:
        """Create instances; each row holds the 13 enqueue.lua fields (iid first).

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
        by_shard: dict[int, list[Sequence[Any]]] = {}
        for row in rows:
            by_shard.setdefault(shard_of_id(row[0]), []).append(row)
        if len(by_shard) == 1 and len(rows) <= MAX_BATCH:
            shard, chunk = next(iter(by_shard.items()))
            return int(self._run("enqueue", shard, argv.enqueue(chunk, now)))
        seen: set[str] = set()
        ready: dict[int, dict[str, int]] = {}  # shard -> tenant -> rows ready at once
        for shard, shard_rows in by_shard.items():
            counts = ready[shard] = {}
            for row in shard_rows:
                if row[0] in seen:
                    raise Conflict(f"task id {row[0]} comes twice in the batch; nothing written")
                seen.add(row[0])
                if not _delayed(row[11]):
                    counts[row[5]] = counts.get(row[5], 0) + 1
        token = ulid()
        batch = {shard: self.keys.batch(shard, token) for shard in by_shard}
        tenants = {shard: {row[5] for row in shard_rows} for shard, shard_rows in by_shard.items()}
        # checked with the admission, so a tenant without the grant is refused
        # before the first write, not half-way (enqueue.lua checks each call too)
        needing = {
            shard: {row[5] for row in shard_rows if row[2] != "python"}
            for shard, shard_rows in by_shard.items()
        }
        # 1. admit the whole batch (checks, then reservations): nothing written yet
        pipe = self.client.pipeline(transaction=False)
        for shard, shard_rows in by_shard.items():
            for i in range(0, len(shard_rows), MAX_BATCH):
                final = i + MAX_BATCH >= len(shard_rows)
                ids = [row[0] for row in shard_rows[i : i + MAX_BATCH]]
                args = argv.enqueue_check(
                    ready[shard] if final else None, ids, needing[shard] if final else ()
                )
                self._run("enqueue_check", shard, args, pipe, batch[shard])
        if len(by_shard) > 1:
            # a call sees only its own shard's refusal marker (one slot per call):
            # the writes wait for every shard's admission, a round trip later
            pipe.delete(*batch.values())
            try:
                self._execute(pipe, ordered=True)
            except RedcronError:
                self._release(batch, tenants)
                raise
            pipe = self.client.pipeline(transaction=False)
        # 2. write it (on one shard in the same round trip: a refused admission
        # has set the marker, and every write call then refuses)
        start = len(pipe.command_stack)
        for shard, shard_rows in by_shard.items():
            for i in range(0, len(shard_rows), MAX_BATCH):
                chunk = shard_rows[i : i + MAX_BATCH]
                self._run("enqueue", shard, argv.enqueue(chunk, now), pipe, batch[shard])
        end = len(pipe.command_stack)
        pipe.delete(*batch.values())
        try:
            results = self._execute(pipe, ordered=True)
        except RedcronError:
            self._release(batch, tenants)
            raise
        return sum(int(n) for n in results[start:end])

    def _release(self, batch: dict[int, str], tenants: dict[int, set[str]]) -> None:
        """Drop a batch's reservations and refusal markers (it was refused).

        Best effort: what is left (the connection is gone) expires in 60 s.
        """
        pipe = self.client.pipeline(transaction=False)
        for shard, key in batch.items():
            for tenant in tenants[shard]:
                pipe.hdel(self.keys.reserved(shard, tenant), key, f"{key}:exp")
            pipe.delete(key)
        try:
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("could not release a refused batch's reservations: %s", exc)

    def execute(self, pipe: Any, ordered: bool = False) -> list[Any]:
        """Execute a pipeline of script calls: every reply in order, a refused call's
        error in its place.

        A call that found no script (a flushed or restarted Redis) is loaded and
        run again *after* the rest of the pipeline.  That is harmless where the
        calls do not depend on each other's order (reports and a lease, fires of
        one script); a pipeline whose later calls rely on earlier ones having
        run (an admission check, then the writes it guards) passes ``ordered``,
        and its scripts are made sure of first (one more round trip).
        """
        stack = list(pipe.command_stack)
        wait = self._wait
        if wait is not None and not any(
            args[0] == "EVALSHA" and args[1] in self._acked for args, _options in stack
        ):
            wait = None
        try:
            if ordered:
                self.scripts.ensure_loaded(stack)
            if wait is not None:
                pipe.execute_command(*wait.command())
            results: list[Any] = pipe.execute(raise_on_error=False)
            waited = results.pop() if wait is not None else None
            rewaited = self.scripts.rerun_missing(stack, results, wait)
        except redis.ConnectionError as exc:
            raise ConnectionLost(str(exc)) from exc
        if wait is not None:
            for reply in (waited, rewaited):
                if reply is not None:
                    try:
                        wait.check(reply, "a pipeline of writes")
                    except NotReplicated as exc:
                        exc.results = results
                        raise
        return results

    def _execute(self, pipe: Any, ordered: bool = False) -> list[Any]:
        """Execute a pipeline; a script error becomes its exception (the first one)."""
        results = self.execute(pipe, ordered)
        for res in results:
            if isinstance(res, redis.ResponseError):
                raise from_script_error(str(res)) from res
        return results

    # -- the lease protocol -------------------------------------------------

    def lease(
        self,
        shard: int,
        worker: str,
        max_tasks: int,
        ttl_ms: int,
        queues: Sequence[str],
        tenants: Sequence[str] = (),
        capacity: tuple[float | None, int | None] = (None, None),
        now: int | None = None,
    ) -> list[Lease]:
        """Lease up to ``max_tasks`` ready instances from ``queues`` (optionally only
        from ``tenants``)."""
        req = LeaseRequest(worker, max_tasks, ttl_ms, tuple(queues), tuple(tenants), capacity)
        return self._leases(shard, self._run("lease", shard, self._lease_args(req, now)))

    def _lease_args(self, req: LeaseRequest, now: int | None = None) -> list[Any]:
        return argv.lease(
            req.worker,
            min(req.max_tasks, MAX_BATCH),
            req.ttl_ms,
            req.queues,
            tenants=req.tenants,
            quantum=self.settings.dispatch_quantum,
            aging_ms=int(self.settings.aging * 1000),
            capacity=req.capacity,
            now=now,
        )

    def _leases(self, shard: int, raw: Any) -> list[Lease]:
        names = self._names
        out = []
        for row in raw:
            if len(row) != 12 or not all(row[i] for i in (0, 3, 7, 10)):
                # a safety net: lease.lua hands no row it cannot fill (a hash edited
                # by hand goes to the DLQ via promote, lib/malformed.lua), but one
                # bad row must not drop the whole batch
                what = row[0].decode(errors="replace") if row and row[0] else "?"
                log.warning(
                    "skipping malformed lease of %s (a field is missing or not a number); "
                    "fix or delete the instance hash",
                    self.keys.ti(shard, what),
                )
                continue
            iid, epoch, attempt, name, kind, args, timeout_ms, tenant, cpu, mem, queue, last = row
            # task names repeat: decode each distinct one once
            sname = names.get(name)
            if sname is None:
                sname = names[name] = (name or b"").decode()
                if len(names) > 10_000:
                    names.clear()
            out.append(
                Lease(
                    iid.decode(),
                    str(epoch),
                    attempt,
                    sname,
                    _KINDS.get(kind, "python"),
                    args or b"",
                    timeout_ms,
                    shard,
                    names.get(tenant) or names.setdefault(tenant, tenant.decode()),
                    float(cpu) if cpu else 0.0,
                    mem,
                    names.get(queue) or names.setdefault(queue, queue.decode()),
                    last,
                )
            )
        return out

    def start(
        self, shard: int, worker: str, tokens: Iterable[tuple[str, str]], now: int | None = None
    ) -> int:
        return int(self._run("start", shard, argv.tokens(worker, tokens, now)))

    def heartbeat(
        self,
        shard: int,
        worker: str,
        ttl_ms: int,
        tokens: Iterable[tuple[str, str]],
        now: int | None = None,
    ) -> tuple[list[str], list[str]]:
        """Renew leases; returns (lost, revoked) instance ids."""
        lost, revoked = self._run("heartbeat", shard, argv.heartbeat(worker, ttl_ms, tokens, now))
        return [_s(x) for x in lost], [_s(x) for x in revoked]

    def complete(
        self,
        shard: int,
        worker: str,
        items: Sequence[tuple[str, str, bytes]],
        now: int | None = None,
    ) -> list[bool]:
        return [bool(x) for x in self._run("complete", shard, argv.complete(worker, items, now))]

    def fail(
        self,
        shard: int,
        worker: str,
        items: Sequence[FailItem],
        now: int | None = None,
        jitter: float | None = None,
    ) -> list[FailResult]:
        """Report failed attempts; returns what each did (its new state, None if the
        lease was lost; for a retry, the delay before the next attempt).

        ``jitter`` fixes the backoff's jitter fraction (tests); default random.
        """
        return _fail_results(self._run("fail", shard, argv.fail(worker, items, now, jitter)))

    def report(
        self,
        shard: int,
        worker: str,
        completes: Sequence[tuple[str, str, bytes]],
        fails: Sequence[FailItem],
        logs: Sequence[tuple[str, int, Sequence[str]]],
        now: int | None = None,
    ) -> tuple[list[bool], list[FailResult]]:
        """Logs, completions and failures of one shard in one round trip.

        Logs go first so a dead-lettered attempt's DLQ entry carries its tail.
        """
        done, failed, _ = self.report_and_lease(shard, worker, completes, fails, logs, None, now)
        return done, failed

    def report_and_lease(
        self,
        shard: int,
        worker: str,
        completes: Sequence[tuple[str, str, bytes]],
        fails: Sequence[FailItem],
        logs: Sequence[tuple[str, int, Sequence[str]]],
        lease: LeaseRequest | None,
        now: int | None = None,
    ) -> tuple[list[bool], list[FailResult], list[Lease]]:
        """:meth:`report`, then (``lease`` given) :meth:`lease`, in one round trip.

        A busy worker reports the batch that just ended and takes the next one
        in the same pipeline: half the round trips, and the leases see the slots
        and cap room the reports gave back.  Each script is atomic on its own;
        the lease runs after the reports, as two separate calls would.
        """
        pipe = self.client.pipeline(transaction=False)
        self.append_logs(shard, logs, pipe)
        n_logs = len(pipe.command_stack)
        if completes:
            self._run("complete", shard, argv.complete(worker, completes, now), pipe)
        if fails:
            self._run("fail", shard, argv.fail(worker, fails, now), pipe)
        if lease is not None:
            self._run("lease", shard, self._lease_args(lease, now), pipe)
        try:
            results = self._execute(pipe)[n_logs:]
        except NotReplicated as exc:
            # the reports are retried; the leases this pipeline took go back at once
            # (not used: a retried report must not wait behind them)
            if lease is not None:
                self._hand_back_leases(shard, worker, (exc.results or [None])[-1])
            raise
        done = [bool(x) for x in results[0]] if completes else []
        failed = _fail_results(results[1 if completes else 0]) if fails else []
        leases = self._leases(shard, results[-1]) if lease is not None else []
        return done, failed, leases

    def _hand_back_leases(self, shard: int, worker: str, raw: Any) -> None:
        """Release the leases of a lease.lua reply that will not be used (best effort:
        a lease not released expires)."""
        if not isinstance(raw, list) or not raw:
            return
        try:
            tokens = [(lease.iid, lease.epoch) for lease in self._leases(shard, raw)]
            self.release(shard, worker, tokens)
        except (redis.RedisError, RedcronError) as exc:
            log.warning("could not hand back %d unused leases (%s); they expire", len(raw), exc)

    def release(
        self, shard: int, worker: str, tokens: Iterable[tuple[str, str]], now: int | None = None
    ) -> int:
        return int(self._run("release", shard, argv.tokens(worker, tokens, now)))

    # -- maintenance ----------------------------------------------------------

    def reap(
        self,
        shard: int,
        limit: int = MAX_MAINTENANCE,
        now: int | None = None,
        jitter: float | None = None,
    ) -> tuple[int, int, int]:
        """End expired leases (retry or DLQ) with XAUTOCLAIM over the streams that
        have pending entries.  Returns (reaped, next look ms or -1, streams still
        due: the call's bound cut the pass short)."""
        n, nxt, due = self._run(
            "reap",
            shard,
            argv.reap(min(limit, MAX_MAINTENANCE), self.min_idle_ms, now, jitter),
        )
        return int(n), int(nxt), int(due)

    def promote(
        self, shard: int, limit: int = MAX_MAINTENANCE, now: int | None = None
    ) -> tuple[int, int]:
        n, nxt = self._run("promote", shard, argv.promote(min(limit, MAX_MAINTENANCE), now))
        return int(n), int(nxt)

    def try_maintenance_lock(self, shard: int, owner: str, interval_s: float) -> bool:
        """At most one promote/reap caller per shard per interval (short SET NX PX lock)."""
        return bool(
            self.client.set(
                self.keys.lock(shard, "maintenance"),
                owner,
                nx=True,
                px=max(1, int(interval_s * 1000)),
            )
        )

    def maintain(self, shard: int, now: int | None = None) -> tuple[int, int]:
        """Promote due timers and reap expired leases until none are left (bounded)."""
        promoted = reaped = 0
        for _ in range(20):
            n, _nxt = self.promote(shard, now=now)
            promoted += n
            if n < MAX_MAINTENANCE:
                break
        for _ in range(20):
            n, _nxt, due = self.reap(shard, now=now)
            reaped += n
            if n < MAX_MAINTENANCE and not due:
                break
        if reaped:
            log.info("shard %d: reaped %d expired leases (retried or dead-lettered)", shard, reaped)
        self.prune_recent(shard)
        return promoted, reaped

    def prune_recent(self, shard: int, batch: int = PRUNE_BATCH) -> int:
        """Drop ids whose instance hash expired from ``batch`` entries of the
        shard's ``recent`` index, walking it a window per call (cursor in
        ``recentcur``) so it holds about the retained instances rather than its
        cap of newest ids; how many were dropped.  Ids are never reused, so an
        id found without its hash is gone for good."""
        client, keys = self.client, self.keys
        start = int(client.get(keys.recentcur(shard)) or 0)
        ids: Any = client.zrange(keys.recent(shard), start, start + batch - 1)
        if not ids:
            client.set(keys.recentcur(shard), 0)
            return 0
        pipe = client.pipeline(transaction=False)
        for iid in ids:
            pipe.exists(keys.ti(shard, _s(iid)))
        gone = [iid for iid, alive in zip(ids, pipe.execute(), strict=True) if not alive]
        if gone:
            client.zrem(keys.recent(shard), *gone)
        following = start + len(ids) - len(gone) if len(ids) == batch else 0
        client.set(keys.recentcur(shard), following)
        return len(gone)

    # -- the beat --------------------------------------------------------------

    def beat_own(
        self,
        shard: int,
        owner: str,
        ttl_ms: int,
        mode: str,
        now: int | None = None,
        pipe: Any = None,
    ) -> Any:
        """Acquire, renew or release a shard's ownership lease: (owned, epoch, owner)
        (with ``pipe``: queued, the pipeline's result holds it)."""
        return self._run("beat_own", shard, argv.beat_own(owner, ttl_ms, mode, now), pipe)

    def fire(self, shard: int, fire: FireArgs, now: int | None = None) -> tuple[str, str]:
        """One fire of one job (a beat fire, or a manual run): (status, run_id)."""
        status, run_id = self._run("fire", shard, argv.fire(fire, now))
        return _s(status), _s(run_id)

    def fire_batch(
        self, shard: int, fires: Sequence[FireArgs], now: int | None = None, pipe: Any = None
    ) -> Any:
        """Fire many jobs of one shard in one call: a {status, run_id} per fire."""
        return self._run("fire_batch", shard, argv.fire_batch(fires, now), pipe)

    # -- control --------------------------------------------------------------

    def cancel(self, iid: str, now: int | None = None) -> TaskCancel:
        """End a task ``cancelled`` wherever it is (see :mod:`redcron.broker.cancel`)."""
        return task_cancel(iid, self._run("cancel", shard_of_id(iid), argv.cancel(iid, now)))

    def dlq_replay(self, iids: Sequence[str], now: int | None = None) -> int:
        """Make dead instances ready again; how many were (the others are left alone)."""
        return self._dlq_each("dlq_replay", argv.dlq_replay, iids, now)

    def dlq_discard(self, iids: Sequence[str], now: int | None = None) -> int:
        """Take dead instances out of the DLQ for good (they end ``cancelled``, error
        "discarded from the DLQ"); how many were (the others are left alone)."""
        return self._dlq_each("dlq_discard", argv.dlq_discard, iids, now)

    def _dlq_each(
        self,
        script: str,
        build: Callable[[Sequence[str], int | None], list[Any]],
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
                total += sum(int(x) for x in self._run(script, shard, build(chunk, now)))
        return total

    def unpark(self, shard: int, tenant: str) -> bool:
        """Give a tenant parked at its cap or rate limit its rings back (its limits
        changed); the next lease re-checks them.  True when it was parked."""
        return bool(self._run("tenant_unpark", shard, [tenant]))

    def watch(self, iid: str) -> str:
        return _s(self._run("watch", shard_of_id(iid), [iid]))

    def wait_done(self, iid: str, timeout_s: float) -> bool:
        key = self.keys.done(shard_of_id(iid), iid)
        return self.client.blpop([key], timeout=max(0.01, timeout_s)) is not None

    def wait_for_work(
        self,
        shards: Sequence[int],
        queues: Sequence[str],
        timeout_s: float,
        pass_on: Callable[[], bool] | None = None,
    ) -> bool:
        """Block (≤ timeout) on the wake lists of the given queues and shards.

        ``pass_on`` is asked once a wake-up came: True puts it back on its list
        for another idle worker, as the caller will not lease (its client left).
        """
        keys = [self.keys.wake(shard, q) for shard in shards for q in queues]
        got = self.client.blpop(keys, timeout=max(0.01, timeout_s))
        if got is not None and pass_on is not None and pass_on():
            key, token = got
            pipe = self.client.pipeline(transaction=False)
            pipe.lpush(key, token)
            pipe.ltrim(key, 0, WAKE_MAX - 1)  # bounded as lib/rings.lua's wake() keeps it
            pipe.execute()
        return got is not None

    def once(self, shard: int, key: str, ttl_s: int) -> bool:
        """Record an effect; True only for the first caller (SET NX)."""
        return bool(self.client.set(self.keys.once(shard, key), "1", nx=True, ex=ttl_s))

    def append_logs(
        self, shard: int, items: Sequence[tuple[str, int, Sequence[str]]], pipe: Any = None
    ) -> None:
        """Append captured lines to per-attempt log streams (capped, expiring)."""
        if not items:
            return
        p = pipe if pipe is not None else self.client.pipeline(transaction=False)
        cap = self.settings.log_max_lines
        for iid, attempt, lines in items:
            key = self.keys.log(shard, iid, attempt)
            for line in lines:
                p.xadd(key, {"line": line}, maxlen=cap, approximate=True)
            p.expire(key, self.settings.result_ttl)
        if pipe is None:
            p.execute()

    # -- inspection ------------------------------------------------------------

    def task_info(self, iid: str) -> TaskRecord:
        """The task instance's record (its hash, parsed)."""
        shard = shard_of_id(iid)
        raw = self.client.hgetall(self.keys.ti(shard, iid))
        if not raw:
            raise NotFound(f"no task {iid} (never existed, or expired after its retention)")
        return TaskRecord.from_fields(fields_of(raw, keep=PAYLOADS), shard)

    def run_params(self, shard: int, run_id: str) -> dict[str, Any]:
        """The params a run was triggered with (``{}``: none, or no such run)."""
        raw = self.client.hget(self.keys.run(shard, run_id), "params")
        params: dict[str, Any] = json.loads(raw) if raw else {}
        return params

    def log_lines(self, iid: str, attempt: int, count: int = 20) -> list[str]:
        key = self.keys.log(shard_of_id(iid), iid, attempt)
        entries: Any = self.client.xrevrange(key, count=count)
        return [_s(fields.get(b"line", b"")) for _eid, fields in reversed(entries)]

    def dlq_list(self, tenant: str | None = None, count: int = 100) -> list[DlqEntry]:
        """Dead tasks, oldest first: up to ``count`` per tenant (of ``tenant``).
        Two pipelined round trips per shard (a tenant's: its shard only)."""
        out: list[DlqEntry] = []
        shards = [shard_of(tenant, self.shards)] if tenant else range(self.shards)
        for shard in shards:
            tenants = (
                [tenant]
                if tenant
                else sorted(_s(t) for t in self.client.smembers(self.keys.tenants(shard)))
            )
            if not tenants:
                continue
            pipe = self.client.pipeline(transaction=False)
            for t in tenants:
                pipe.xrange(self.keys.dlq(shard, t), count=count)
            streams: list[tuple[str, Any]] = list(zip(tenants, pipe.execute(), strict=True))
            gone = self._dlq_gone(shard, streams)
            for t, entries in streams:
                for eid, fields in entries:
                    if _s(eid) not in gone:
                        out.append(DlqEntry.from_fields(_s(eid), t, shard, fields_of(fields)))
        return out

    def _dlq_gone(self, shard: int, streams: Sequence[tuple[str, Any]]) -> set[str]:
        """Drop (``dlq_prune.lua``) the DLQ entries whose instance is gone: replay and
        discard could never act on them.  One EXISTS pipeline for every tenant's
        entries; returns the dropped entry ids."""
        listed = [(t, _s(eid), fields) for t, entries in streams for eid, fields in entries]
        if not listed:
            return set()
        pipe = self.client.pipeline(transaction=False)
        for _t, _eid, fields in listed:
            pipe.exists(self.keys.ti(shard, _s(fields.get(b"i", b""))))
        suspects: dict[str, list[str]] = {}
        for (t, eid, _f), alive in zip(listed, pipe.execute(), strict=True):
            if not alive:
                suspects.setdefault(t, []).append(eid)
        dropped_ids: set[str] = set()
        for t, eids in suspects.items():
            for eid, iid in self._run("dlq_prune", shard, [t, *eids]):
                log.warning(
                    "dropped DLQ entry %s of tenant %s: its task %s no longer exists (expired "
                    "or deleted), so it could not be replayed or discarded",
                    _s(eid),
                    t,
                    _s(iid),
                )
                dropped_ids.add(_s(eid))
        return dropped_ids

    def inspect(self) -> list[TenantLoad]:
        """Ready / in-flight / delayed / DLQ counts per tenant, one row per shard it is on."""
        return [load for load, _classes in self.inspect_classes()]

    def inspect_classes(self, tenant: str | None = None) -> list[tuple[TenantLoad, dict[str, int]]]:
        """:meth:`inspect` (of ``tenant`` only, if given), each row with its ready
        work per priority class: the same reads, nothing read twice."""
        rows: list[tuple[TenantLoad, dict[str, int]]] = []
        for shard in range(self.shards):
            tenants = sorted(_s(t) for t in self.client.smembers(self.keys.tenants(shard)))
            if tenant is not None:
                tenants = [t for t in tenants if t == tenant]
                if not tenants:
                    continue
            queues = sorted(_s(q) for q in self.client.smembers(self.keys.queues(shard)))
            delayed: dict[str, int] = {}
            for (t, _queue), n in self.delayed_counts(shard).items():
                delayed[t] = delayed.get(t, 0) + n
            streams = [
                self.keys.q(shard, q, t, p) for t in tenants for q in queues for p in PRIORITIES
            ]
            ready = iter(self.ready_counts(streams))
            pipe = self.client.pipeline(transaction=False)
            for t in tenants:
                pipe.zcard(self.keys.tleases(shard, t))
                pipe.xlen(self.keys.dlq(shard, t))
            res = iter(pipe.execute())
            for t in tenants:
                classes = dict.fromkeys(PRIORITIES, 0)
                for _q in queues:
                    for p in PRIORITIES:
                        classes[p] += next(ready)
                load = TenantLoad(
                    tenant=t,
                    shard=shard,
                    ready=sum(classes.values()),
                    in_flight=int(next(res)),
                    delayed=delayed.get(t, 0),
                    dlq=int(next(res)),
                )
                rows.append((load, classes))
        return rows

    def delayed_counts(self, shard: int, limit: int = 10_000) -> dict[tuple[str, str], int]:
        """Delayed instances (retry waits, countdowns) per (tenant, queue) among the
        first ``limit`` timers of a shard: past that, a floor.  Two round trips."""
        timer_ids = [_s(x) for x in self.client.zrange(self.keys.timers(shard), 0, limit - 1)]
        if not timer_ids:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for iid in timer_ids:
            pipe.hmget(self.keys.ti(shard, iid), ["tenant", "queue"])
        out: dict[tuple[str, str], int] = {}
        for tenant, queue in pipe.execute():
            if tenant is not None:  # park:/brk: timers are not instances
                key = (_s(tenant), _s(queue or b""))
                out[key] = out.get(key, 0) + 1
        return out

    def ready_counts(self, streams: Sequence[str]) -> list[int]:
        """Ready entries of each ready stream: its length less the entries pending
        (leased) in its consumer group, in one round trip."""
        if not streams:
            return []
        pipe = self.client.pipeline(transaction=False)
        for key in streams:
            pipe.xlen(key)
            pipe.xpending(key, GROUP)
        replies = iter(pipe.execute(raise_on_error=False))
        out = []
        for _key in streams:
            length, pending = next(replies), next(replies)
            # a stream never created has no group: XPENDING errors, nothing is there
            held = 0 if isinstance(pending, Exception) else int(pending["pending"])
            out.append(int(length) - held)
        return out

    def stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for shard in range(self.shards):
            for k, v in self.client.hgetall(self.keys.stats(shard)).items():
                total[_s(k)] = total.get(_s(k), 0) + int(v)
        return total

    def close(self) -> None:
        self.client.close()


def fields_of(raw: Mapping[Any, Any], keep: Sequence[str] = ()) -> dict[str, str | bytes]:
    """A hash or stream entry from Redis: names as text, values as text except
    the ``keep`` fields (msgpack payloads stay bytes)."""
    out: dict[str, str | bytes] = {}
    for k, v in raw.items():
        name = _s(k)
        out[name] = v if name in keep else _s(v)
    return out


def time_ms(reply: Any) -> int:
    """A ``TIME`` reply (seconds, microseconds) in ms, as the scripts compute it."""
    sec, usec = reply
    return int(sec) * 1000 + int(usec) // 1000


def _delayed(delay_ms: Any) -> bool:
    """Is a row a countdown task (not counted against max_queued until due)?"""
    try:
        return float(delay_ms) > 0
    except (TypeError, ValueError):
        return False  # malformed: enqueue.lua refuses the row
