"""What ``GET /metrics`` reports, read from Redis at scrape time with bounded work.

Per shard, a scrape costs a handful of pipelined round trips whose size grows
with the tenants, queues and jobs the shard knows (their SETs and HASHes), not
with the work queued: stream lengths and consumer-group pending counts (ready
and leased), lease-set cardinalities (in flight), DLQ stream lengths, the stats
hash, the aging index (oldest ready entry per tenant), the head of the
schedule (the most overdue fire), and the lifetime outcome counters and
trigger-lag histogram the scripts keep (``broker/stats.py``), and the
open-breaker index (a job not in it is closed: only open ones are read).  One
reader is capped, and a cap reached makes its figures a floor: delayed tasks
per tenant read at most ``DELAYED_LIMIT`` timers per shard (a timer names its
instance, not its tenant).  No SCAN over the keyspace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redcron.broker import stats as _stats
from redcron.broker.stats import LagHistogram
from redcron.broker.workers import WorkerRegistry
from redcron.keys import PRIORITIES, shard_of
from redcron.model import WorkerInfo
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.broker import Broker

#: timers read per shard to count delayed tasks per tenant
DELAYED_LIMIT = 10_000
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
    #: live workers
    workers: list[WorkerInfo] = field(default_factory=list)
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
    #: trigger lag of every scheduled fire (lifetime histogram, summed over shards)
    trigger_lag: LagHistogram = field(default_factory=lambda: _stats.lag_histogram([]))


def read_metrics(broker: Broker) -> Metrics:
    """Read every figure ``GET /metrics`` reports (see the module docstring for the cost)."""
    client, keys = broker.client, broker.keys
    out = Metrics()
    now = broker.server_ms()
    lags: list[dict[Any, Any]] = []
    for shard in range(broker.shards):
        pipe = client.pipeline(transaction=False)
        pipe.smembers(keys.tenants(shard))
        pipe.smembers(keys.queues(shard))
        pipe.hgetall(keys.stats(shard))
        pipe.zrange(keys.schedule(shard), 0, 0, withscores=True)
        pipe.hgetall(keys.attempts(shard))
        pipe.hgetall(keys.runends(shard))
        pipe.hgetall(keys.lag(shard))
        pipe.zrange(keys.brkopen(shard), 0, -1)
        pipe.zrange(keys.jobparked(shard), 0, -1)
        raw_tenants, raw_queues, stats, head, attempts, runs, lag, opened, parked = pipe.execute()
        tenants = sorted(_s(t) for t in raw_tenants)
        queues = sorted(_s(q) for q in raw_queues)
        for k, v in stats.items():
            out.stats[_s(k)] = out.stats.get(_s(k), 0) + int(v)
        out.trigger_overdue_s[shard] = max(0.0, (now - head[0][1]) / 1000) if head else 0.0
        _stats.add_counts(out.attempts, _stats.per_tenant(attempts))
        _stats.add_counts(out.runs, _stats.per_tenant(runs))
        lags.append(lag)

        streams = [
            (t, q, keys.q(shard, q, t, p)) for t in tenants for q in queues for p in PRIORITIES
        ]
        pipe = client.pipeline(transaction=False)
        for t in tenants:
            pipe.zcard(keys.tleases(shard, t))
            pipe.xlen(keys.dlq(shard, t))
            pipe.hgetall(keys.jobs(shard, t))
        for q in queues:
            for p in PRIORITIES:
                pipe.zrange(keys.oldest(shard, q, p), 0, -1, withscores=True)
        per_tenant = iter(pipe.execute())
        job_ids: list[tuple[str, str, str]] = []
        for t in tenants:
            out.in_flight[t] = int(next(per_tenant))
            out.dlq[t] = int(next(per_tenant))
            jobs: dict[Any, Any] = next(per_tenant)
            if shard_of(t, broker.shards) == shard:
                job_ids.extend((t, _s(name), _s(jid)) for name, jid in sorted(jobs.items()))
            out.delayed.setdefault(t, 0)
        for q in queues:
            for _p in PRIORITIES:
                for tenant, since in next(per_tenant):
                    age = max(0.0, (now - since) / 1000)
                    key = (_s(tenant), q)
                    out.oldest_ready_s[key] = max(out.oldest_ready_s.get(key, 0.0), age)
        for (tenant, _queue), n in broker.inspection.delayed_counts(shard, DELAYED_LIMIT).items():
            out.delayed[tenant] = out.delayed.get(tenant, 0) + n

        for (t, q, _key), n in zip(
            streams, broker.inspection.ready_counts([k for _t, _q, k in streams]), strict=True
        ):
            out.ready[(t, q)] = out.ready.get((t, q), 0) + n

        states: dict[str, str] = {}
        if opened:
            pipe = client.pipeline(transaction=False)
            for jid in opened:
                pipe.hget(keys.job(shard, _s(jid)), "breaker")
            for jid, state in zip(opened, pipe.execute(), strict=True):
                states[_s(jid)] = _s(state) if state else "closed"
        parked_ids = {_s(jid) for jid in parked}
        for t, name, jid in job_ids:
            out.breakers[(t, name)] = states.get(jid, "closed")
            out.jobs_parked[t] = out.jobs_parked.get(t, 0) + (jid in parked_ids)
    out.trigger_lag = _stats.lag_histogram(lags)
    out.workers = WorkerRegistry(broker).list(now)
    return out
