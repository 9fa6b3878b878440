"""The lease protocol: ``lease``, ``start``, ``heartbeat``, ``progress``, ``complete``,
``fail`` and ``release`` (one ``lua/<name>.lua`` each), the pipelined
report-and-lease of a busy worker, and the wake lists an idle one blocks on.

The rows a worker gets and gives are here too: :class:`Lease` (one leased
attempt), :class:`LeaseRequest`, :class:`FailResult`; what it reports is
:class:`~redcron.engine.argv.FailItem` and ``(iid, epoch, result)`` triples.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import redis

from redcron.engine import argv
from redcron.engine.argv import FailItem
from redcron.engine.connection import is_cluster
from redcron.engine.core import MAX_BATCH, Core
from redcron.errors import NotReplicated, RedcronError
from redcron.keys import WAKE_MAX
from redcron.model.dedupe import ONCE
from redcron.model.progress import Pending
from redcron.serde import text as _s

log = logging.getLogger(__name__)

_KINDS = {b"command": "command", b"container": "container", b"python": "python"}

#: lease.lua's reply row, in order: only :meth:`Leases._leases` reads one
LEASE_REPLY = ("iid", "epoch", "attempt", "name", "kind", "args", "timeout_ms", "tenant",
               "cpu", "mem", "queue", "max_attempts", "error_classes", "traceparent",
               "tracestate")  # fmt: skip
#: the fields a reply row cannot lack (text the Lease needs)
_REQUIRED = tuple(LEASE_REPLY.index(f) for f in ("iid", "name", "tenant", "queue"))
_WIDTH = len(LEASE_REPLY)

#: on a cluster, how long an idle worker blocks on one shard's wake lists before
#: it sweeps every shard's again: the longest a wake-up on another shard waits
CLUSTER_WAKE_SLICE_S = 0.1

#: a completion to report: (iid, epoch, msgpack result)
Completion = tuple[str, str, bytes]
#: an attempt's progress to store: (iid, epoch, what its coalescer hands out)
ProgressItem = tuple[str, str, Pending]
#: captured output to append: (iid, attempt, lines)
LogLines = tuple[str, int, Sequence[str]]


# not frozen: a frozen dataclass sets each of its 16 fields through
# object.__setattr__, 1.6 µs a lease against 0.2 µs (issue 33: a fifth of the
# report-and-lease's own CPU in the drain's profile); nothing writes to a Lease
@dataclass(slots=True)
class Lease:
    """One leased attempt, as handed to a worker (treat it as read-only)."""

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
    #: the call's retry_on/permanent_on (model/error_classes.py, JSON; "": its task's)
    error_classes: str = ""
    #: the W3C trace context the instance carries ("" = none: redcron/tracing.py)
    traceparent: str = ""
    tracestate: str = ""


@dataclass(frozen=True, slots=True)
class FailResult:
    """What reporting one failed attempt did to its task."""

    #: the task's new state (retry_wait, ready, dead, cancelled); None: the lease
    #: was lost and nothing was written
    state: str | None
    #: a retry: ms until the next attempt may run (0: ready at once); else None
    retry_in_ms: int | None = None


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """What a worker asks :meth:`Leases.lease` for (see its arguments)."""

    worker: str
    max_tasks: int
    ttl_ms: int
    queues: tuple[str, ...]
    tenants: tuple[str, ...] = ()
    capacity: tuple[float | None, int | None] = (None, None)
    #: the task names the worker registered: an instance of another task is not
    #: leased to it but left ready (None: any task, as for an HTTP worker)
    tasks: frozenset[str] | None = None


# The results below are NamedTuples, not dataclasses: callers written against
# the bare tuples these methods returned (``lost, revoked = heartbeat(...)``)
# keep working, and new code reads them by name.


class Heartbeat(NamedTuple):
    """What renewing a worker's leases found."""

    #: leases that are no longer this worker's (expired and reaped, or stale)
    lost: list[str]
    #: leases renewed but cancelled: the worker kills the attempt
    revoked: list[str]


class Reported(NamedTuple):
    """What reporting a batch of ended attempts did."""

    #: one per completion: recorded (False: the lease was lost)
    done: list[bool]
    failed: list[FailResult]


class ReportedAndLeased(NamedTuple):
    """:class:`Reported`, and the leases taken in the same round trip."""

    done: list[bool]
    failed: list[FailResult]
    leases: list[Lease]
    #: task names the lease left ready because the worker has not registered them
    unregistered: list[str]


def _fail_results(raw: Any) -> list[FailResult]:
    """fail.lua's reply: one {state or 0, retry_in_ms or -1} per failure."""
    return [
        FailResult(None if state == 0 else _s(state), None if delay < 0 else int(delay))
        for state, delay in raw
    ]


class Leases:
    """A worker's side of the lease protocol, on one deployment."""

    def __init__(self, core: Core) -> None:
        self.core = core
        #: decoded task, tenant and queue names: they repeat from lease to lease
        self._names: dict[bytes | None, str] = {}
        #: the shard an idle worker on a cluster blocks on next (_wait_cluster)
        self._turn = 0

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
        tasks: Iterable[str] | None = None,
    ) -> list[Lease]:
        """Lease up to ``max_tasks`` ready instances from ``queues`` (optionally only
        from ``tenants``; only of ``tasks`` when given: the others stay ready)."""
        req = LeaseRequest(
            worker,
            max_tasks,
            ttl_ms,
            tuple(queues),
            tuple(tenants),
            capacity,
            None if tasks is None else frozenset(tasks),
        )
        return self._leases(shard, self.core._run("lease", shard, self._lease_args(req, now)))

    def _lease_args(self, req: LeaseRequest, now: int | None = None) -> list[Any]:
        settings = self.core.settings
        return argv.lease(
            req.worker,
            min(req.max_tasks, MAX_BATCH),
            req.ttl_ms,
            req.queues,
            tenants=req.tenants,
            quantum=settings.dispatch_quantum,
            aging_ms=int(settings.aging * 1000),
            capacity=req.capacity,
            metrics=settings.metrics,
            tasks=req.tasks,
            now=now,
        )

    def _leases(self, shard: int, raw: Any, unregistered: list[str] | None = None) -> list[Lease]:
        """lease.lua's reply (rows laid out as :data:`LEASE_REPLY`) as leases; the
        names of the tasks it left ready for want of registration (``{name}``
        rows) go to ``unregistered`` when given."""
        names, width = self._names, _WIDTH
        i_iid, i_name, i_tenant, i_queue = _REQUIRED
        out = []
        for row in raw:
            if len(row) == 1:
                if unregistered is not None:
                    unregistered.append(_s(row[0]))
                continue
            if len(row) != width or not (
                row[i_iid] and row[i_name] and row[i_tenant] and row[i_queue]
            ):
                # a safety net: lease.lua hands no row it cannot fill (a hash edited
                # by hand goes to the DLQ via promote, lib/malformed.lua), but one
                # bad row must not drop the whole batch
                what = row[0].decode(errors="replace") if row and row[0] else "?"
                log.warning(
                    "skipping malformed lease of %s (a field is missing or not a number); "
                    "fix or delete the instance hash",
                    self.core.keys.ti(shard, what),
                )
                continue
            iid, epoch, attempt, name, kind, args, timeout_ms, tenant = row[:8]
            cpu, mem, queue, last, ec, tp, ts = row[8:]  # tp, ts: the trace context (tracing.py)
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
                    ec.decode() if ec else "",
                    tp.decode() if tp else "",
                    ts.decode() if ts else "",
                )
            )
        return out

    def start(
        self, shard: int, worker: str, tokens: Iterable[tuple[str, str]], now: int | None = None
    ) -> int:
        return int(self.core._run("start", shard, argv.tokens(worker, tokens, now)))

    def heartbeat(
        self,
        shard: int,
        worker: str,
        ttl_ms: int,
        tokens: Iterable[tuple[str, str]],
        now: int | None = None,
    ) -> Heartbeat:
        """Renew leases; returns the lost and the revoked instance ids."""
        lost, revoked = self.core._run(
            "heartbeat", shard, argv.heartbeat(worker, ttl_ms, tokens, now)
        )
        return Heartbeat([_s(x) for x in lost], [_s(x) for x in revoked])

    def heartbeat_many(
        self, calls: Sequence[tuple[int, str, int, Sequence[tuple[str, str]]]]
    ) -> list[Heartbeat]:
        """:meth:`heartbeat` for many (shard, worker, ttl_ms, tokens), in one round
        trip: still one script call each, as each worker's own would be (the
        simulated workers of ``redcron bench leases``)."""
        core = self.core
        pipe = core.client.pipeline(transaction=False)
        for shard, worker, ttl_ms, tokens in calls:
            core._run("heartbeat", shard, argv.heartbeat(worker, ttl_ms, tokens), pipe)
        return [
            Heartbeat([_s(x) for x in lost], [_s(x) for x in revoked])
            for lost, revoked in core._execute(pipe)
        ]

    def progress(
        self, shard: int, worker: str, items: Sequence[ProgressItem], now: int | None = None
    ) -> list[bool]:
        """Store running attempts' progress (``progress.lua``): per item, whether its
        token held (False: a stale lease, nothing written)."""
        if not items:
            return []
        return [
            bool(x) for x in self.core._run("progress", shard, argv.progress(worker, items, now))
        ]

    def complete(
        self, shard: int, worker: str, items: Sequence[Completion], now: int | None = None
    ) -> list[bool]:
        run = self.core._run
        return [bool(x) for x in run("complete", shard, argv.complete(worker, items, now))]

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
        return _fail_results(self.core._run("fail", shard, argv.fail(worker, items, now, jitter)))

    def report(
        self,
        shard: int,
        worker: str,
        completes: Sequence[Completion],
        fails: Sequence[FailItem],
        logs: Sequence[LogLines],
        now: int | None = None,
    ) -> Reported:
        """Logs, completions and failures of one shard in one round trip.

        Logs go first so a dead-lettered attempt's DLQ entry carries its tail.
        """
        got = self.report_and_lease(shard, worker, completes, fails, logs, None, now)
        return Reported(got.done, got.failed)

    def report_and_lease(
        self,
        shard: int,
        worker: str,
        completes: Sequence[Completion],
        fails: Sequence[FailItem],
        logs: Sequence[LogLines],
        lease: LeaseRequest | None,
        now: int | None = None,
    ) -> ReportedAndLeased:
        """:meth:`report`, then (``lease`` given) :meth:`lease`, in one round trip.

        A busy worker reports the batch that just ended and takes the next one
        in the same pipeline: half the round trips, and the leases see the slots
        and cap room the reports gave back.  Each script is atomic on its own;
        the lease runs after the reports, as two separate calls would.
        """
        core = self.core
        pipe = core.client.pipeline(transaction=False)
        self.append_logs(shard, logs, pipe)
        n_logs = len(pipe.command_stack)
        if completes:
            core._run("complete", shard, argv.complete(worker, completes, now), pipe)
        if fails:
            core._run("fail", shard, argv.fail(worker, fails, now), pipe)
        if lease is not None:
            core._run("lease", shard, self._lease_args(lease, now), pipe)
        try:
            results = core._execute(pipe)[n_logs:]
        except NotReplicated as exc:
            # the reports are retried; the leases this pipeline took go back at once
            # (not used: a retried report must not wait behind them)
            if lease is not None:
                self._hand_back_leases(shard, worker, (exc.results or [None])[-1])
            raise
        done = [bool(x) for x in results[0]] if completes else []
        failed = _fail_results(results[1 if completes else 0]) if fails else []
        unregistered: list[str] = []
        leases = self._leases(shard, results[-1], unregistered) if lease is not None else []
        return ReportedAndLeased(done, failed, leases, unregistered)

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
        return int(self.core._run("release", shard, argv.tokens(worker, tokens, now)))

    def append_logs(self, shard: int, items: Sequence[LogLines], pipe: Any = None) -> None:
        """Append captured lines to per-attempt log streams (capped, expiring)."""
        if not items:
            return
        core = self.core
        p = pipe if pipe is not None else core.client.pipeline(transaction=False)
        cap = core.settings.log_max_lines
        for iid, attempt, lines in items:
            key = core.keys.log(shard, iid, attempt)
            for line in lines:
                p.xadd(key, {"line": line}, maxlen=cap, approximate=True)
            p.expire(key, core.settings.result_ttl)
        if pipe is None:
            p.execute()

    def once(self, shard: int, tenant: str, key: str, ttl_s: int) -> bool:
        """Record an attempt's effect; True only for the first caller (SET NX).
        Under ``tenant``'s name (``dedupe:<tenant>:once:<key>``): a tenant's task
        reaches only its own tenant's records, whatever key it gives."""
        record = self.core.keys.dedupe(shard, tenant, ONCE, key)
        return bool(self.core.client.set(record, "1", nx=True, ex=ttl_s))

    def wait_for_work(
        self,
        shards: Sequence[int],
        queues: Sequence[str],
        timeout_s: float,
        pass_on: Callable[[], bool] | None = None,
    ) -> bool:
        """Block (≤ timeout) on the wake lists of the given queues and shards.

        One server: one ``BLPOP`` over every list.  A cluster refuses a
        ``BLPOP`` over keys of several slots (each shard is a slot), so there it
        is :meth:`_wait_cluster`.

        ``pass_on`` is asked once a wake-up came: True puts it back on its list
        for another idle worker, as the caller will not lease (its client left).
        """
        client, keys = self.core.client, self.core.keys
        by_shard = [[keys.wake(shard, q) for q in queues] for shard in shards]
        if is_cluster(client):
            got = self._wait_cluster(by_shard, timeout_s)
        else:
            wake = [key for shard_keys in by_shard for key in shard_keys]
            one = client.blpop(wake, timeout=max(0.01, timeout_s))
            got = [] if one is None else [one]
        if got and pass_on is not None and pass_on():
            pipe = client.pipeline(transaction=False)
            for key, token in got:
                pipe.lpush(key, token)
                pipe.ltrim(key, 0, WAKE_MAX - 1)  # the bound lib/rings.lua's wake() keeps
            pipe.execute()
        return bool(got)

    def _wait_cluster(self, by_shard: list[list[str]], timeout_s: float) -> list[Any]:
        """Wait for a wake-up on a cluster: the tokens taken, [] at the timeout.

        Each round first sweeps every wake list with a non-blocking ``LPOP``
        (one pipeline: one round trip per master, all masters written before any
        is read), so a wake-up on any shard is seen within a round; then blocks
        up to :data:`CLUSTER_WAKE_SLICE_S` in a ``BLPOP`` on the lists of one
        shard (one slot), the next shard each round, on the client's pool: no
        connection per shard.  A worker that took tokens of several shards
        leases on all of them next, so none is wasted.
        """
        client = self.core.client
        flat = [key for shard_keys in by_shard for key in shard_keys]
        deadline = time.monotonic() + timeout_s
        while True:
            pipe = client.pipeline(transaction=False)
            for key in flat:
                pipe.lpop(key)
            got = [(k, t) for k, t in zip(flat, pipe.execute(), strict=True) if t is not None]
            left = deadline - time.monotonic()
            if got or left <= 0:
                return got
            self._turn = (self._turn + 1) % len(by_shard)
            one = client.blpop(
                by_shard[self._turn], timeout=max(0.01, min(left, CLUSTER_WAKE_SLICE_S))
            )
            if one is not None:
                return [one]
