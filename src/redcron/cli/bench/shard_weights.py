"""``redcron bench fairness --cluster``: weighted tenants on different shards
of a local Redis Cluster, against the same weights on one shard.

Each shard runs its own deficit round robin, so weights are exact between the
tenants of one shard.  Across shards a worker takes turns: each lease round
starts at the shard after the one that last leased and leases from the first
shard, from there on, that has ready work (``worker/leasing.py``,
``next_start``).  Every backlogged shard therefore gets an equal share of the
rounds (:func:`rotation_shares`), wherever the idle shards sit and whatever
its tenants' weights; within its rounds its tenants share by weight
(:func:`expected_shares`).  The run measures both placements and reports the
share error against the weights and against that model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redcron.cli.bench.fairness import lease_times
from redcron.cli.bench.fixtures import bench_run, redis_for_bench, wait_all_done, worker_process
from redcron.keys import shard_of

#: masters and shards of the local cluster (four shards per master)
MASTERS = 3
SHARDS = 12
#: the weighted tenants, and the shards they sit on when spread: next to each
#: other, the placement a rotation that moved one shard a round served worst
#: (shard 0 took the turns of the nine idle shards before it: 0.79 / 0.10 / 0.10)
WEIGHTS = {"w1": 1, "w2": 2, "w4": 4}
SPREAD = {"w1": 0, "w2": 1, "w4": 2}


def tenant_on_shard(base: str, shard: int, shards: int) -> str:
    """The first name ``<base>-<i>`` that :func:`redcron.keys.shard_of` puts on
    ``shard`` of ``shards``."""
    i = 0
    while shard_of(f"{base}-{i}", shards) != shard:
        i += 1
    return f"{base}-{i}"


def rotation_shares(backlogged: Sequence[int]) -> dict[int, float]:
    """Each backlogged shard's share of a worker's lease rounds: equal, since
    each round starts after the shard that leased last (``next_start``)."""
    busy = sorted(set(backlogged))
    return dict.fromkeys(busy, 1 / len(busy))


def expected_shares(placement: Mapping[str, int], weights: Mapping[str, int]) -> dict[str, float]:
    """Each tenant's share of starts while all are backlogged: its shard's share
    of rounds times its weight among the tenants of that shard."""
    rounds = rotation_shares(list(placement.values()))
    on_shard: dict[int, int] = {}
    for tenant, shard in placement.items():
        on_shard[shard] = on_shard.get(shard, 0) + weights[tenant]
    return {t: rounds[s] * weights[t] / on_shard[s] for t, s in placement.items()}


def weight_shares(weights: Mapping[str, int]) -> dict[str, float]:
    """Each tenant's weight over the sum of the weights."""
    total = sum(weights.values())
    return {t: w / total for t, w in weights.items()}


def share_error(measured: Mapping[str, float], expected: Mapping[str, float]) -> float:
    """max |measured - expected| / expected over the tenants."""
    return max(abs(measured.get(t, 0.0) - e) / e for t, e in expected.items())


def shares_while_backlogged(leases: Sequence[tuple[int, str]]) -> tuple[dict[str, float], int]:
    """Each tenant's share of the leases (``(ms, tenant)``) taken before the
    first tenant's last one (after it, that tenant is no longer backlogged), and
    how many leases that window holds."""
    last: dict[str, int] = {}
    for ms, tenant in leases:
        last[tenant] = max(ms, last.get(tenant, ms))
    end = min(last.values())
    counts = dict.fromkeys(last, 0)
    for ms, tenant in leases:
        if ms < end:
            counts[tenant] += 1
    total = sum(counts.values())
    return {t: n / total if total else 0.0 for t, n in counts.items()}, total


def _placement(url: str, placement: Mapping[str, int], per_weight: int) -> dict[str, Any]:
    """Weighted tenants on the given shards, all backlogged, one worker process."""
    with bench_run(url, "rcshares", shards=SHARDS) as run:
        bapp = run.app
        noop = bapp.tasks["bench.noop"]
        names = {t: tenant_on_shard(t, s, SHARDS) for t, s in placement.items()}
        ids: dict[str, list[str]] = {}
        for tenant, name in names.items():
            bapp.tenants.set(name, weight=WEIGHTS[tenant])
        for tenant, name in names.items():
            count = per_weight * WEIGHTS[tenant]
            ids[tenant] = [h.id for h in noop.enqueue_many([()] * count, _tenant=name)]
        every = [i for v in ids.values() for i in v]
        with worker_process(run.url, run.prefix, 16, "threads", 16):
            wait_all_done(bapp, every)
        leases = lease_times(bapp, ids)
        measured, window = shares_while_backlogged(leases)
        by_weight = weight_shares(WEIGHTS)
        by_rotation = expected_shares(placement, WEIGHTS)
        return {
            "tenants": {
                t: {
                    "name": names[t],
                    "shard": placement[t],
                    "weight": WEIGHTS[t],
                    "share": round(measured.get(t, 0.0), 4),
                    "weight_share": round(by_weight[t], 4),
                    "rotation_share": round(by_rotation[t], 4),
                }
                for t in placement
            },
            "share_error_vs_weights_pct": round(100 * share_error(measured, by_weight), 1),
            "share_error_vs_rotation_pct": round(100 * share_error(measured, by_rotation), 1),
            "window_leases": window,
            "tasks": len(every),
            "finished": len(leases),
        }


def fairness_cluster(redis_url: str | None, per_weight: int = 1_000) -> dict[str, Any]:
    """The weighted tenants on three shards, then all on one, on a fresh local
    cluster (or the cluster at ``redis_url``), ``per_weight`` tasks per unit
    of weight."""
    with redis_for_bench(redis_url, MASTERS) as url:
        spread = _placement(url, SPREAD, per_weight)
        together = _placement(url, dict.fromkeys(WEIGHTS, 0), per_weight)
    return {
        "servers": "given" if redis_url else f"{MASTERS} masters",
        "shards": SHARDS,
        "different_shards": spread,
        "one_shard": together,
    }
