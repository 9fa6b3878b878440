"""The beat: owns shards through fenced leases and turns due fire times into runs.

Ownership: every beat registers in a live-beats ZSET and holds at most its
fair share ``ceil(S / live beats)`` of the shards through ``beat_own.lua``
(renewed every ``shard_ttl / 3``); shards above its share are released so a
newcomer gets some.  The fencing epoch goes to ``fire.lua``, which refuses a
beat that lost its lease (STALE), so two beats never both fire a shard.

Firing: the schedule ZSET is *read* (never popped), each job's nominal fire
time N is its ``next_fire`` field, and ``fire.lua`` compares the score and the
job version before it creates the run ``<job_id>@<N>`` and stores the next
fire time.  Each fire time is judged on its own: one overdue by at most
``catchup_window`` is fired (a failover loses nothing); only the older ones
follow the job's catch-up policy (invariant 2).  "Now" is always the Redis
server clock (invariant 8).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import signal
import socket
import threading
import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import FrameType
from typing import Any

import redis

from redcron.app import App
from redcron.beat.schedule import Trigger, fires_between, next_fire
from redcron.broker.argv import FireArgs
from redcron.broker.jobs import (
    effective_jitter_s,
    from_ms,
    jitter_ms,
    spec_from_json,
    tenant_jitter_s,
    to_ms,
)
from redcron.clock import ulid
from redcron.errors import BrokerError, ConfigError, ShardLeaseLost, from_script_error
from redcron.jobs import JobSpec
from redcron.keys import Keys
from redcron.serde import text as _s

log = logging.getLogger(__name__)

#: missed fires counted per job and pass; more are reported as this many
MISSED_LIMIT = 100_000
#: fire.lua calls for one job in one pass (a longer backlog continues next pass)
CHAIN_LIMIT = 100
#: specs of jobs due within this many ms are loaded ahead, while the beat is idle
PREFETCH_MS = 3_000
#: fires per fire_batch.lua call: amortizes the per-call cost while keeping one
#: script call short (~50 runs created, a few ms of Redis time)
FIRES_PER_CALL = 50
#: fires per pipeline round trip
PIPELINE_FIRES = 1_000
#: statuses of fire.lua that mean "this fire time is done"
_DONE = {"created", "skipped", "buffered", "exists", "skipped_all", "rejected"}
_COUNTED = {"created", "skipped", "buffered", "rejected"}
#: a tenant's default jitter_s is re-read at most this often (seconds, per tenant)
TENANT_JITTER_REFRESH_S = 5.0
TRANSIENT = (redis.RedisError, BrokerError, OSError)


def beats_key(prefix: str) -> str:
    """The live-beats ZSET (beat id -> registration expiry, ms, server clock)."""
    return Keys(prefix).beats()


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire.lua call: fire ``fire_ms`` (if the score is ``expected``), then
    schedule ``next_ms`` (None: leave the schedule) at ``next_due``."""

    expected: int
    fire_ms: int
    next_ms: int | None
    next_due: int | None
    trigger: str  # cron | catchup | skip
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class _Loaded:
    version: str
    spec: JobSpec
    trigger: Trigger
    nominal: int | None
    paused: bool


def _due(job_id: str, nominal: int | None, jitter_s: float) -> int | None:
    return None if nominal is None else nominal + jitter_ms(job_id, nominal, jitter_s)


def _end_of(ms: int) -> datetime:
    """The last instant stored as ``ms``: "after fire ``ms``" must skip its lost
    sub-millisecond part, or a one-shot at 12:00:00.5004 would come back."""
    return from_ms(ms) + timedelta(microseconds=999)


@functools.lru_cache(maxsize=65_536)
def _after(trigger: Trigger, ms: int) -> int | None:
    # memoized: jobs on the same schedule share their fire times (10,000 hourly jobs
    # compute one next fire, not 10,000)
    nxt = next_fire(trigger, _end_of(ms))
    return None if nxt is None else to_ms(nxt)


def backlog(trigger: Trigger, nominal: int, now: int, keep: int) -> tuple[list[int], int]:
    """Missed fires in ``[nominal, now]``: the latest ``keep`` of them, and how many
    there are (capped at MISSED_LIMIT for cron; exact for intervals)."""
    if trigger.kind == "every" and trigger.every is not None:
        step = max(1, int(trigger.every.total_seconds() * 1000))
        total = (now - nominal) // step + 1
        last = nominal + (total - 1) * step
        k = min(keep, total)
        return [last - (k - 1 - i) * step for i in range(k)], total
    listed = fires_between(trigger, _end_of(nominal), _end_of(now), MISSED_LIMIT - 1)
    fires = [nominal, *map(to_ms, listed)]
    if keep <= 0:
        return [], len(fires)
    if len(fires) < MISSED_LIMIT:
        return fires[-keep:], len(fires)
    # truncated: the latest fires lie past the listed ones; widen a window back from now
    span = 1_000
    while span < now - nominal:
        tail = fires_between(trigger, _end_of(now - span), _end_of(now), MISSED_LIMIT)
        if keep <= len(tail) < MISSED_LIMIT:
            return [to_ms(f) for f in tail[-keep:]], MISSED_LIMIT
        span *= 2
    return fires[-keep:], MISSED_LIMIT


def plan_fires(
    job_id: str,
    spec: JobSpec,
    trigger: Trigger,
    nominal: int,
    score: int,
    now: int,
    window_ms: int,
    tenant_jitter: float = 0.0,
) -> list[Fire]:
    """The fire.lua calls for one due job, chained oldest first (pure: ``now`` given).

    Each fire time is judged on its own (invariant 2).  One overdue by at most
    ``window_ms`` is fired ("cron"), late but never collapsed, so a beat failover
    loses nothing.  The older ones (real downtime) follow the job's policy:
    ``latest`` fires the newest of them, ``all`` the newest ``catchup_limit``
    ("catchup"), ``none`` nothing ("skip"); every fire left out is counted as
    skipped.  Next due times use the job's ``jitter_s``, or ``tenant_jitter``
    (the tenant's default) when the job has none.  At most CHAIN_LIMIT calls:
    the schedule then holds the next fire and the next pass goes on from it.
    """
    jitter = effective_jitter_s(spec, tenant_jitter)
    if now - nominal <= window_ms:
        return _chain(job_id, trigger, jitter, score, nominal, now, [])
    # fires at or before old_end are overdue by more than the window
    old_end = now - window_ms - 1
    policy = spec.catchup if spec.catchup in ("all", "none") else "latest"
    keep = {"latest": 1, "all": spec.catchup_limit, "none": 0}[policy]
    kept, total = backlog(trigger, nominal, old_end, keep)
    # the first fire inside the window (or, if none is, the first one still to come)
    recent = _after(trigger, old_end)
    if not kept:
        calls = [Fire(score, nominal, recent, _due(job_id, recent, jitter), "skip", total)]
    else:
        calls = []
        expected = score
        for i, fire_ms in enumerate(kept):
            nxt = kept[i + 1] if i + 1 < len(kept) else recent
            nxt_due = _due(job_id, nxt, jitter)
            skipped = total - len(kept) if i == 0 else 0
            calls.append(Fire(expected, fire_ms, nxt, nxt_due, "catchup", skipped))
            if nxt_due is None or len(calls) >= CHAIN_LIMIT:
                return calls
            expected = nxt_due
    last = calls[-1]
    if last.next_ms is None or last.next_due is None or last.next_due > now:
        return calls
    return _chain(job_id, trigger, jitter, last.next_due, last.next_ms, now, calls)


def _chain(
    job_id: str,
    trigger: Trigger,
    jitter: float,
    expected: int,
    n: int,
    now: int,
    calls: list[Fire],
) -> list[Fire]:
    """Append "cron" fires from fire ``n`` (at score ``expected``) on, while they are
    due, up to CHAIN_LIMIT calls in all; returns ``calls``."""
    while len(calls) < CHAIN_LIMIT:
        nxt = _after(trigger, n)
        nxt_due = _due(job_id, nxt, jitter)
        calls.append(Fire(expected, n, nxt, nxt_due, "cron"))
        if nxt is None or nxt_due is None or nxt_due > now:
            break
        expected, n = nxt_due, nxt
    return calls


class Beat:
    """A beat process: owns shards, fires what is due, runs promote/reap.

    Args:
        app: the App (its settings name the deployment).
        name: beat id (unique per process; default ``host:pid:random``).
        shard_ttl: seconds a shard lease lives unrenewed (renewed every third).
        catchup_window: fires overdue by at most this many seconds are all fired;
            must be longer than ``shard_ttl`` so that a failover loses nothing.
        batch: schedule entries read per round trip.
        apply_declared: upsert the App's ``@app.cron`` jobs on start.
    """

    def __init__(
        self,
        app: App,
        *,
        name: str | None = None,
        shard_ttl: float = 10.0,
        catchup_window: float = 60.0,
        batch: int = 500,
        apply_declared: bool = True,
    ) -> None:
        # not (x > 0) rather than x <= 0: NaN fails every comparison
        if not (math.isfinite(shard_ttl) and shard_ttl > 0):
            raise ConfigError(f"shard_ttl: {shard_ttl!r} must be a finite number of seconds > 0")
        if not math.isfinite(catchup_window):
            raise ConfigError(f"catchup_window: {catchup_window!r} must be a finite number")
        if catchup_window <= shard_ttl:
            raise ConfigError(
                f"catchup_window: {catchup_window}s must be longer than shard_ttl {shard_ttl}s "
                "(a failover would otherwise collapse fires)"
            )
        if batch < 1:
            raise ConfigError("batch: must be >= 1")
        self.app = app
        self.id = name or f"{socket.gethostname()}:{os.getpid()}:{ulid()[-6:]}"
        self.ttl_ms = int(shard_ttl * 1000)
        self.window_ms = int(catchup_window * 1000)
        self.batch = batch
        self.apply_declared = apply_declared
        self._owned: dict[int, str] = {}  # shard -> fencing epoch
        self._specs: dict[str, tuple[str, JobSpec | None, Trigger | None]] = {}
        # job -> (due score, nominal, version) this beat stored at its last fire: a
        # job found at that score needs no read of its hash
        self._known: dict[str, tuple[int, int, str]] = {}
        # (shard, tenant) -> (default jitter_s, monotonic time read): re-read at most
        # every TENANT_JITTER_REFRESH_S, so a changed setting applies within seconds
        self._tenant_jitter: dict[tuple[int, str], tuple[float, float]] = {}
        # tenants seen with a default jitter: their jobs' scores may be jittered even
        # after the default went back to 0, so the score is never taken as nominal
        self._jittered: set[tuple[int, str]] = set()
        self._next_round = 0
        self._live = 0
        self._started = False
        self._busy = False
        self._stop = threading.Event()
        self._sender: ThreadPoolExecutor | None = None

    @property
    def owned(self) -> dict[int, str]:
        """Shards this beat holds, with their fencing epochs."""
        return dict(self._owned)

    # -- public ---------------------------------------------------------------

    def run(self) -> None:
        """Tick until :meth:`stop` (or SIGTERM/SIGINT on the main thread); then
        release the shards so another beat takes them at once."""
        old: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                old[sig] = signal.signal(sig, self._on_signal)
        log.info("beat %s starting (shard ttl %.1fs)", self.id, self.ttl_ms / 1000)
        try:
            while not self._stop.is_set():
                try:
                    self.tick()
                    delay = 0.0 if self._busy else self._idle_delay()
                except TRANSIENT as exc:
                    log.warning("beat %s: redis unavailable (%s); retrying", self.id, exc)
                    delay = 1.0
                self._stop.wait(delay)
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
            self.close()
            log.info("beat %s stopped", self.id)

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        """Release owned shards and leave the live-beats registry (best effort)."""
        broker = self.app.broker
        try:
            for shard in list(self._owned):
                broker.beat_own(shard, self.id, self.ttl_ms, "release")
            broker.client.zrem(beats_key(self.app.settings.prefix), self.id)
        except TRANSIENT as exc:
            log.warning("beat %s: could not release shards (%s); they expire", self.id, exc)
        self._owned.clear()
        if self._sender is not None:
            self._sender.shutdown()
            self._sender = None
        self._live = 0
        self._next_round = 0

    def tick(self) -> int:
        """One pass: ownership round (when due), fire what is due, maintenance.

        Returns the number of fires that created (or recorded) a run.
        """
        if not self._started:
            if self.apply_declared and self.app.declared_jobs:
                self.app.apply_declared()
            self._started = True
        self._busy = False
        now = self._server_ms()
        self._ownership(now)
        budget = time.monotonic() + self.ttl_ms / 4000
        fired = 0
        for shard in sorted(self._owned):
            fired += self._fire_shard(shard, now, budget)
        self._maintain()
        if not self._busy:
            for shard in sorted(self._owned):
                self._prefetch(shard, now)
        return fired

    # -- ownership -------------------------------------------------------------

    def _server_ms(self) -> int:
        sec, usec = self.app.broker.client.time()
        return int(sec) * 1000 + int(usec) // 1000

    def _own(self, mode: str, shards: list[int]) -> list[tuple[int, int, str]]:
        broker = self.app.broker
        pipe = broker.client.pipeline(transaction=False)
        for shard in shards:
            broker.beat_own(shard, self.id, self.ttl_ms, mode, pipe=pipe)
        return [
            (shard, int(ok), _s(epoch))
            for shard, (ok, epoch, _owner) in zip(shards, broker._execute(pipe), strict=True)
        ]

    def _ownership(self, now: int) -> None:
        broker = self.app.broker
        key = beats_key(self.app.settings.prefix)
        pipe = broker.client.pipeline(transaction=False)
        pipe.zadd(key, {self.id: now + self.ttl_ms})
        pipe.zremrangebyscore(key, "-inf", now)
        pipe.zcard(key)
        live = max(1, int(pipe.execute()[-1]))
        total = broker.shards
        share = math.ceil(total / live)
        if now < self._next_round and live == self._live and len(self._owned) <= share:
            return
        self._next_round, self._live = now + self.ttl_ms // 3, live
        for shard, ok, epoch in self._own("renew", sorted(self._owned)):
            if ok:
                self._owned[shard] = epoch
            else:
                log.warning("beat %s lost shard %d (lease expired or taken over)", self.id, shard)
                del self._owned[shard]
        # start where this beat's id points, so beats starting together spread out
        start = zlib.crc32(self.id.encode()) % total
        order = [(start + i) % total for i in range(total)]
        mine = [s for s in order if s in self._owned]
        if len(mine) > share:
            extra = mine[share:]
            self._own("release", extra)
            for shard in extra:
                del self._owned[shard]
            log.info("beat %s released shards %s (fair share %d)", self.id, extra, share)
        free = [s for s in order if s not in self._owned]
        while free and len(self._owned) < share:
            chunk, free = free[: share - len(self._owned)], free[share - len(self._owned) :]
            for shard, ok, epoch in self._own("acquire", chunk):
                if ok:
                    self._owned[shard] = epoch
                    log.info("beat %s owns shard %d (epoch %s)", self.id, shard, epoch)

    def _drop(self, shard: int) -> None:
        if self._owned.pop(shard, None) is not None:
            log.warning("beat %s: shard %d is fenced off (stale epoch); dropped", self.id, shard)
            self._next_round = 0

    # -- firing ------------------------------------------------------------------

    def _fire_shard(self, shard: int, now: int, budget: float) -> int:
        """Fire the due jobs of one shard, a page of ``batch`` schedule rows at a time.

        The fires of one page are sent by the sender thread while this one reads
        and plans the next, so Redis and Python work at the same time.  Jobs in
        flight are skipped by id when the next page is read (their fire may not
        have landed yet); a fire planned twice would only come back ``stale``.
        """
        client = self.app.broker.client
        sched = self.app.broker.keys.schedule(shard)
        fired = 0
        flight: Future[list[Any]] | None = None
        flying: list[tuple[str, str, Fire]] = []
        while True:
            busy = {jid for jid, _, _ in flying}
            rows: list[Any] = client.zrangebyscore(
                sched, "-inf", now, start=0, num=self.batch + len(busy), withscores=True
            )
            last = len(rows) < self.batch + len(busy) or time.monotonic() > budget
            due = [(jid, int(score)) for jid, score in ((_s(m), sc) for m, sc in rows)]
            calls = self._plan(shard, [row for row in due if row[0] not in busy], now)
            if flight is not None:
                fired += self._settle(shard, flying, flight.result())
            if not calls or shard not in self._owned:
                break
            if self._sender is None:
                self._sender = ThreadPoolExecutor(1, thread_name_prefix="redcron-beat-send")
            flight = self._sender.submit(self._send, shard, self._owned[shard], calls)
            flying = calls
            if last:
                fired += self._settle(shard, flying, flight.result())
                break
        self._busy = self._busy or time.monotonic() > budget
        return fired

    def _load(self, shard: int, rows: list[tuple[str, int]]) -> list[_Loaded | None]:
        """Version, spec, trigger and next_fire of each due job (None: no job, or no
        readable spec).  Parsed specs are cached by (job id, version); a job at the
        score this beat stored is not read at all.  The default jitter of the jobs'
        tenants is refreshed (at most every TENANT_JITTER_REFRESH_S) in the same
        round trips."""
        out: list[_Loaded | None] = [None] * len(rows)
        cold: list[int] = []
        mono = time.monotonic()
        stale: set[str] = set()  # tenants whose default jitter is read with this page

        def fresh(tenant: str) -> bool:
            got = self._tenant_jitter.get((shard, tenant))
            if got is None or mono - got[1] >= TENANT_JITTER_REFRESH_S:
                stale.add(tenant)
                return False
            return True

        for i, (jid, score) in enumerate(rows):
            known, cached = self._known.get(jid), self._specs.get(jid)
            if known and cached and known[0] == score and cached[0] == known[2] and cached[1]:
                assert cached[2] is not None
                fresh(cached[1].tenant)  # the nominal is known; the jitter is for the next
                out[i] = _Loaded(known[2], cached[1], cached[2], known[1], False)
            elif (
                score >= 0
                and cached
                and cached[1]
                and cached[2]
                and not cached[1].jitter_s
                and (shard, cached[1].tenant) not in self._jittered
                and fresh(cached[1].tenant)
            ):
                # without jitter (the job's or its tenant's) the due score is the
                # nominal fire time; the cached version and the score are
                # compare-and-set by fire.lua (a changed job answers 'version', a
                # moved score 'stale'), so no read is needed
                out[i] = _Loaded(cached[0], cached[1], cached[2], score, False)
            else:
                cold.append(i)
        if not cold and not stale:
            return out
        broker = self.app.broker
        pipe = broker.client.pipeline(transaction=False)
        for i in cold:
            pipe.hmget(
                broker.keys.job(shard, rows[i][0]), "version", "next_fire", "paused", "tenant"
            )
        asked = sorted(stale)
        for tenant in asked:
            pipe.hget(broker.keys.tenant(shard, tenant), "jitter_s")
        res = pipe.execute()
        heads = dict(zip(cold, res[: len(cold)], strict=True))
        self._tenants_read(shard, asked, res[len(cold) :], mono)
        missing = [
            (rows[i][0], _s(h[0]))
            for i, h in heads.items()
            if h[0] is not None and self._specs.get(rows[i][0], ("",))[0] != _s(h[0])
        ]
        # tenants of jobs read cold (new jobs among them) whose default jitter is unknown
        cold_tenants = {_s(h[3]) for h in heads.values() if h[0] is not None and h[3]}
        unknown = sorted(t for t in cold_tenants if not fresh(t))
        if missing or unknown:
            pipe = broker.client.pipeline(transaction=False)
            for jid, _v in missing:
                pipe.hget(broker.keys.job(shard, jid), "spec")
            for tenant in unknown:
                pipe.hget(broker.keys.tenant(shard, tenant), "jitter_s")
            if len(self._specs) > 200_000:
                self._specs.clear()
                self._known.clear()
            res = pipe.execute()
            self._tenants_read(shard, unknown, res[len(missing) :], mono)
            for (jid, version), text in zip(missing, res[: len(missing)], strict=True):
                try:
                    parsed = spec_from_json(_s(text))
                    self._specs[jid] = (version, parsed, parsed.trigger())
                except Exception as exc:  # a spec we cannot read must not stop the others
                    log.error("job %s: unreadable spec (%s); not fired", jid, exc)
                    self._specs[jid] = (version, None, None)
        for i, (version, nf, paused, _tenant) in heads.items():
            _v, spec, trigger = self._specs.get(rows[i][0], ("", None, None))
            if version is None or spec is None or trigger is None:
                continue
            nominal = int(_s(nf)) if nf not in (None, b"", "") else None
            out[i] = _Loaded(_s(version), spec, trigger, nominal, _s(paused or b"") == "1")
        return out

    def _tenants_read(self, shard: int, tenants: list[str], values: list[Any], at: float) -> None:
        """Record the default jitter read for each tenant (at monotonic time ``at``)."""
        for tenant, raw in zip(tenants, values, strict=True):
            jitter = tenant_jitter_s(raw)
            self._tenant_jitter[shard, tenant] = (jitter, at)
            if jitter > 0:
                self._jittered.add((shard, tenant))

    def _tenant_jitter_of(self, shard: int, tenant: str) -> float:
        """The tenant's default jitter as last read (0 if never read)."""
        got = self._tenant_jitter.get((shard, tenant))
        return 0.0 if got is None else got[0]

    def _prefetch(self, shard: int, now: int) -> None:
        """Load the specs of jobs due soon (up to ``10 * batch`` a tick), so that a
        burst of fires finds them parsed."""
        sched = self.app.broker.keys.schedule(shard)
        ids = self.app.broker.client.zrangebyscore(
            sched, now, now + PREFETCH_MS, start=0, num=40 * self.batch
        )
        todo = [(jid, -1) for jid in map(_s, ids) if jid not in self._specs]
        for i in range(0, min(len(todo), 10 * self.batch), self.batch):
            self._load(shard, todo[i : i + self.batch])

    def _plan(
        self, shard: int, rows: list[tuple[str, int]], now: int
    ) -> list[tuple[str, str, Fire]]:
        """The fire.lua calls (job id, version, fire) for due schedule rows."""
        calls: list[tuple[str, str, Fire]] = []
        for (jid, score), job in zip(rows, self._load(shard, rows), strict=True):
            if job is None or job.paused:
                continue
            # no nominal recorded: the score is our best knowledge
            nominal = score if job.nominal is None else job.nominal
            tenant_jitter = self._tenant_jitter_of(shard, job.spec.tenant)
            for fire in plan_fires(
                jid, job.spec, job.trigger, nominal, score, now, self.window_ms, tenant_jitter
            ):
                calls.append((jid, job.version, fire))
        return calls

    def _send(self, shard: int, epoch: str, calls: list[tuple[str, str, Fire]]) -> list[Any]:
        """Send the fires, ``FIRES_PER_CALL`` per fire_batch.lua call and those calls
        pipelined (runs in the sender thread).  One result per call, in order; a
        refused batch (STALE) yields its error for each of its fires."""
        broker = self.app.broker
        out: list[Any] = []
        for i in range(0, len(calls), PIPELINE_FIRES):
            pipe = broker.client.pipeline(transaction=False)
            chunks = []
            page = calls[i : i + PIPELINE_FIRES]
            for j in range(0, len(page), FIRES_PER_CALL):
                chunk = page[j : j + FIRES_PER_CALL]
                broker.fire_batch(
                    shard,
                    [
                        FireArgs(jid, f.expected, version, f.fire_ms, f.next_ms, f.next_due,
                                 epoch, f.trigger, f.skipped, f"{jid}@{f.fire_ms}")
                        for jid, version, f in chunk
                    ],
                    pipe=pipe,
                )  # fmt: skip
                chunks.append(len(chunk))
            for n, res in zip(chunks, broker.execute(pipe), strict=True):
                out += [res] * n if isinstance(res, redis.ResponseError) else list(res)
        return out

    def _settle(self, shard: int, calls: list[tuple[str, str, Fire]], results: list[Any]) -> int:
        """Account for fire.lua results; returns the fires done.  Any progress
        makes the beat tick again at once (a chain may have more due)."""
        fired = 0
        for (jid, version, f), res in zip(calls, results, strict=True):
            if isinstance(res, redis.ResponseError):
                if isinstance(from_script_error(str(res)), ShardLeaseLost):
                    self._drop(shard)
                    break
                log.warning("job %s: fire %d failed: %s", jid, f.fire_ms, res)
                continue
            status = _s(res[0])
            if status in _DONE:
                self._busy = True
                if f.next_ms is not None and f.next_due is not None:
                    self._known[jid] = (f.next_due, f.next_ms, version)
                fired += status in _COUNTED
                log.info("job %s fire %d (%s): %s", jid, f.fire_ms, f.trigger, status)
            elif status == "version":
                self._specs.pop(jid, None)
                self._known.pop(jid, None)
        return fired

    # -- maintenance and idling --------------------------------------------------

    def _maintain(self) -> None:
        broker = self.app.broker
        interval = self.app.settings.maintenance_interval
        for shard in list(self._owned):
            if broker.try_maintenance_lock(shard, self.id, interval):
                broker.maintain(shard)

    def _idle_delay(self) -> float:
        """Seconds until the earliest due score of an owned shard, the next
        ownership round, or 1 s, whichever comes first (server clock)."""
        client = self.app.broker.client
        pipe = client.pipeline(transaction=False)
        pipe.time()
        shards = sorted(self._owned)
        for shard in shards:
            pipe.zrange(self.app.broker.keys.schedule(shard), 0, 0, withscores=True)
        res = pipe.execute()
        sec, usec = res[0]
        now = int(sec) * 1000 + int(usec) // 1000
        wake = min(now + 1000, self._next_round)
        for head in res[1:]:
            if head:
                wake = min(wake, int(head[0][1]))
        # a due entry that made no progress (version change, unreadable spec)
        # is retried at the next round or second, not in a busy loop
        if wake <= now:
            wake = min(now + 1000, max(self._next_round, now + 50))
        return max(0.0, (wake - now) / 1000)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("beat %s: signal %d, stopping", self.id, signum)
        self.stop()
