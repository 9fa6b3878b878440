"""The broker: every operation on Redis, one method per Lua script.

Methods take plain data and return plain data; the App and the worker build
on them.  Ids carry their shard (``<shard>-<ulid>``), so any id routes to its
hash slot without a lookup.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from redcron.broker.scripts import Scripts
from redcron.config import Settings
from redcron.errors import ConfigError, ConnectionLost, NotFound, from_script_error
from redcron.keys import Keys
from redcron.serde import text as _s

log = logging.getLogger(__name__)

#: values per task in enqueue.lua's ARGV (13 without resource requests)
ENQUEUE_FIELDS = 15
#: bounded work per script call (DESIGN §5)
MAX_BATCH = 256
MAX_MAINTENANCE = 500


_KINDS = {b"command": "command", b"container": "container", b"python": "python"}


def shard_of_id(iid: str) -> int:
    """The shard an id was created on (ids are ``<shard>-<ulid>``)."""
    head, sep, _ = iid.partition("-")
    if not sep or not head.isdigit():
        raise NotFound(f"malformed task id {iid!r}: expected '<shard>-<ulid>'")
    return int(head)


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


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """What a worker asks :meth:`Broker.lease` for (see its arguments)."""

    worker: str
    max_tasks: int
    ttl_ms: int
    queues: tuple[str, ...]
    tenants: tuple[str, ...] = ()
    capacity: tuple[float | None, int | None] = (None, None)


@dataclass(frozen=True, slots=True)
class FailItem:
    """One failed (or timed out, or cancelled) attempt to report."""

    iid: str
    epoch: str
    outcome: str  # failed | timed_out | lost | cancelled
    error: str
    retryable: bool
    delay_ms: int | None = None
    exit_code: int | None = None


class Broker:
    """All Redis operations of one deployment (one key prefix)."""

    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.client: redis.Redis = client or redis.Redis.from_url(
            settings.redis_url, health_check_interval=30
        )
        self.scripts = Scripts(self.client)
        self._shards: int | None = None
        self._names: dict[bytes | None, str] = {}

    # -- deployment ---------------------------------------------------------

    @property
    def shards(self) -> int:
        """The deployment's shard count (stored in the meta key at first use)."""
        if self._shards is None:
            self._shards = self.ensure_meta()
        return self._shards

    def ensure_meta(self, check_policy: bool = True) -> int:
        """Create the meta key if missing; refuse an evicting Redis.

        Returns the deployment's shard count (the stored one wins over settings).
        """
        if check_policy:
            self.check_eviction_policy()
        meta = self.keys.meta()
        pipe = self.client.pipeline(transaction=False)
        pipe.hsetnx(meta, "shards", self.settings.shards)
        pipe.hsetnx(meta, "lease_ttl_s", self.settings.lease_ttl)
        pipe.hsetnx(meta, "min_lease_ttl_s", self.settings.min_lease_ttl)
        pipe.hget(meta, "shards")
        shards = int(pipe.execute()[-1])
        self._shards = shards
        return shards

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

    def _run(self, name: str, shard: int, args: list[Any], client: Any = None) -> Any:
        return self.scripts.run(name, [self.keys.shard(shard)], args, client)

    # -- producing ----------------------------------------------------------

    def enqueue(self, rows: Sequence[Sequence[Any]]) -> int:
        """Create instances; each row holds the 13 enqueue.lua fields (iid first).

        Rows are grouped by shard and sent ``MAX_BATCH`` per script call, all
        calls in one pipeline (one round trip).  Each call is atomic, the
        pipeline is not: the App validates every row before sending, so a
        script refusal here (a duplicate id) is a bug, and earlier batches of
        the same pipeline stay written.
        """
        by_shard: dict[int, list[Sequence[Any]]] = {}
        for row in rows:
            by_shard.setdefault(shard_of_id(row[0]), []).append(row)
        if len(by_shard) == 1 and len(rows) <= MAX_BATCH:
            shard, chunk = next(iter(by_shard.items()))
            return int(self._run("enqueue", shard, _enqueue_args(chunk)))
        pipe = self.client.pipeline(transaction=False)
        for shard, shard_rows in by_shard.items():
            for i in range(0, len(shard_rows), MAX_BATCH):
                self._run("enqueue", shard, _enqueue_args(shard_rows[i : i + MAX_BATCH]), pipe)
        return sum(int(n) for n in self._execute(pipe))

    def _execute(self, pipe: Any) -> list[Any]:
        """Execute a pipeline; a script error becomes its exception (the first one)."""
        stack = list(pipe.command_stack)
        try:
            results: list[Any] = pipe.execute(raise_on_error=False)
            self.scripts.rerun_missing(stack, results)
        except redis.ConnectionError as exc:
            raise ConnectionLost(str(exc)) from exc
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
    ) -> list[Lease]:
        """Lease up to ``max_tasks`` ready instances from ``queues`` (optionally only
        from ``tenants``)."""
        req = LeaseRequest(worker, max_tasks, ttl_ms, tuple(queues), tuple(tenants), capacity)
        return self._leases(shard, self._run("lease", shard, self._lease_args(req)))

    def _lease_args(self, req: LeaseRequest) -> list[Any]:
        cpu, mem = req.capacity
        return [
            req.worker,
            min(req.max_tasks, MAX_BATCH),
            req.ttl_ms,
            "",
            ",".join(req.tenants),
            self.settings.dispatch_quantum,
            int(self.settings.aging * 1000),
            ""
            if req.capacity == (None, None)
            else f"{'' if cpu is None else cpu},{'' if mem is None else mem}",
            *req.queues,
        ]

    def _leases(self, shard: int, raw: Any) -> list[Lease]:
        names = self._names
        out = []
        for iid, epoch, attempt, name, kind, args, timeout_ms, tenant, cpu, mem in raw:
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
                )
            )
        return out

    def start(self, shard: int, worker: str, tokens: Iterable[tuple[str, str]]) -> int:
        return int(self._run("start", shard, _flat([worker, ""], tokens)))

    def heartbeat(
        self, shard: int, worker: str, ttl_ms: int, tokens: Iterable[tuple[str, str]]
    ) -> tuple[list[str], list[str]]:
        """Renew leases; returns (lost, revoked) instance ids."""
        lost, revoked = self._run("heartbeat", shard, _flat([worker, ttl_ms, ""], tokens))
        return [_s(x) for x in lost], [_s(x) for x in revoked]

    def complete(
        self, shard: int, worker: str, items: Sequence[tuple[str, str, bytes]]
    ) -> list[bool]:
        return [bool(x) for x in self._run("complete", shard, _flat([worker, ""], items))]

    def fail(self, shard: int, worker: str, items: Sequence[FailItem]) -> list[str | None]:
        """Report failed attempts; returns each new state, or None if the lease was lost."""
        return [
            None if x == 0 else _s(x)
            for x in self._run("fail", shard, self._fail_args(worker, items))
        ]

    @staticmethod
    def _fail_args(worker: str, items: Sequence[FailItem]) -> list[Any]:
        args: list[Any] = [worker, ""]
        for it in items:
            args += [
                it.iid,
                it.epoch,
                it.outcome,
                it.error,
                "1" if it.retryable else "0",
                "" if it.delay_ms is None else max(0, int(it.delay_ms)),
                random.random(),
                "" if it.exit_code is None else it.exit_code,
            ]
        return args

    def report(
        self,
        shard: int,
        worker: str,
        completes: Sequence[tuple[str, str, bytes]],
        fails: Sequence[FailItem],
        logs: Sequence[tuple[str, int, Sequence[str]]],
    ) -> tuple[list[bool], list[str | None]]:
        """Logs, completions and failures of one shard in one round trip.

        Logs go first so a dead-lettered attempt's DLQ entry carries its tail.
        """
        done, failed, _ = self.report_and_lease(shard, worker, completes, fails, logs, None)
        return done, failed

    def report_and_lease(
        self,
        shard: int,
        worker: str,
        completes: Sequence[tuple[str, str, bytes]],
        fails: Sequence[FailItem],
        logs: Sequence[tuple[str, int, Sequence[str]]],
        lease: LeaseRequest | None,
    ) -> tuple[list[bool], list[str | None], list[Lease]]:
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
            self._run("complete", shard, _flat([worker, ""], completes), pipe)
        if fails:
            self._run("fail", shard, self._fail_args(worker, fails), pipe)
        if lease is not None:
            self._run("lease", shard, self._lease_args(lease), pipe)
        results = self._execute(pipe)[n_logs:]
        done = [bool(x) for x in results[0]] if completes else []
        failed = (
            [None if x == 0 else _s(x) for x in results[1 if completes else 0]] if fails else []
        )
        leases = self._leases(shard, results[-1]) if lease is not None else []
        return done, failed, leases

    def release(self, shard: int, worker: str, tokens: Iterable[tuple[str, str]]) -> int:
        return int(self._run("release", shard, _flat([worker, ""], tokens)))

    # -- maintenance ----------------------------------------------------------

    def reap(self, shard: int, limit: int = MAX_MAINTENANCE) -> tuple[int, int]:
        n, nxt = self._run("reap", shard, ["", min(limit, MAX_MAINTENANCE), random.random()])
        return int(n), int(nxt)

    def promote(self, shard: int, limit: int = MAX_MAINTENANCE) -> tuple[int, int]:
        n, nxt = self._run("promote", shard, ["", min(limit, MAX_MAINTENANCE)])
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

    def maintain(self, shard: int) -> tuple[int, int]:
        """Promote due timers and reap expired leases until none are left (bounded)."""
        promoted = reaped = 0
        for _ in range(20):
            n, _nxt = self.promote(shard)
            promoted += n
            if n < MAX_MAINTENANCE:
                break
        for _ in range(20):
            n, _nxt = self.reap(shard)
            reaped += n
            if n < MAX_MAINTENANCE:
                break
        return promoted, reaped

    # -- control --------------------------------------------------------------

    def cancel(self, iid: str) -> str:
        return _s(self._run("cancel", shard_of_id(iid), [iid, ""]))

    def dlq_replay(self, iids: Sequence[str]) -> int:
        by_shard: dict[int, list[str]] = {}
        for iid in iids:
            by_shard.setdefault(shard_of_id(iid), []).append(iid)
        total = 0
        for shard, ids in by_shard.items():
            for i in range(0, len(ids), MAX_BATCH):
                total += sum(
                    int(x) for x in self._run("dlq_replay", shard, ["", *ids[i : i + 256]])
                )
        return total

    def watch(self, iid: str) -> str:
        return _s(self._run("watch", shard_of_id(iid), [iid]))

    def wait_done(self, iid: str, timeout_s: float) -> bool:
        key = self.keys.done(shard_of_id(iid), iid)
        return self.client.blpop([key], timeout=max(0.01, timeout_s)) is not None

    def wait_for_work(self, shards: Sequence[int], queues: Sequence[str], timeout_s: float) -> bool:
        """Block (≤ timeout) on the wake lists of the given queues and shards."""
        keys = [self.keys.wake(shard, q) for shard in shards for q in queues]
        return self.client.blpop(keys, timeout=max(0.01, timeout_s)) is not None

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

    def task_info(self, iid: str) -> dict[str, Any]:
        """The instance hash, decoded, with ``attempts`` parsed into a list."""
        shard = shard_of_id(iid)
        raw = self.client.hgetall(self.keys.ti(shard, iid))
        if not raw:
            raise NotFound(f"no task {iid} (never existed, or expired after its retention)")
        info: dict[str, Any] = {}
        attempts: dict[int, dict[str, str]] = {}
        for k, v in raw.items():
            key = _s(k)
            if key.startswith("a:"):
                _, n, field = key.split(":", 2)
                attempts.setdefault(int(n), {})[field] = _s(v)
            elif key in ("args", "result"):
                info[key] = v
            else:
                info[key] = _s(v)
        info["attempts"] = [{"attempt": n, **attempts[n]} for n in sorted(attempts)]
        info["shard"] = shard
        return info

    def log_lines(self, iid: str, attempt: int, count: int = 20) -> list[str]:
        key = self.keys.log(shard_of_id(iid), iid, attempt)
        entries: Any = self.client.xrevrange(key, count=count)
        return [_s(fields.get(b"line", b"")) for _eid, fields in reversed(entries)]

    def dlq_list(self, tenant: str | None = None, count: int = 100) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for shard in range(self.shards):
            tenants = (
                [tenant]
                if tenant
                else sorted(_s(t) for t in self.client.smembers(self.keys.tenants(shard)))
            )
            for t in tenants:
                entries: Any = self.client.xrange(self.keys.dlq(shard, t), count=count)
                for eid, fields in entries:
                    row = {_s(k): _s(v) for k, v in fields.items()}
                    row["entry"] = _s(eid)
                    row["tenant"] = t
                    out.append(row)
        return out

    def inspect(self) -> list[dict[str, Any]]:
        """Ready / in-flight / delayed / DLQ counts per (tenant, queue)."""
        rows: list[dict[str, Any]] = []
        for shard in range(self.shards):
            tenants = sorted(_s(t) for t in self.client.smembers(self.keys.tenants(shard)))
            queues = sorted(_s(q) for q in self.client.smembers(self.keys.queues(shard)))
            delayed: dict[str, int] = {}
            timer_ids = [_s(x) for x in self.client.zrange(self.keys.timers(shard), 0, 9_999)]
            if timer_ids:
                pipe = self.client.pipeline(transaction=False)
                for iid in timer_ids:
                    pipe.hget(self.keys.ti(shard, iid), "tenant")
                for t in pipe.execute():
                    if t is not None:
                        delayed[_s(t)] = delayed.get(_s(t), 0) + 1
            pipe = self.client.pipeline(transaction=False)
            for t in tenants:
                for q in queues:
                    for prio in ("high", "normal", "low"):
                        pipe.xlen(self.keys.q(shard, q, t, prio))
                pipe.zcard(self.keys.tleases(shard, t))
                pipe.xlen(self.keys.dlq(shard, t))
            res = iter(pipe.execute())
            for t in tenants:
                ready = sum(int(next(res)) for _q in queues for _p in range(3))
                rows.append(
                    {
                        "tenant": t,
                        "shard": shard,
                        "ready": ready,
                        "in_flight": int(next(res)),
                        "delayed": delayed.get(t, 0),
                        "dlq": int(next(res)),
                    }
                )
        return rows

    def stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for shard in range(self.shards):
            for k, v in self.client.hgetall(self.keys.stats(shard)).items():
                total[_s(k)] = total.get(_s(k), 0) + int(v)
        return total

    def close(self) -> None:
        self.client.close()


def _flat(head: list[Any], groups: Iterable[Sequence[Any]]) -> list[Any]:
    """A script's ARGV: fixed head values, then each group's values in order."""
    return [*head, *(v for group in groups for v in group)]


def _enqueue_args(rows: Sequence[Sequence[Any]]) -> list[Any]:
    args: list[Any] = ["", ENQUEUE_FIELDS]
    for row in rows:
        if len(row) == ENQUEUE_FIELDS - 2:  # no resource requests
            row = [*row, "", ""]
        if len(row) != ENQUEUE_FIELDS:
            raise ValueError(f"enqueue row needs {ENQUEUE_FIELDS} fields, got {len(row)}")
        args.extend(row)
    return args
