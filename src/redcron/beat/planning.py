"""Loading and planning due jobs: the beat's cache of parsed specs and tenant
default jitters, and the fire.lua calls planned from due schedule rows.

The schedule ZSET is *read* (never popped); each job's nominal fire time N is
its ``next_fire`` field (the score itself when neither the job nor its tenant
jitters).  A job that cannot be planned (a malformed hash, an unreadable spec,
an error computing its fires) is parked (:mod:`redcron.beat.parking`).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redcron.beat import parking
from redcron.engine import DueRow, Engine, Park
from redcron.model.jobs import JobSpec, spec_from_json
from redcron.model.serialize import iso
from redcron.schedule.jitter import tenant_jitter_s
from redcron.schedule.plan import Fire, plan_fires
from redcron.schedule.timeutil import from_ms
from redcron.schedule.triggers import Trigger

# one logger for the whole beat, so its records keep the name operators filter on
log = logging.getLogger("redcron.beat.beat")

#: specs of jobs due within this many ms are loaded ahead, while the beat is idle
#: (100,000 jobs due in one second take a few seconds to load)
PREFETCH_MS = 10_000
#: parsed specs kept at most; past it the oldest loaded half is dropped
SPECS_MAX = 200_000
#: a tenant's default jitter_s is re-read at most this often (seconds, per tenant)
TENANT_JITTER_REFRESH_S = 5.0


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
class Call:
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


class Planner:
    """Reads due jobs (cached where it can) and plans their fires.

    Args:
        batch: schedule entries read per round trip (prefetch reads in these).
        window_ms: fires overdue by at most this many ms are all fired.
    """

    def __init__(self, batch: int, window_ms: int) -> None:
        self.batch = batch
        self.window_ms = window_ms
        self._specs: dict[str, _Spec] = {}
        self._known: dict[str, _Stored] = {}
        # shard -> the last schedule row prefetch read (it resumes after it)
        self._cursor: dict[int, DueRow] = {}
        # (shard, tenant) -> its default jitter: re-read at most every
        # TENANT_JITTER_REFRESH_S, so a changed setting applies within seconds
        self._tenant_jitter: dict[tuple[int, str], _Jitter] = {}
        # tenants seen with a default jitter: their jobs' scores may be jittered even
        # after the default went back to 0, so the score is never taken as nominal
        self._jittered: set[tuple[int, str]] = set()

    def spec_of(self, job_id: str) -> JobSpec | None:
        """The job's cached spec (None: not cached, or unreadable)."""
        return self._specs.get(job_id, _NO_SPEC).spec

    def tenant_of(self, job_id: str) -> str:
        spec = self.spec_of(job_id)
        return spec.tenant if spec else ""

    def stored(self, job_id: str, due: int, nominal: int, version: str) -> None:
        """Record what a fire stored for the job: found at that due score, it is
        not read again."""
        self._known[job_id] = _Stored(due, nominal, version)

    def forget(self, job_id: str) -> None:
        """Drop what is cached of a job (it changed, or was parked)."""
        self._specs.pop(job_id, None)
        self._known.pop(job_id, None)

    def plan(self, engine: Engine, shard: int, rows: Sequence[DueRow], now: int) -> list[Call]:
        """The fire.lua calls for due schedule rows; a job that cannot be planned
        (malformed hash, unreadable spec, an error computing its fires) is parked."""
        calls: list[Call] = []
        parks: list[Park] = []
        for (jid, score), job in zip(rows, self.load(engine, shard, rows), strict=True):
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
                    jid,
                    job.spec.fire_policy(),
                    job.trigger,
                    nominal,
                    score,
                    now,
                    self.window_ms,
                    tenant_jitter,
                )
            except Exception as exc:  # one job's schedule must not stop every tenant's
                why = f"next fire after {_when(nominal)}: {type(exc).__name__}: {exc}"
                parks.append(Park(jid, job.version, score, why, job.spec.tenant))
                continue
            calls += [Call(jid, job.version, fire) for fire in fires]
        if parks:
            self.park(engine, shard, parks)
        return calls

    def park(self, engine: Engine, shard: int, parks: Sequence[Park]) -> None:
        if not parks:
            return
        for job_id in parking.park(engine, shard, parks):
            self.forget(job_id)

    def prefetch(self, engine: Engine, shard: int, now: int, budget_s: float) -> bool:
        """Load the specs of jobs due within ``PREFETCH_MS`` of ``now``, so that a
        burst of fires finds them parsed; returns whether some are left to load
        (the beat then ticks again at once).

        A page at a time, from where the last call stopped (a cursor per shard,
        :meth:`Engine.due_page`), for at most ``budget_s`` seconds, and never
        into a due time: once the earliest job of the next page is due the fire
        pass takes over (a prefetch that ran past it held back the whole burst).
        """
        end = now + PREFETCH_MS
        start = time.monotonic()
        cursor = self._cursor.get(shard)
        if cursor is not None and cursor.due_ms < now:
            cursor = None  # the fire pass has that part of the schedule
        while True:
            rows = engine.due_page(shard, now, end, cursor, self.batch)
            if not rows:
                return False
            elapsed = time.monotonic() - start
            if now + int(elapsed * 1000) >= rows[0].due_ms or elapsed > budget_s:
                return elapsed > budget_s
            todo = [DueRow(jid, -1) for jid, _due in rows if jid not in self._specs]
            if todo:
                self.load(engine, shard, todo)
            cursor = self._cursor[shard] = rows[-1]
            if len(rows) < self.batch:
                return False

    def load(
        self, engine: Engine, shard: int, rows: Sequence[DueRow]
    ) -> list[_Loaded | _Bad | None]:
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
        read, jitters = engine.job_heads(shard, [rows[i].job_id for i in cold], asked)
        heads = dict(zip(cold, read, strict=True))
        self._tenants_read(shard, asked, jitters, mono)
        missing = [
            (rows[i].job_id, h.version)
            for i, h in heads.items()
            if h.version is not None
            and h.malformed is None
            and self._stale_spec(rows[i].job_id, h.version, rows[i].due_ms)
        ]
        # tenants of jobs read cold (new jobs among them) whose default jitter is unknown
        cold_tenants = {h.tenant for h in heads.values() if h.version is not None and h.tenant}
        unknown = sorted(t for t in cold_tenants if not fresh(t))
        if missing or unknown:
            if len(self._specs) > SPECS_MAX:
                self._evict()
            texts, jitters = engine.job_specs(shard, [jid for jid, _v in missing], unknown)
            self._tenants_read(shard, unknown, jitters, mono)
            for (jid, version), text in zip(missing, texts, strict=True):
                try:
                    if text is None:
                        raise ValueError("the job has no stored spec")
                    parsed = spec_from_json(*text)
                    self._specs[jid] = _Spec(version, parsed, parsed.trigger())
                except Exception as exc:  # a spec we cannot read must not stop the others
                    # (a zone gone from tzdata, a hand-edited spec): parked when due,
                    # with one WARNING then (park)
                    log.debug("job %s: unreadable spec (%s)", jid, exc)
                    why = f"unreadable spec: {type(exc).__name__}: {exc}"
                    self._specs[jid] = _Spec(version, None, None, why)
        for i, h in heads.items():
            if h.malformed is not None:
                out[i] = _Bad(h.version or "", h.malformed, h.tenant)
                continue
            got = self._specs.get(rows[i].job_id, _NO_SPEC)
            if h.version is None:
                continue
            if got.spec is None or got.trigger is None:
                out[i] = _Bad(h.version, got.error or "no readable spec", h.tenant)
                continue
            out[i] = _Loaded(h.version, got.spec, got.trigger, h.next_fire, h.paused)
        return out

    def _evict(self) -> None:
        """Drop the oldest loaded half of the specs (dicts keep insertion order):
        those were due longest ago, where a full clear also dropped the ones a
        prefetch had just loaded for the coming burst."""
        for cache in (self._specs, self._known):
            for jid in list(itertools.islice(cache, len(cache) // 2)):
                del cache[jid]

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
