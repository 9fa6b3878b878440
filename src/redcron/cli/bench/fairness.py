"""``redcron bench fairness``: tenants sharing one worker process (weighted and
equal shares, small tenants behind a backfill) and the lease's cost with many
idle tenants."""

from __future__ import annotations

import statistics
import time
from typing import Any

from redcron.app import App
from redcron.cli.bench.fixtures import bench_run, jain_index, p99, wait_all_done, worker_process


def lease_times(bapp: App, ids_by_tenant: dict[str, list[str]]) -> list[tuple[int, str]]:
    """(first lease ms, tenant) of every task, in lease order."""
    client = bapp.broker.client
    keys = bapp.broker.keys
    out: list[tuple[int, str]] = []
    for tenant, ids in ids_by_tenant.items():
        pipe = client.pipeline(transaction=False)
        for iid in ids:
            # the first attempt's lease: a:1:l once it ended other than by
            # success, else the instance's own leased
            pipe.hmget(keys.ti(int(iid.split("-", 1)[0]), iid), "a:1:l", "leased")
        out += [(int(a or b), tenant) for a, b in pipe.execute() if a or b]
    out.sort()
    return out


def _evalsha_us(bapp: App) -> tuple[int, int]:
    stats = bapp.broker.client.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def fairness(redis_url: str | None, backfill: int = 50_000) -> dict[str, Any]:
    """The backfill scenario with a real worker process: weighted shares, equal
    shares, how long small tenants wait behind a backfill, and lease cost with
    many idle tenants."""
    with bench_run(redis_url) as run:
        bapp = run.app
        noop = bapp.tasks["bench.noop"]
        # -- weighted and equal shares, all backlogged ------------------------
        weights = {"w1": 1, "w2": 2, "w4": 4, **{f"eq{i}": 1 for i in range(10)}}
        for tenant, weight in weights.items():
            bapp.tenants.set(tenant, weight=weight)
        ids: dict[str, list[str]] = {}
        for tenant, weight in weights.items():
            ids[tenant] = [h.id for h in noop.enqueue_many([()] * (1_000 * weight), _tenant=tenant)]
        with worker_process(run.url, run.prefix, 16, "threads", 16):
            wait_all_done(bapp, [i for v in ids.values() for i in v])
        leases = lease_times(bapp, ids)
        last = {t: max(ms for ms, tt in leases if tt == t) for t in weights}
        window_end = min(last.values())
        counts = {t: 0 for t in weights}
        for ms, t in leases:
            if ms < window_end:
                counts[t] += 1
        total = sum(counts.values()) or 1
        total_w = sum(weights.values())
        share_error = max(abs(counts[t] / total - w / total_w) for t, w in weights.items())
        eq = [counts[f"eq{i}"] for i in range(10)]
        jain = jain_index(eq) if any(eq) else 0.0

        # -- a backfill, then 100 small tenants arrive --------------------------
        big = [h.id for h in noop.enqueue_many([()] * backfill, _tenant="backfill")]
        small: dict[str, list[str]] = {}
        with worker_process(run.url, run.prefix, 16, "threads", 16):
            client = bapp.broker.client
            key = bapp.broker.keys.leases(0, "backfill")
            while not client.zcard(key):  # the backfill is being drained
                time.sleep(0.01)
            time.sleep(0.5)
            for i in range(100):
                small[f"s{i}"] = [h.id for h in noop.enqueue_many([()] * 20, _tenant=f"s{i}")]
            wait_all_done(bapp, big + [i for v in small.values() for i in v])
        waits = []
        client = bapp.broker.client
        for ids_t in small.values():
            pipe = client.pipeline(transaction=False)
            for iid in ids_t:
                pipe.hmget(bapp.broker.keys.ti(0, iid), "created", "a:1:l", "leased")
            rows = [(int(c), int(a or b)) for c, a, b in pipe.execute()]
            created = min(c for c, _ in rows)
            waits.append(min(lz for _, lz in rows) - created)
        waits.sort()
        big_leases = lease_times(bapp, {"backfill": big})
        span = max(1, big_leases[-1][0] - big_leases[0][0]) / 1000

        # -- lease cost: 10 vs 10,000 idle tenants (alternated, median of 3) ------
        def set_idle(n: int) -> None:
            pipe = client.pipeline(transaction=False)
            for i in range(10_000):
                if i < n:
                    pipe.hset(bapp.broker.keys.tenant(0, f"idle{i}"), "weight", 1)
                    pipe.zadd(bapp.broker.keys.tenants(0), {f"idle{i}": 0})
                else:
                    pipe.delete(bapp.broker.keys.tenant(0, f"idle{i}"))
                    pipe.zrem(bapp.broker.keys.tenants(0), f"idle{i}")
            pipe.execute()

        def lease_cost(idle: int) -> float:
            set_idle(idle)
            noop.enqueue_many([()] * 4_000, _tenant="busy")
            # let Redis finish rehashing its keyspace after the bulk change,
            # so the measurement sees steady state
            held = []
            for _ in range(50):
                held += bapp.broker.leases.lease(0, "bench", 16, 60_000, ["default"])
            time.sleep(0.5)
            c0, u0 = _evalsha_us(bapp)
            for _ in range(200):
                held += bapp.broker.leases.lease(0, "bench", 16, 60_000, ["default"])
            c1, u1 = _evalsha_us(bapp)
            # end the leases, so every round starts from the same state
            for i in range(0, len(held), 200):
                bapp.broker.leases.complete(
                    0, "bench", [(x.iid, x.epoch, b"\xc0") for x in held[i : i + 200]]
                )
            return (u1 - u0) / max(1, c1 - c0)

        costs: dict[int, list[float]] = {10: [], 10_000: []}
        for _ in range(3):
            for idle in (10_000, 10):
                costs[idle].append(lease_cost(idle))
        cost_10 = statistics.median(costs[10])
        cost_10k = statistics.median(costs[10_000])
        return {
            "share_error_pct": round(100 * share_error, 2),
            "shares": {t: round(counts[t] / total, 4) for t in ("w1", "w2", "w4")},
            "jain_index": round(jain, 4),
            "small_tenant_wait_p50_ms": waits[len(waits) // 2],
            "small_tenant_wait_p99_ms": p99(waits),
            "backfill_throughput_per_s": round(len(big_leases) / span),
            "lease_us_10_idle_tenants": round(cost_10, 1),
            "lease_us_10k_idle_tenants": round(cost_10k, 1),
        }
