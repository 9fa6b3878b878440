"""``examine``: every check on every shard, in the order one's findings feed
the next (the instances name the tenants and queues whose streams are read;
the streams' ready counts judge the rings), then the repairs, then the report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import redis

from redcron.doctor.exam import Exam, Found
from redcron.doctor.instances import check_instances
from redcron.doctor.members import check_dlq, check_leases, check_timers
from redcron.doctor.records import DoctorReport, DoctorSummary, Finding, TenantRecount
from redcron.doctor.rings import check_parked, check_rings
from redcron.doctor.runs import check_runs
from redcron.doctor.schedule import check_breaker_index, check_jobs
from redcron.doctor.streams import check_streams, stream_names
from redcron.model.records import from_ms
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core


def examine(
    broker: Core,
    now_ms: int | None = None,
    repair: bool = False,
    progress: Callable[[str], None] | None = None,
) -> DoctorReport:
    """Check every shard; with ``repair``, fix what is safe (see the package doc).

    ``now_ms`` (tests) replaces the server clock for deciding whether a lease
    has expired, and is passed to the repair scripts; production leaves it None.
    ``progress`` is called with a short line now and then (the CLI prints it
    on stderr).
    """
    ex = Exam(broker, now_ms, progress)
    for shard in range(ex.shards):
        _examine_shard(ex, shard)
    findings = [_repair(f) if repair else f.finding for f in ex.found]
    repaired = sum(1 for f in findings if f.repaired)
    if repair and ex.found:
        ex.say(f"repaired {repaired} of {len(findings)}")
    # the counts are named as DoctorSummary's fields
    summary = DoctorSummary(
        **ex.counts, findings=len(findings), repaired=repaired, remaining=len(findings) - repaired
    )
    recounts = tuple(
        TenantRecount(tenant, shard, **tally)
        for (shard, tenant), tally in sorted(ex.tallies.items())
    )
    return DoctorReport(
        checked_at=from_ms(ex.now),
        repair=repair,
        shards=ex.shards,
        findings=tuple(findings),
        tenants=recounts,
        summary=summary,
    )


def _examine_shard(ex: Exam, shard: int) -> None:
    ex.say(f"shard {shard}: instances")
    tenants, queues = check_instances(ex, shard)
    tenants |= {_s(t) for t in ex.r.zrange(ex.k.tenants(shard), 0, -1)}
    queues |= {_s(q) for q in ex.r.smembers(ex.k.queues(shard))}
    for queue, tenant in stream_names(ex, shard):
        queues.add(queue)
        tenants.add(tenant)
    ex.say(f"shard {shard}: streams of {len(tenants)} tenants, {len(queues)} queues")
    by_tenant, by_queue = sorted(tenants), sorted(queues)
    ready = check_streams(ex, shard, by_tenant, by_queue)
    ex.say(f"shard {shard}: leases, timers, DLQ")
    check_leases(ex, shard, by_tenant)
    check_timers(ex, shard)
    check_dlq(ex, shard, by_tenant)
    ex.say(f"shard {shard}: rings")
    check_rings(ex, shard, by_tenant, by_queue, ready)
    check_parked(ex, shard, by_tenant)
    ex.say(f"shard {shard}: jobs and schedule")
    check_jobs(ex, shard)
    check_breaker_index(ex, shard)
    ex.say(f"shard {shard}: runs")
    check_runs(ex, shard)


def _repair(found: Found) -> Finding:
    if found.fix is None:
        return found.finding
    try:
        done, action = found.fix()
    except (redis.RedisError, ValueError) as exc:  # report it, go on with the rest
        done, action = False, f"repair failed: {exc}"
    return replace(found.finding, repaired=done, action=action)
