"""The chaos scenario as a plan: everything random about it drawn up front from
``random.Random(seed)``, so one seed names one scenario (the interleavings of
real processes still vary from run to run; the plan does not).

The plan: 3 tenants with different weights and caps; two jobs per tenant firing
every 1 s or 2 s, each a small DAG (fan-out, fan-in, a retried step and a branch
that always fails); ``tasks`` one-off tasks submitted in waves over the first
two thirds of the run (most succeed, some fail transiently, some permanently,
some time out, some are cancelled while they run, a few are slow); 4 workers
(both pools, with and without prefetch) each SIGKILLed or SIGSTOPped at random
about every 2 s; 2 beats, one SIGKILLed about every 5 s; the Redis server
SIGKILLed once around the middle of the run and restarted.

With ``cluster`` the plan is the same but for the deployment and the Redis
fault: 12 shards over a 3-master cluster, one tenant on a shard of each
master (:func:`~redcron.chaos.outage.spread_tenants`), and instead of the
server one master SIGKILLed around the middle of the run, kept down for
4-8 s, then restarted.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from redcron.chaos.outage import spread_tenants
from redcron.model.jobs import Task

#: tenant names, weights and caps (valid leases) to draw from
TENANTS = ("acme", "globex", "initech")
#: ``--cluster``: the masters, the shards over them (four per master, as
#: docs/operations.md advises) and how long the killed master stays down (s)
CLUSTER_MASTERS = 3
CLUSTER_SHARDS = 12
MASTER_DOWN_S = (4.0, 8.0)
#: the one-off mix: kind -> share of the tasks
MIX: dict[str, float] = {
    "ok": 0.70,
    "slow": 0.05,
    "transient": 0.14,
    "permanent": 0.07,
    "timeout": 0.02,
    "cancel": 0.02,
}
#: seconds a "timeout" task sleeps, and its timeout
TIMEOUT_SLEEP_S = 1.5
TIMEOUT_S = 0.4
#: seconds a "cancel" task holds its slot unless cancelled
HOLD_S = 4.0


@dataclass(frozen=True, slots=True)
class TenantPlan:
    name: str
    weight: float
    cap: int


@dataclass(frozen=True, slots=True)
class JobPlan:
    name: str
    tenant: str
    every: str
    tasks: dict[str, Task]


@dataclass(frozen=True, slots=True)
class OneOff:
    """One task to submit: its kind (a key of :data:`MIX`), tenant, priority
    class, the chaos task and its arguments and per-call options."""

    kind: str
    tenant: str
    priority: str
    task: str
    args: tuple[object, ...]
    timeout: float | None = None
    retries: int | None = None


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    pool: str
    concurrency: int
    prefetch: int


@dataclass(frozen=True, slots=True)
class Event:
    """One thing the runner does at ``at`` seconds into the run: ``kill`` or
    ``stop`` (for ``hold`` seconds) worker ``target``, ``kill`` beat ``target``
    (``what`` = beat), ``kill`` the Redis server (down for ``hold`` seconds), or
    ``kill`` cluster master ``target`` (``what`` = master, down for ``hold``)."""

    at: float
    what: str  # worker | beat | redis | master
    action: str  # kill | stop
    target: int = 0
    hold: float = 0.0


@dataclass(frozen=True)
class Scenario:
    seed: int
    duration: float
    shards: int
    lease_ttl: float
    min_lease_ttl: float
    tenants: tuple[TenantPlan, ...]
    jobs: tuple[JobPlan, ...]
    waves: tuple[tuple[float, tuple[OneOff, ...]], ...]
    workers: tuple[WorkerPlan, ...]
    beats: int
    events: tuple[Event, ...]
    mix: dict[str, int] = field(default_factory=dict)
    #: masters of the local Redis Cluster the run starts (0: one redis-server)
    masters: int = 0

    @property
    def cluster(self) -> bool:
        return self.masters > 0

    @property
    def tasks(self) -> int:
        return sum(len(w) for _at, w in self.waves)


def dag(rng: random.Random) -> dict[str, Task]:
    """extract -> (a, b, c) -> join; extract -> broken -> after_broken.

    ``b`` fails on its first attempt and is retried; ``broken`` always fails, so
    ``after_broken`` ends upstream_failed and the run fails while the other
    branch goes on to ``join`` (fan-in of three)."""
    ms = rng.randint(5, 40)
    return {
        "extract": Task("chaos.step", kwargs={"ms": ms}),
        "a": Task("chaos.step", kwargs={"ms": ms}, depends_on=["extract"]),
        "b": Task("chaos.step", kwargs={"ms": ms, "fail_until": 2}, depends_on=["extract"]),
        "c": Task("chaos.step", kwargs={"ms": ms}, depends_on=["extract"]),
        "join": Task("chaos.step", kwargs={"ms": 1}, depends_on=["a", "b", "c"]),
        "broken": Task("chaos.broken", depends_on=["extract"]),
        "after_broken": Task("chaos.step", depends_on=["broken"]),
    }


def one_off(rng: random.Random, kind: str, tenant: str) -> OneOff:
    priority = rng.choices(("high", "normal", "low"), (1, 8, 1))[0]
    if kind == "ok":
        return OneOff(kind, tenant, priority, "chaos.work", (rng.randint(0, 20),))
    if kind == "slow":
        return OneOff(kind, tenant, priority, "chaos.work", (rng.randint(300, 1200),))
    if kind == "transient":
        return OneOff(kind, tenant, priority, "chaos.work", (rng.randint(0, 10), rng.randint(2, 3)))
    if kind == "permanent":
        return OneOff(kind, tenant, priority, "chaos.work", (rng.randint(0, 10), 0, True))
    if kind == "timeout":
        ms = int(TIMEOUT_SLEEP_S * 1000)
        return OneOff(kind, tenant, priority, "chaos.work", (ms,), timeout=TIMEOUT_S, retries=1)
    if kind == "cancel":
        return OneOff(kind, tenant, priority, "chaos.hold", (HOLD_S,))
    raise ValueError(f"unknown one-off kind {kind!r}")


def _times(
    rng: random.Random, start: float, gap: tuple[float, float], until: float
) -> Iterator[float]:
    """Times from ``start``, each a uniform draw in ``gap`` after the last, before
    ``until``.  Lazy: each gap is drawn when the next time is asked for, so what
    the caller draws in between keeps its place in ``rng``'s sequence."""
    t = start
    while True:
        t += rng.uniform(*gap)
        if t >= until:
            return
        yield t


def plan(seed: int, duration: float = 60.0, tasks: int = 10_000, cluster: bool = False) -> Scenario:
    """The scenario of ``seed``: ``duration`` seconds of chaos, ``tasks`` one-offs;
    with ``cluster``, on 12 shards over 3 masters, one of them killed (module doc)."""
    rng = random.Random(seed)
    weights = rng.sample([1.0, 2.0, 4.0], 3)
    caps = rng.sample([6, 12, 24], 3)
    masters, shards = (CLUSTER_MASTERS, CLUSTER_SHARDS) if cluster else (0, 2)
    names = spread_tenants(TENANTS, shards, masters) if cluster else TENANTS
    tenants = tuple(TenantPlan(n, w, c) for n, w, c in zip(names, weights, caps, strict=True))
    jobs = tuple(
        JobPlan(f"{t.name}-{every}", t.name, every, dag(rng))
        for t in tenants
        for every in ("1s", "2s")
    )
    # submissions: waves every 0.25 s over the first two thirds of the run
    kinds = list(MIX)
    shares = [MIX[k] for k in kinds]
    submit_until = max(1.0, duration * 2 / 3)
    n_waves = max(1, int(submit_until / 0.25))
    per_wave = [tasks // n_waves + (1 if i < tasks % n_waves else 0) for i in range(n_waves)]
    waves = []
    mix: dict[str, int] = dict.fromkeys(kinds, 0)
    for i, n in enumerate(per_wave):
        batch = []
        for _ in range(n):
            kind = rng.choices(kinds, shares)[0]
            mix[kind] += 1
            tenant = rng.choices(tenants, [t.weight for t in tenants])[0].name
            batch.append(one_off(rng, kind, tenant))
        waves.append((round(i * 0.25, 3), tuple(batch)))
    workers = (
        WorkerPlan("threads", 8, 8),
        WorkerPlan("threads", 4, 0),
        WorkerPlan("processes", 2, 2),
        WorkerPlan("processes", 2, 0),
    )
    events: list[Event] = []
    for t in _times(rng, 1.0, (1.5, 2.5), duration):
        if rng.random() < 0.5:
            events.append(Event(round(t, 3), "worker", "kill", rng.randrange(len(workers))))
        else:
            hold = rng.uniform(0.3, 4.0)  # longer than the lease TTL: a zombie
            events.append(
                Event(round(t, 3), "worker", "stop", rng.randrange(len(workers)), round(hold, 3))
            )
    for t in _times(rng, 2.0, (4.0, 6.0), duration):
        events.append(Event(round(t, 3), "beat", "kill", rng.randrange(2)))
    redis_at = duration * rng.uniform(0.35, 0.55)
    hold = round(rng.uniform(0.5, 1.5), 3)
    if cluster:
        master = rng.randrange(masters)
        down = round(rng.uniform(*MASTER_DOWN_S), 3)
        events.append(Event(round(redis_at, 3), "master", "kill", master, down))
    else:
        events.append(Event(round(redis_at, 3), "redis", "kill", 0, hold))
    events.sort(key=lambda e: e.at)
    return Scenario(
        seed=seed,
        duration=duration,
        shards=shards,
        lease_ttl=2.0,
        min_lease_ttl=1.0,
        tenants=tenants,
        jobs=jobs,
        waves=tuple(waves),
        workers=workers,
        beats=2,
        events=tuple(events),
        mix=mix,
        masters=masters,
    )
