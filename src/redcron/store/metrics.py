"""What ``GET /metrics`` reports, read from Redis at scrape time with bounded work.

A scrape's cost does not grow with the tenants, jobs or runs.  Per-tenant
figures are read for a bounded set of tenants only: ``TOP_TENANTS`` tenants
with something to show (:func:`shown_tenants`: in turn, the oldest ready work
from the head of each shard's aging index ``oldest:<queue>:<class>``, the most
dead tasks among the first names of each shard's ``dlqidx``, the tenants of the
first streams of each shard's ``pending`` (tasks in flight), and the most
delayed tasks as the caller counted them) and the tenants a scraper names
(``/metrics?tenant=a&tenant=b``).  For those: ready per queue (stream length
less pending), in flight (lease-set size), DLQ length, oldest ready age, delayed
(from the caller's counts, the dashboard's background totals: counting them
reads the shard's timers, which name no tenant) and their lifetime outcome
counters and late runs (``HMGET`` of their fields of ``counters``), and their attempt- and
run-duration histograms (``HGETALL`` of ``durations:<tenant>``: at most
``DURATION_NAMES`` + 1 names of each kind, so bounded).  Deployment figures
are O(1) or bounded per shard: the tenant count (``tenants``), the shard's
counters read by name (``STAT_FIELDS``, the lifetime totals over tenants
``attempts:*|…``, ``runs:*|…``, ``late:*``, the trigger-lag histogram
``lag:…``: one ``HMGET``, however many tenants the hash counts), the head of the
schedule, and the open-breaker and parked jobs (the ``breaker:`` and
``parked:`` members of ``attention``, at most ``LISTED_JOBS`` each; a closed
breaker is not reported), the live-worker
count (``ZCARD``; their slots and queues come from the background totals).
Queues are few by nature and read whole.  No SCAN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redcron.engine.indexes import ensure_indexes
from redcron.engine.inspect import Inspection
from redcron.engine.partial import per_shard, read_shards
from redcron.engine.workers import WorkerRegistry
from redcron.keys import (
    ATTENTION_BREAKER,
    ATTENTION_PARKED,
    COUNTER_ATTEMPTS,
    COUNTER_LAG,
    COUNTER_LATE,
    COUNTER_RUNS,
    DURATIONS_JOB,
    DURATIONS_TASK,
    PRIORITIES,
    STAT_FIELDS,
    prefix_range,
    q_tenant,
    shard_of,
)
from redcron.serde import text as _s
from redcron.store import stats as _stats
from redcron.store.stats import DurationHistogram, LagHistogram

if TYPE_CHECKING:
    from redcron.engine.core import Core

#: tenants with per-tenant series by default (those with something to show:
#: ready work waiting longest, dead tasks, tasks in flight, delayed tasks)
TOP_TENANTS = 20
#: open breakers and parked jobs read per shard
LISTED_JOBS = 1_000
#: what the per-tenant lifetime counters count
ATTEMPT_OUTCOMES = ("succeeded", "failed", "timed_out", "lost", "cancelled")
RUN_ENDS = ("succeeded", "failed", "cancelled", "skipped", "rejected")
#: the fields of a shard's ``counters`` a scrape reads whatever the tenants: the
#: shard's stats, the totals over tenants and the trigger-lag histogram
_SHARD_FIELDS: tuple[str, ...] = (
    *STAT_FIELDS,
    *(f"{COUNTER_ATTEMPTS}*|{o}" for o in ATTEMPT_OUTCOMES),
    *(f"{COUNTER_RUNS}*|{r}" for r in RUN_ENDS),
    *(COUNTER_LAG + f for f in (*_stats.LABELS, "count", "sum_ms")),
)
#: breaker state -> gauge value
BREAKER_VALUES = {"closed": 0, "open": 1, "trial": 2}


@dataclass
class Metrics:
    """One scrape's figures (summed over shards where a tenant spans none: a
    tenant lives on one shard, so per-tenant figures are that shard's)."""

    #: (tenant, queue) -> ready entries over all priority classes
    ready: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (tenant, queue) -> age in seconds of the oldest ready entry (server clock)
    oldest_ready_s: dict[tuple[str, str], float] = field(default_factory=dict)
    #: tenant -> valid leases
    in_flight: dict[str, int] = field(default_factory=dict)
    #: tenant -> retries and countdown tasks waiting for their time
    delayed: dict[str, int] = field(default_factory=dict)
    #: tenant -> dead-lettered tasks
    dlq: dict[str, int] = field(default_factory=dict)
    #: lifetime counters (``Inspection.stats``), summed over shards
    stats: dict[str, int] = field(default_factory=dict)
    #: live workers (how many)
    workers_live: int = 0
    #: (tenant, job name) -> breaker state (closed, open, trial)
    breakers: dict[tuple[str, str], str] = field(default_factory=dict)
    #: tenant -> jobs the beat parked (off the schedule until updated or resumed)
    jobs_parked: dict[str, int] = field(default_factory=dict)
    #: shard -> seconds the most overdue scheduled fire is late (0 when none is due)
    trigger_overdue_s: dict[int, float] = field(default_factory=dict)
    #: (tenant, outcome) -> attempts ended that way (lifetime)
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (tenant, state) -> runs ended in that state (lifetime)
    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    #: outcome -> attempts ended that way, all tenants (lifetime)
    attempts_all: dict[str, int] = field(default_factory=dict)
    #: state -> runs ended in that state, all tenants (lifetime)
    runs_all: dict[str, int] = field(default_factory=dict)
    #: tenant -> runs marked late: still going past their job's deadline (lifetime)
    runs_late: dict[str, int] = field(default_factory=dict)
    #: runs marked late, all tenants (lifetime)
    runs_late_all: int = 0
    #: tenants known, and how many have per-tenant figures here
    tenants: int = 0
    tenants_shown: int = 0
    #: every queue known
    queues: list[str] = field(default_factory=list)
    #: (tenant, task name) -> how long its attempts took (lifetime histogram)
    attempt_durations: dict[tuple[str, str], DurationHistogram] = field(default_factory=dict)
    #: (tenant, job name) -> how long its runs took (lifetime histogram)
    run_durations: dict[tuple[str, str], DurationHistogram] = field(default_factory=dict)
    #: trigger lag of every scheduled fire (lifetime histogram, summed over shards)
    trigger_lag: LagHistogram = field(default_factory=lambda: _stats.lag_histogram([]))
    #: shards left out: their master did not answer (a Redis Cluster, read by
    #: the dashboard in ``partial_reads``; elsewhere such a read raises)
    unavailable_shards: list[int] = field(default_factory=list)


def busiest(broker: Core, top: int) -> list[str]:
    """The ``top`` tenants with the oldest ready work (each shard's aging index
    ``oldest:<queue>:<class>``: the head of each, ``top`` entries), oldest first:
    the tenants whose backlog matters most, found without reading every tenant."""
    if top <= 0:
        return []
    client, keys = broker.client, broker.keys
    since: dict[str, float] = {}

    def heads(shard: int) -> list[Any]:
        queues = sorted(_s(q) for q in client.smembers(keys.queues(shard)))
        pipe = client.pipeline(transaction=False)
        for q in queues:
            for p in PRIORITIES:
                pipe.zrange(keys.oldest(shard, q, p), 0, top - 1, withscores=True)
        return pipe.execute() if queues else []

    for read in per_shard(broker, range(broker.shards), heads, "figures").values():
        for got in read:
            for tenant, ms in got:
                t = _s(tenant)
                since[t] = min(since.get(t, ms), ms)
    return sorted(since, key=lambda t: (since[t], t))[:top]


def _most(named: Sequence[tuple[int, str]], counts: Sequence[Any], top: int) -> list[str]:
    """The ``top`` tenants of ``named`` ((shard, tenant) pairs) with the highest
    ``counts`` above 0, the highest first (then by name)."""
    ranked = sorted((-int(n), t) for (_shard, t), n in zip(named, counts, strict=True) if n)
    return [t for _n, t in ranked[:top]]


def _dead(broker: Core, top: int) -> list[str]:
    """Up to ``top`` tenants with dead tasks, the most first: the first ``top``
    names of each shard's ``dlqidx`` (a superset: a tenant whose stream is empty
    is left out), counted with ``XLEN``."""
    client, keys = broker.client, broker.keys
    heads = read_shards(
        broker, range(broker.shards),
        lambda pipe, shard: pipe.zrangebylex(keys.dlqidx(shard), "-", "+", 0, top), "figures",
    )  # fmt: skip
    named = [(shard, _s(t)) for shard, (got,) in sorted(heads.items()) for t in got]
    pipe = client.pipeline(transaction=False)
    for shard, t in named:
        pipe.xlen(keys.dlq(shard, t))
    return _most(named, pipe.execute() if named else [], top)


def _leased(broker: Core, top: int) -> list[str]:
    """Up to ``top`` tenants with tasks in flight, the most first: the tenants
    of the first ``top`` streams of each shard's reaper index ``pending`` (a
    superset: the reaper drops a stream once nothing there is leased, so a
    tenant with no lease left is left out), counted with ``ZCARD``."""
    client, keys = broker.client, broker.keys
    heads = read_shards(
        broker, range(broker.shards),
        lambda pipe, shard: pipe.zrange(keys.pending(shard), 0, top - 1), "figures",
    )  # fmt: skip
    named = sorted({(shard, t) for shard, (got,) in heads.items()
                    for stream in got if (t := q_tenant(keys, shard, _s(stream)))})  # fmt: skip
    pipe = client.pipeline(transaction=False)
    for shard, t in named:
        pipe.zcard(keys.leases(shard, t))
    return _most(named, pipe.execute() if named else [], top)


def shown_tenants(broker: Core, top: int, delayed: Mapping[str, int] | None = None) -> list[str]:
    """The ``top`` tenants given per-tenant series: those with something to show,
    taken in turn from four bounded lists, so that no kind crowds the others
    out: the oldest ready work (:func:`busiest`), the most dead tasks, tasks in
    flight, and the most delayed tasks (``delayed``, counted by the caller;
    None: not counted).  Each list reads at most ``top`` entries of an index
    per shard, whatever the tenants."""
    if top <= 0:
        return []
    counted: Mapping[str, int] = delayed or {}
    waiting = sorted((t for t, n in counted.items() if n > 0), key=lambda t: (-counted[t], t))
    lists = [busiest(broker, top), _dead(broker, top), _leased(broker, top), waiting[:top]]
    out: list[str] = []
    for rank in range(max(len(found) for found in lists)):
        for found in lists:
            if rank < len(found) and found[rank] not in out:
                out.append(found[rank])
                if len(out) == top:
                    return out
    return out


def read_metrics(
    broker: Core,
    tenants: Sequence[str] = (),
    top: int | None = None,
    delayed: Mapping[str, int] | None = None,
) -> Metrics:
    """Read what ``GET /metrics`` reports: per-tenant figures of the ``top``
    :func:`shown_tenants` and of ``tenants`` (asked for by name), deployment figures
    of all (see the module docstring for the cost).  ``delayed``: each tenant's
    delayed tasks, counted elsewhere (None: no per-tenant delayed figures)."""
    client, keys = broker.client, broker.keys
    out = Metrics()
    now = broker.server_ms()
    top = TOP_TENANTS if top is None else top  # read now: tests and operators may set it
    ensure_indexes(broker)  # dlqidx, which shown_tenants reads
    chosen = sorted(set(shown_tenants(broker, top, delayed)) | set(tenants))
    out.tenants_shown = len(chosen)
    by_shard: dict[int, list[str]] = {}
    for t in chosen:
        by_shard.setdefault(shard_of(t, broker.shards), []).append(t)
    lags: list[dict[Any, Any]] = []
    known_queues: set[str] = set()

    def read_shard(shard: int) -> tuple[Metrics, dict[Any, Any], list[str]]:
        """The shard's part, read into a Metrics of its own: a shard whose master
        fails half-way leaves nothing of it in the answer."""
        part = Metrics()
        mine = by_shard.get(shard, [])
        pipe = client.pipeline(transaction=False)
        pipe.zcard(keys.tenants(shard))
        pipe.smembers(keys.queues(shard))
        pipe.zrange(keys.schedule(shard), 0, 0, withscores=True)
        for kind in (ATTENTION_BREAKER, ATTENTION_PARKED):
            pipe.zrangebylex(keys.attention(shard), *prefix_range(kind), 0, LISTED_JOBS)
        counters = keys.counters(shard)
        pipe.hmget(counters, _SHARD_FIELDS)
        pipe.hmget(counters, _fields(COUNTER_ATTEMPTS, mine, ATTEMPT_OUTCOMES))
        pipe.hmget(counters, _fields(COUNTER_RUNS, mine, RUN_ENDS))
        # '*' first: every tenant's sum, and HMGET needs a field when mine is empty
        pipe.hmget(counters, [COUNTER_LATE + t for t in ("*", *mine)])
        (n_tenants, raw_queues, head, opened, parked, shard_counts, attempts, runs,
         late) = pipe.execute()  # fmt: skip
        got = dict(zip(_SHARD_FIELDS, shard_counts, strict=True))
        stats = {f: got[f] for f in STAT_FIELDS if got[f] is not None}
        attempts_all = {o: got[f"{COUNTER_ATTEMPTS}*|{o}"] for o in ATTEMPT_OUTCOMES}
        runs_all = {r: got[f"{COUNTER_RUNS}*|{r}"] for r in RUN_ENDS}
        lag = {f[len(COUNTER_LAG) :]: v for f, v in got.items() if f.startswith(COUNTER_LAG)}
        part.tenants += int(n_tenants)
        queues = sorted(_s(q) for q in raw_queues)
        for k, v in stats.items():
            part.stats[_s(k)] = part.stats.get(_s(k), 0) + int(v)
        part.trigger_overdue_s[shard] = max(0.0, (now - head[0][1]) / 1000) if head else 0.0
        for k, v in attempts_all.items():
            if v is not None:
                part.attempts_all[k] = part.attempts_all.get(k, 0) + int(v)
        for k, v in runs_all.items():
            if v is not None:
                part.runs_all[k] = part.runs_all.get(k, 0) + int(v)
        fields = iter(attempts)
        for t in mine:
            for o in ATTEMPT_OUTCOMES:
                n = next(fields)
                if n is not None:
                    part.attempts[(t, o)] = int(n)
        fields = iter(runs)
        for t in mine:
            for r in RUN_ENDS:
                n = next(fields)
                if n is not None:
                    part.runs[(t, r)] = int(n)
        part.runs_late_all += int(late[0] or 0)
        for t, n in zip(mine, late[1:], strict=True):
            if n is not None:
                part.runs_late[t] = int(n)
        lag = {k: v for k, v in lag.items() if v is not None}

        streams = [(t, q, keys.q(shard, q, t, p)) for t in mine for q in queues for p in PRIORITIES]
        pipe = client.pipeline(transaction=False)
        for t in mine:
            pipe.zcard(keys.leases(shard, t))
            pipe.xlen(keys.dlq(shard, t))
            pipe.hgetall(keys.durations(shard, t))
        for q in queues:
            for p in PRIORITIES:
                for t in mine:
                    pipe.zscore(keys.oldest(shard, q, p), t)
        per_tenant = iter(pipe.execute() if mine else [])
        for t in mine:
            part.in_flight[t] = int(next(per_tenant))
            part.dlq[t] = int(next(per_tenant))
            fields = next(per_tenant)
            for into, prefix in ((part.attempt_durations, DURATIONS_TASK),
                                 (part.run_durations, DURATIONS_JOB)):  # fmt: skip
                for name, hist in _stats.durations_of(fields, prefix).items():
                    into[(t, name)] = hist
            if delayed is not None:
                part.delayed[t] = delayed.get(t, 0)
        for q in queues:
            for _p in PRIORITIES:
                for t in mine:
                    since = next(per_tenant)
                    if since is not None:
                        age = max(0.0, (now - float(since)) / 1000)
                        part.oldest_ready_s[(t, q)] = max(part.oldest_ready_s.get((t, q), 0.0), age)
        for (t, q, _key), n in zip(
            streams, Inspection(broker).ready_counts([k for _t, _q, k in streams]), strict=True
        ):
            part.ready[(t, q)] = part.ready.get((t, q), 0) + n
        _jobs(broker, shard, opened, parked, part)
        return part, lag, queues

    # in partial_reads (the dashboard), a shard whose master is down is left out
    read = per_shard(broker, range(broker.shards), read_shard, "figures")
    for _shard, (part, lag, queues) in sorted(read.items()):
        _merge(out, part)
        lags.append(lag)
        known_queues.update(queues)
    out.unavailable_shards = [s for s in range(broker.shards) if s not in read]
    out.queues = sorted(known_queues)
    out.trigger_lag = _stats.lag_histogram(lags)
    out.workers_live = WorkerRegistry(broker).count(now)
    return out


def _merge(into: Metrics, part: Metrics) -> None:
    """Add one shard's figures to ``into``: per-tenant ones are the shard's own
    (a tenant lives on one shard), deployment ones are summed."""
    for name in ("ready", "oldest_ready_s", "in_flight", "delayed", "dlq", "breakers",
                 "trigger_overdue_s", "attempts", "runs", "runs_late", "attempt_durations",
                 "run_durations"):  # fmt: skip
        getattr(into, name).update(getattr(part, name))
    for name in ("stats", "attempts_all", "runs_all", "jobs_parked"):
        total, more = getattr(into, name), getattr(part, name)
        for k, v in more.items():
            total[k] = total.get(k, 0) + v
    into.tenants += part.tenants
    into.runs_late_all += part.runs_late_all


def _fields(prefix: str, tenants: Sequence[str], kinds: Sequence[str]) -> list[str]:
    """``<prefix><tenant>|<kind>`` of each pair (``|`` alone when none: HMGET needs one)."""
    return [f"{prefix}{t}|{k}" for t in tenants for k in kinds] or ["|"]


def _jobs(broker: Core, shard: int, opened: list[Any], parked: list[Any], out: Metrics) -> None:
    """Open breakers and parked jobs per tenant, from the shard's ``attention``
    members (at most LISTED_JOBS of each kind): closed breakers are not reported."""
    opened_ids = [_s(m)[len(ATTENTION_BREAKER) :] for m in opened]
    parked_ids = [_s(m)[len(ATTENTION_PARKED) :] for m in parked]
    ids = opened_ids + parked_ids
    if not ids:
        return
    pipe = broker.client.pipeline(transaction=False)
    for jid in ids:
        pipe.hmget(broker.keys.job(shard, jid), ["tenant", "name", "breaker"])
    got = dict(zip(ids, pipe.execute(), strict=False))
    for jid in opened_ids:
        tenant, name, state = got[jid]
        if tenant is not None and name is not None:
            out.breakers[(_s(tenant), _s(name))] = _s(state) if state else "closed"
    for jid in parked_ids:
        tenant = got[jid][0]
        if tenant is not None:
            out.jobs_parked[_s(tenant)] = out.jobs_parked.get(_s(tenant), 0) + 1
