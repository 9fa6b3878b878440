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
from types import FrameType
from typing import Any

from redcron.app import App
from redcron.beat import parking
from redcron.broker.argv import FireArgs
from redcron.broker.beat import BeatStore, Park, ShardClaim
from redcron.broker.jobs import spec_from_json
from redcron.broker.retry import TRANSIENT, Backoff, ErrorReply, Outage
from redcron.clock import ulid
from redcron.errors import ConfigError, ShardLeaseLost, from_script_error
from redcron.keys import Keys
from redcron.model.jobs import JobSpec
from redcron.model.serialize import iso
from redcron.redact import masked_url
from redcron.schedule.jitter import tenant_jitter_s
from redcron.schedule.plan import Fire, plan_fires
from redcron.schedule.timeutil import from_ms
from redcron.schedule.triggers import Trigger
from redcron.serde import text as _s

log = logging.getLogger(__name__)

#: specs of jobs due within this many ms are loaded ahead, while the beat is idle
PREFETCH_MS = 3_000
#: statuses of fire.lua that mean "this fire time is done"
_DONE = {"created", "skipped", "buffered", "exists", "skipped_all", "rejected"}
_COUNTED = {"created", "skipped", "buffered", "rejected"}
#: a tenant's default jitter_s is re-read at most this often (seconds, per tenant)
TENANT_JITTER_REFRESH_S = 5.0


def beats_key(prefix: str) -> str:
    """The live-beats ZSET (beat id -> registration expiry, ms, server clock)."""
    return Keys(prefix).beats()


@dataclass(frozen=True, slots=True)
class _Spec:
    """A job's parsed spec, cached by version (spec and trigger None: unreadable,
    and ``error`` says why)."""

    version: str
    spec: JobSpec | None
    trigger: Trigger | None
    error: str = ""


_NO_SPEC = _Spec("", None, None)


@dataclass(frozen=True, slots=True)
class _Stored:
    """What this beat stored at a job's last fire: a job found at that due score
    needs no read of its hash."""

    due: int
    nominal: int
    version: str


@dataclass(frozen=True, slots=True)
class _Jitter:
    """A tenant's default jitter_s, and when (monotonic) it was read."""

    jitter_s: float
    read_at: float


@dataclass(frozen=True, slots=True)
class _Call:
    """One fire.lua call: a job, the version it was planned on, and the fire."""

    job_id: str
    version: str
    fire: Fire


@dataclass(frozen=True, slots=True)
class _Loaded:
    version: str
    spec: JobSpec
    trigger: Trigger
    nominal: int | None
    paused: bool


@dataclass(frozen=True, slots=True)
class _Bad:
    """A due job whose hash or spec cannot be planned: it is parked, with ``reason``."""

    version: str
    reason: str
    tenant: str = ""


def _when(ms: int) -> str:
    """A fire time for a reason text: ISO-8601, or the raw ms when out of range."""
    try:
        return iso(from_ms(ms))
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms"


class Beat:
    """A beat process: owns shards, fires what is due, runs promote/reap.

    Args:
        app: the App (its settings name the deployment).
        name: beat id (unique per process; default ``host:pid:random``).
        shard_ttl: seconds a shard lease lives unrenewed (renewed every third).
        catchup_window: fires overdue by at most this many seconds are all fired;
            must be longer than ``shard_ttl`` so that a failover loses nothing.
        batch: schedule entries read per round trip.
        apply_declared: upsert the App's declared jobs (``app.job``,
            ``@app.cron``) on start, after checking their task names against
            its registry; undeclared jobs are never deleted.
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
        self._specs: dict[str, _Spec] = {}
        self._known: dict[str, _Stored] = {}
        # (shard, tenant) -> its default jitter: re-read at most every
        # TENANT_JITTER_REFRESH_S, so a changed setting applies within seconds
        self._tenant_jitter: dict[tuple[int, str], _Jitter] = {}
        # tenants seen with a default jitter: their jobs' scores may be jittered even
        # after the default went back to 0, so the score is never taken as nominal
        self._jittered: set[tuple[int, str]] = set()
        self._next_round = 0
        self._live = 0
        self._started = False
        self._busy = False
        self._stop = threading.Event()
        self._sender: ThreadPoolExecutor | None = None
        self._store: BeatStore | None = None

    @property
    def owned(self) -> dict[int, str]:
        """Shards this beat holds, with their fencing epochs."""
        return dict(self._owned)

    @property
    def store(self) -> BeatStore:
        """The beat's Redis side (on the App's current broker: a forked child gets its own)."""
        broker = self.app.broker
        if self._store is None or self._store.broker is not broker:
            self._store = BeatStore(broker)
        return self._store

    # -- public ---------------------------------------------------------------

    def run(self) -> None:
        """Tick until :meth:`stop` (or SIGTERM/SIGINT on the main thread); then
        release the shards so another beat takes them at once."""
        old: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                old[sig] = signal.signal(sig, self._on_signal)
        log.info(
            "beat %s on %s starting (shard ttl %.1fs)",
            self.id,
            masked_url(self.app.settings.redis_url),
            self.ttl_ms / 1000,
        )
        # a steady 1 s, not a growing wait: its shard leases are renewed soon after Redis is back
        backoff = Backoff(1.0, 1.0, log, Outage(log, f"beat {self.id}"))
        try:
            while not self._stop.is_set():
                try:
                    self.tick()
                    delay = 0.0 if self._busy else self._idle_delay()
                    backoff.reset()
                except TRANSIENT as exc:
                    delay = backoff.failed(exc, "tick")
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
            self.store.unregister(self.id)
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
        return self.app.broker.server_ms()

    def _own(self, mode: str, shards: list[int]) -> list[ShardClaim]:
        return self.store.own(shards, self.id, self.ttl_ms, mode)

    def _ownership(self, now: int) -> None:
        live = max(1, self.store.register(self.id, now, self.ttl_ms))
        total = self.app.broker.shards
        share = math.ceil(total / live)
        if now < self._next_round and live == self._live and len(self._owned) <= share:
            return
        self._next_round, self._live = now + self.ttl_ms // 3, live
        for claim in self._own("renew", sorted(self._owned)):
            if claim.owned:
                self._owned[claim.shard] = claim.epoch
            else:
                log.warning(
                    "beat %s lost shard %d (lease expired or taken over)", self.id, claim.shard
                )
                del self._owned[claim.shard]
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
            for claim in self._own("acquire", chunk):
                if claim.owned:
                    self._owned[claim.shard] = claim.epoch
                    log.info("beat %s owns shard %d (epoch %s)", self.id, claim.shard, claim.epoch)

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
        fired = 0
        flight: Future[list[Any]] | None = None
        flying: list[_Call] = []
        while True:
            busy = {call.job_id for call in flying}
            due = self.store.due(shard, now, self.batch + len(busy))
            last = len(due) < self.batch + len(busy) or time.monotonic() > budget
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

    def _load(self, shard: int, rows: list[tuple[str, int]]) -> list[_Loaded | _Bad | None]:
        """Version, spec, trigger and next_fire of each due job (None: no job; _Bad: a
        malformed hash or an unreadable spec, to be parked).  Parsed specs are
        cached by (job id, version); a job at the score this beat stored is not
        read at all.  The default jitter of the jobs' tenants is refreshed (at
        most every TENANT_JITTER_REFRESH_S) in the same round trips."""
        out: list[_Loaded | _Bad | None] = [None] * len(rows)
        cold: list[int] = []
        mono = time.monotonic()
        stale: set[str] = set()  # tenants whose default jitter is read with this page

        def fresh(tenant: str) -> bool:
            got = self._tenant_jitter.get((shard, tenant))
            if got is None or mono - got.read_at >= TENANT_JITTER_REFRESH_S:
                stale.add(tenant)
                return False
            return True

        for i, (jid, score) in enumerate(rows):
            known, cached = self._known.get(jid), self._specs.get(jid)
            spec, trigger = (cached.spec, cached.trigger) if cached else (None, None)
            if (
                known
                and cached
                and spec
                and trigger
                and known.due == score
                and cached.version == known.version
            ):
                fresh(spec.tenant)  # the nominal is known; the jitter is for the next
                out[i] = _Loaded(known.version, spec, trigger, known.nominal, False)
            elif (
                score >= 0
                and cached
                and spec
                and trigger
                and not spec.jitter_s
                and (shard, spec.tenant) not in self._jittered
                and fresh(spec.tenant)
            ):
                # without jitter (the job's or its tenant's) the due score is the
                # nominal fire time; the cached version and the score are
                # compare-and-set by fire.lua (a changed job answers 'version', a
                # moved score 'stale'), so no read is needed
                out[i] = _Loaded(cached.version, spec, trigger, score, False)
            else:
                cold.append(i)
        if not cold and not stale:
            return out
        asked = sorted(stale)
        read, jitters = self.store.job_heads(shard, [rows[i][0] for i in cold], asked)
        heads = dict(zip(cold, read, strict=True))
        self._tenants_read(shard, asked, jitters, mono)
        missing = [
            (rows[i][0], h.version)
            for i, h in heads.items()
            if h.version is not None
            and h.malformed is None
            and self._stale_spec(rows[i][0], h.version, rows[i][1])
        ]
        # tenants of jobs read cold (new jobs among them) whose default jitter is unknown
        cold_tenants = {h.tenant for h in heads.values() if h.version is not None and h.tenant}
        unknown = sorted(t for t in cold_tenants if not fresh(t))
        if missing or unknown:
            if len(self._specs) > 200_000:
                self._specs.clear()
                self._known.clear()
            texts, jitters = self.store.job_specs(shard, [jid for jid, _v in missing], unknown)
            self._tenants_read(shard, unknown, jitters, mono)
            for (jid, version), text in zip(missing, texts, strict=True):
                try:
                    if text is None:
                        raise ValueError("the job has no stored spec")
                    parsed = spec_from_json(text)
                    self._specs[jid] = _Spec(version, parsed, parsed.trigger())
                except Exception as exc:  # a spec we cannot read must not stop the others
                    # (a zone gone from tzdata, a hand-edited spec): parked when due,
                    # with one WARNING then (_park)
                    log.debug("job %s: unreadable spec (%s)", jid, exc)
                    why = f"unreadable spec: {type(exc).__name__}: {exc}"
                    self._specs[jid] = _Spec(version, None, None, why)
        for i, h in heads.items():
            if h.malformed is not None:
                out[i] = _Bad(h.version or "", h.malformed, h.tenant)
                continue
            got = self._specs.get(rows[i][0], _NO_SPEC)
            if h.version is None:
                continue
            if got.spec is None or got.trigger is None:
                out[i] = _Bad(h.version, got.error or "no readable spec", h.tenant)
                continue
            out[i] = _Loaded(h.version, got.spec, got.trigger, h.next_fire, h.paused)
        return out

    def _stale_spec(self, job_id: str, version: str, score: int) -> bool:
        """Whether the job's spec must be read: not cached at this version, or
        cached unreadable and now due (score >= 0, not a prefetch): a zone put
        back by a tzdata update, then a resume, leaves the version as it was, and
        another beat may hold the old verdict."""
        cached = self._specs.get(job_id, _NO_SPEC)
        return cached.version != version or (cached.spec is None and score >= 0)

    def _tenants_read(self, shard: int, tenants: list[str], values: list[Any], at: float) -> None:
        """Record the default jitter read for each tenant (at monotonic time ``at``)."""
        for tenant, raw in zip(tenants, values, strict=True):
            jitter = tenant_jitter_s(raw)
            self._tenant_jitter[shard, tenant] = _Jitter(jitter, at)
            if jitter > 0:
                self._jittered.add((shard, tenant))

    def _tenant_jitter_of(self, shard: int, tenant: str) -> float:
        """The tenant's default jitter as last read (0 if never read)."""
        got = self._tenant_jitter.get((shard, tenant))
        return 0.0 if got is None else got.jitter_s

    def _prefetch(self, shard: int, now: int) -> None:
        """Load the specs of jobs due soon (up to ``10 * batch`` a tick), so that a
        burst of fires finds them parsed."""
        ids = self.store.due_between(shard, now, now + PREFETCH_MS, 40 * self.batch)
        todo = [(jid, -1) for jid in ids if jid not in self._specs]
        for i in range(0, min(len(todo), 10 * self.batch), self.batch):
            self._load(shard, todo[i : i + self.batch])

    def _plan(self, shard: int, rows: list[tuple[str, int]], now: int) -> list[_Call]:
        """The fire.lua calls for due schedule rows; a job that cannot be planned
        (malformed hash, unreadable spec, an error computing its fires) is parked."""
        calls: list[_Call] = []
        parks: list[Park] = []
        for (jid, score), job in zip(rows, self._load(shard, rows), strict=True):
            if isinstance(job, _Bad):
                parks.append(Park(jid, job.version, score, job.reason, job.tenant))
                continue
            if job is None or job.paused:
                continue
            # no nominal recorded: the score is our best knowledge
            nominal = score if job.nominal is None else job.nominal
            tenant_jitter = self._tenant_jitter_of(shard, job.spec.tenant)
            try:
                fires = plan_fires(
                    jid, job.spec, job.trigger, nominal, score, now, self.window_ms, tenant_jitter
                )
            except Exception as exc:  # one job's schedule must not stop every tenant's
                why = f"next fire after {_when(nominal)}: {type(exc).__name__}: {exc}"
                parks.append(Park(jid, job.version, score, why, job.spec.tenant))
                continue
            calls += [_Call(jid, job.version, fire) for fire in fires]
        if parks:
            self._park(shard, parks)
        return calls

    def _park(self, shard: int, parks: list[Park]) -> None:
        if not parks:
            return
        for job_id in parking.park(self.store, shard, parks):
            self._specs.pop(job_id, None)
            self._known.pop(job_id, None)

    def _send(self, shard: int, epoch: str, calls: list[_Call]) -> list[Any]:
        """Send the fires (runs in the sender thread).  One result per call, in
        order; a refused batch (STALE) yields its error for each of its fires."""
        return self.store.fire(
            shard,
            [
                FireArgs(c.job_id, c.fire.expected, c.version, c.fire.fire_ms, c.fire.next_ms,
                         c.fire.next_due, epoch, c.fire.trigger, c.fire.skipped,
                         f"{c.job_id}@{c.fire.fire_ms}")
                for c in calls
            ],
        )  # fmt: skip

    def _settle(self, shard: int, calls: list[_Call], results: list[Any]) -> int:
        """Account for fire.lua results; returns the fires done.  Any progress
        makes the beat tick again at once (a chain may have more due).

        A job hash no run can be made from (fire.lua's ``malformed``) is parked.
        Fires that failed with a script error (one fire's error aborts its whole
        fire_batch call) are sent again one at a time (:meth:`_isolate`).
        """
        fired = 0
        parks: list[Park] = []
        again: list[_Call] = []
        for call, res in zip(calls, results, strict=True):
            jid, f = call.job_id, call.fire
            if isinstance(res, ErrorReply):
                if isinstance(from_script_error(str(res)), ShardLeaseLost):
                    self._drop(shard)
                    break
                if parking.job_fault(str(res)):
                    again.append(call)
                    continue
                log.warning("job %s: fire %d failed: %s", jid, f.fire_ms, res)
                continue
            status = _s(res[0])
            if status == "malformed":
                why = _s(res[1])
                parks.append(Park(jid, call.version, f.expected, why, self._tenant_of(jid)))
                continue
            if status in _DONE:
                self._busy = True
                if f.next_ms is not None and f.next_due is not None:
                    self._known[jid] = _Stored(f.next_due, f.next_ms, call.version)
                fired += status in _COUNTED
                self._log_fire(call, _s(res[1]), status, int(res[2]) if len(res) > 2 else None)
            elif status == "version":
                self._specs.pop(jid, None)
                self._known.pop(jid, None)
        if parks:
            self._park(shard, parks)
        if again:
            fired += self._isolate(shard, again)
        return fired

    def _isolate(self, shard: int, calls: list[_Call]) -> int:
        """Send fires that failed together one at a time; returns the fires done.

        The others of the failed call are made; a job whose fire fails alone is
        parked, but only when some fire succeeded alone: when every one fails,
        the fault is the server's or a script's, not one job's data, and parking
        them all would stop every tenant the other way.  Later fires of a chain
        whose earlier fire failed are not sent (they could only come back stale).
        """
        fired = 0
        failed: dict[str, tuple[_Call, Any]] = {}
        succeeded = False
        for call in calls:
            if call.job_id in failed or shard not in self._owned:
                continue
            res = self._send(shard, self._owned[shard], [call])
            if not isinstance(res[0], ErrorReply):
                succeeded = True
                fired += self._settle(shard, [call], res)
                continue
            if isinstance(from_script_error(str(res[0])), ShardLeaseLost):
                self._drop(shard)
                break
            log.warning("job %s: fire %d failed: %s", call.job_id, call.fire.fire_ms, res[0])
            failed[call.job_id] = (call, res[0])
        if failed and succeeded:
            self._park(shard, [
                Park(c.job_id, c.version, c.fire.expected, f"fire failed: {err}",
                     self._tenant_of(c.job_id))
                for c, err in failed.values()
                if parking.job_fault(str(err))
            ])  # fmt: skip
        elif failed:
            log.warning(
                "shard %d: all %d fires sent one at a time failed: taken for a server or "
                "script fault, not one job's; none parked",
                shard,
                len(failed),
            )
        return fired

    def _tenant_of(self, job_id: str) -> str:
        spec = self._specs.get(job_id, _NO_SPEC).spec
        return spec.tenant if spec else ""

    def _log_fire(self, call: _Call, run_id: str, status: str, recorded: int | None) -> None:
        """A line per fire time done: what fired, how late, and what became of it.

        The fields also travel as the record's attributes (``extra``), so that
        ``--log-format json`` carries them as keys.
        """
        f = call.fire
        spec = self._specs.get(call.job_id, _NO_SPEC).spec
        nominal = iso(from_ms(f.fire_ms))
        lag = None if recorded is None else recorded - f.fire_ms
        fields = {
            "job": spec.name if spec else None,
            "job_id": call.job_id,
            "tenant": spec.tenant if spec else None,
            "fire_time": nominal,
            "lag_ms": lag,
            "run_id": run_id or None,
            "status": status,
            "trigger": f.trigger,
        }
        log.info(
            "job %s %s (tenant %s) fire %s (%s): %s, run %s, lag %s",
            fields["job"] or "?",
            call.job_id,
            fields["tenant"] or "?",
            nominal,
            f.trigger,
            status,
            run_id or "-",
            "?" if lag is None else f"{lag}ms",
            extra=fields,
        )

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
        now, heads = self.store.next_due(sorted(self._owned))
        wake = min(now + 1000, self._next_round)
        for head in heads:
            if head is not None:
                wake = min(wake, head)
        # a due entry that made no progress (version change, unreadable spec)
        # is retried at the next round or second, not in a busy loop
        if wake <= now:
            wake = min(now + 1000, max(self._next_round, now + 50))
        return max(0.0, (wake - now) / 1000)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("beat %s: signal %d, stopping", self.id, signum)
        self.stop()
