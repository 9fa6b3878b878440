"""``redcron bench leases``: the design's lease envelope (issue 18 §3).

``N`` no-op tasks are enqueued over many tenants and leased in full by
simulated workers (no task body runs), each holding as many leases as a
default worker does (32 threads + 32 prefetched).  One thread plays every
worker's keeper: each worker renews all its leases in one ``heartbeat`` call
(its shard's, as ``worker/keeping.py`` does) once per heartbeat period, the
workers spread evenly over the period.  One thread per shard runs a
maintenance pass (``Maintenance.maintain``: promote, reap, prune) on it once
per ``maintenance_interval``: the rate the shard's maintenance lock allows
however many workers compete for it.

Phases: set-up (leases taken with a long TTL); one heartbeat period of
warm-up (every lease renewed once with the real TTL, the phases spread); the
measured window (every worker alive: the design's 15,000 heartbeats/s at
150,000 leases); half as long with maintenance paused, so that Redis CPU
splits into heartbeats (that window) and the reaper (the difference); then a
fraction of the workers is killed (their heartbeats stop) and the rest go on
until every killed lease is reaped.  A reap records its own server time in
the instance hash (``a:<n>:ended``), so lateness -- reap time minus the
lease's deadline, read just after the kill -- is read once at the end,
without polling anything.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from redcron.app import App
from redcron.cli.bench.fixtures import bench_run, p99
from redcron.cli.bench.lease_figures import (
    Usage,
    hb_offsets,
    interleave,
    killed,
    percentiles,
    profile,
    split,
    tenant_counts,
    usage_of,
    warm_up_s,
)
from redcron.config import WORKER_PREFETCH_PER_SLOT, WORKER_THREADS
from redcron.engine import Lease
from redcron.keys import shard_of
from redcron.urls import is_cluster_url

#: leases a default worker holds: its threads plus their prefetch
DEFAULT_PER_WORKER = WORKER_THREADS * (1 + WORKER_PREFETCH_PER_SLOT)
#: the design's ceiling for heartbeats and reaping together, % of one Redis core
CPU_TARGET_PCT = 25.0
#: most heartbeat calls one round trip carries when several are due at once
_HEARTBEAT_ROUND = 16
#: tasks per enqueue_many call in the set-up
_ENQUEUE_CHUNK = 1_000


@dataclass(frozen=True)
class LeaseBenchOptions:
    leases: int = 150_000
    heartbeat_s: float = 10.0
    #: the TTL each heartbeat sets; None: 1.5 x the heartbeat period
    ttl_s: float | None = None
    seconds: float = 20.0
    per_worker: int = DEFAULT_PER_WORKER
    kill_fraction: float = 0.1
    tenants: int = 100

    @property
    def ttl(self) -> float:
        return self.ttl_s if self.ttl_s is not None else 1.5 * self.heartbeat_s

    def check(self) -> None:
        """Refuse options that cannot make a run, naming the option."""
        if self.leases < 1:
            raise ValueError("--leases: must be >= 1")
        if self.heartbeat_s <= 0 or self.seconds <= 0:
            raise ValueError("--heartbeat-s and --seconds: must be > 0")
        if self.ttl <= self.heartbeat_s:
            raise ValueError(
                f"--ttl: {self.ttl}s must be longer than --heartbeat-s {self.heartbeat_s}s, "
                "or live leases expire between heartbeats"
            )
        if not 1 <= self.per_worker <= 256:
            raise ValueError("--per-worker: must be 1..256 (one lease call's batch)")
        if not 0 < self.kill_fraction < 1:
            raise ValueError("--kill: a fraction of the workers, 0 < f < 1")
        if self.tenants < 1:
            raise ValueError("--tenants: must be >= 1")


# -- the run ---------------------------------------------------------------------


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _Redis:
    """The INFO reads the bench takes, on one server or every master."""

    def __init__(self, client: Any, url: str) -> None:
        self.client = client
        self.cluster = is_cluster_url(url)

    def _info(self, section: str) -> list[dict[str, Any]]:
        if self.cluster:
            reply = self.client.info(section, target_nodes="primaries")
            return list(reply.values())
        return [self.client.info(section)]

    def usage(self) -> Usage:
        return usage_of(self._info("cpu"), self._info("commandstats"))

    def masters(self) -> int:
        return len(self._info("cpu"))


@dataclass
class _Worker:
    id: str
    shard: int
    leases: list[Lease]
    offset: float
    alive: bool = True
    tokens: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tokens = [(lease.iid, lease.epoch) for lease in self.leases]


@dataclass
class _Phase:
    """What one stretch of the keepers did."""

    seconds: float = 0.0
    total: Usage = field(default_factory=Usage)
    calls: int = 0
    renewed: int = 0
    lost: int = 0
    lag_ms: list[int] = field(default_factory=list)
    #: wall time of each maintenance pass (of one shard)
    pass_ms: list[int] = field(default_factory=list)

    def extend(self, more: _Phase) -> None:
        """Count ``more`` (the next stretch) in this phase."""
        self.seconds += more.seconds
        self.total.add(more.total)
        self.calls += more.calls
        self.renewed += more.renewed
        self.lost += more.lost
        self.lag_ms += more.lag_ms
        self.pass_ms += more.pass_ms


class _Keepers:
    """Every simulated worker's keeper: one thread heartbeats for them all, each
    worker at its phase; one more per shard runs that shard's maintenance
    passes (as the keeper holding its maintenance lock would, concurrently
    with the others' heartbeats)."""

    def __init__(self, bapp: App, workers: list[_Worker], period_s: float, ttl_ms: int) -> None:
        self.bapp = bapp
        self.redis = _Redis(bapp.broker.client, bapp.settings.redis_url)
        self.workers = workers
        self.period = period_s
        self.ttl_ms = ttl_ms
        self.interval = bapp.settings.maintenance_interval
        self.shards = bapp.broker.shards
        self.start = time.monotonic()
        self.cycle = 0
        self.next = 0  # index of the next worker to heartbeat

    def run(
        self, seconds: float, maintain: bool = True, until: Callable[[], bool] | None = None
    ) -> _Phase:
        """Heartbeat (and with ``maintain``, run maintenance passes) for ``seconds``
        or until ``until()`` (asked twice a second) is true."""
        phase = _Phase()
        before = self.redis.usage()
        t0 = time.monotonic()
        stop = threading.Event()
        # one maintainer per shard: the shards' locks are held by whichever
        # workers took them, each on its own
        passes = [
            threading.Thread(target=self._maintain, args=(stop, phase, shard), daemon=True)
            for shard in (range(self.shards) if maintain else ())
        ]
        for t in passes:
            t.start()
        try:
            self._heartbeat(phase, t0 + seconds, until)
        finally:
            stop.set()
            for t in passes:
                t.join()
        phase.seconds = time.monotonic() - t0
        phase.total = self.redis.usage().minus(before)
        return phase

    def _heartbeat(self, phase: _Phase, end: float, until: Callable[[], bool] | None) -> None:
        """Each worker's heartbeat at its phase; those due together (the thread
        fell behind) share a round trip, each still its own script call."""
        heartbeat_many = self.bapp.broker.leases.heartbeat_many
        n = len(self.workers)
        next_check = time.monotonic() + 0.5 if until is not None else end
        while True:
            now = time.monotonic()
            if now >= end:
                return
            if until is not None and now >= next_check:
                if until():
                    return
                next_check = now + 0.5
            batch: list[_Worker] = []
            while len(batch) < _HEARTBEAT_ROUND:
                due = self.start + self.cycle * self.period + self.workers[self.next].offset
                if now < due:
                    break
                w = self.workers[self.next]
                self.next += 1
                if self.next == n:
                    self.next = 0
                    self.cycle += 1
                if w.alive:
                    batch.append(w)
                    phase.lag_ms.append(int((now - due) * 1000))
            if not batch:
                time.sleep(max(0.0, min(due, end, next_check) - now))
                continue
            beats = heartbeat_many([(w.shard, w.id, self.ttl_ms, w.tokens) for w in batch])
            for w, (lost, _revoked) in zip(batch, beats, strict=True):
                phase.calls += 1
                phase.renewed += len(w.tokens) - len(lost)
                phase.lost += len(lost)

    def _maintain(self, stop: threading.Event, phase: _Phase, shard: int) -> None:
        """A pass over ``shard`` once per maintenance interval: the rate its
        maintenance lock allows however many workers compete for it."""
        maintain = self.bapp.broker.maintenance.maintain
        nxt = time.monotonic()
        while not stop.is_set():
            t = time.monotonic()
            maintain(shard)
            phase.pass_ms.append(int((time.monotonic() - t) * 1000))
            nxt = max(nxt + self.interval, time.monotonic())
            stop.wait(max(0.0, nxt - time.monotonic()))


def _setup(bapp: App, opts: LeaseBenchOptions) -> list[_Worker]:
    """Enqueue the tasks and lease them all to simulated workers (long TTL: the
    warm-up's first heartbeats set the real one)."""
    noop = bapp.tasks["bench.noop"]
    shards = bapp.broker.shards
    per_shard = [0] * shards
    done = 0
    for i, count in enumerate(tenant_counts(opts.leases, opts.tenants)):
        tenant = f"t{i}"
        per_shard[shard_of(tenant, shards)] += count
        for j in range(0, count, _ENQUEUE_CHUNK):
            noop.enqueue_many([()] * min(_ENQUEUE_CHUNK, count - j), _tenant=tenant)
        done += count
        if i % 10 == 9:
            _progress(f"enqueued {done:,}/{opts.leases:,}")
    setup_ttl_ms = int(max(600.0, 4 * opts.ttl) * 1000)
    held: list[tuple[str, int, list[Lease]]] = []
    lease = bapp.broker.leases.lease
    for shard, want in enumerate(per_shard):
        got = 0
        while got < want:
            wid = f"bench-w{len(held)}"
            batch = lease(shard, wid, min(opts.per_worker, want - got), setup_ttl_ms, ["default"])
            if not batch:
                raise RuntimeError(f"shard {shard}: {want - got} tasks could not be leased")
            held.append((wid, shard, batch))
            got += len(batch)
        _progress(f"leased shard {shard}: {got:,} to {sum(1 for h in held if h[1] == shard)}")
    # the shards interleaved over the heartbeat phases, as workers serving
    # different shards would be
    held = interleave([[h for h in held if h[1] == s] for s in range(shards)])
    offsets = hb_offsets(len(held), opts.heartbeat_s)
    return [
        _Worker(wid, shard, ls, off) for (wid, shard, ls), off in zip(held, offsets, strict=True)
    ]


def _expired(bapp: App) -> int:
    client, keys = bapp.broker.client, bapp.broker.keys
    pipe = client.pipeline(transaction=False)
    for shard in range(bapp.broker.shards):
        pipe.hget(keys.counters(shard), "lease_expired")
    return sum(int(x or 0) for x in pipe.execute())


def _read(bapp: App, leases: Sequence[Lease], fields: Callable[[Lease], list[str]]) -> list[Any]:
    client, keys = bapp.broker.client, bapp.broker.keys
    out: list[Any] = []
    for i in range(0, len(leases), 5_000):
        pipe = client.pipeline(transaction=False)
        for lease in leases[i : i + 5_000]:
            pipe.hmget(keys.ti(lease.shard, lease.iid), fields(lease))
        out += pipe.execute()
    return out


def lease_bench(
    opts: LeaseBenchOptions,
    redis_url: str | None,
    cluster: bool = False,
    shards: int | None = None,
) -> dict[str, Any]:
    """Run the lease envelope (module docstring) and return its figures: on
    ``redis_url`` (None: a fresh embedded server; ``cluster``: a local cluster of
    3 masters), with ``shards`` shards (``cluster``: 12)."""
    opts.check()
    masters = 3 if cluster else 0
    if cluster and shards is None:
        shards = 12
    with bench_run(redis_url, "rclease", masters=masters, shards=shards) as run:
        bapp = run.app
        min_ttl_ms = bapp.broker.min_idle_ms
        if opts.ttl * 1000 < min_ttl_ms:
            raise ValueError(
                f"--ttl: {opts.ttl}s is below the deployment's min_lease_ttl "
                f"({min_ttl_ms / 1000}s); use a longer --ttl"
            )
        t0 = time.perf_counter()
        workers = _setup(bapp, opts)
        setup_s = time.perf_counter() - t0
        ttl_ms = int(opts.ttl * 1000)
        interval_ms = int(bapp.settings.maintenance_interval * 1000)
        keepers = _Keepers(bapp, workers, opts.heartbeat_s, ttl_ms)
        # until the reaper is in its stride: a stream is first due at its first
        # lease deadline (one TTL after the first heartbeat), then every minimum TTL
        warm_s = warm_up_s(opts.heartbeat_s, opts.ttl, min_ttl_ms / 1000)
        _progress(f"warm-up: {warm_s:g}s (heartbeats spread, the reaper's looks begun)")
        keepers.run(warm_s)
        _progress(f"measuring {opts.seconds:g}s with every worker alive")
        window = keepers.run(opts.seconds)
        _progress(f"measuring {opts.seconds / 2:g}s of heartbeats alone (maintenance paused)")
        alone = keepers.run(opts.seconds / 2, maintain=False)
        expired_live = _expired(bapp)
        # -- kill ----------------------------------------------------------------
        dead = [workers[i] for i in killed(len(workers), opts.kill_fraction)]
        for w in dead:
            w.alive = False
        victims = [lease for w in dead for lease in w.leases]
        deadlines = [int(d) if d else None for (d,) in _read(bapp, victims, lambda _: ["deadline"])]
        latest = max((d for d in deadlines if d is not None), default=0)
        wait_s = (latest - _server_ms(bapp)) / 1000 + (min_ttl_ms + interval_ms) / 1000 + 30
        _progress(f"killed {len(dead)} workers ({len(victims):,} leases); waiting for the reaper")
        target = expired_live + len(victims)
        give_up = time.monotonic() + max(1.0, wait_s)
        tail = keepers.run(max(1.0, wait_s), until=lambda: _expired(bapp) >= target)

        def ends() -> list[Any]:
            return _read(
                bapp, victims, lambda ls: [f"a:{ls.attempt}:ended", f"a:{ls.attempt}:outcome"]
            )

        ended = ends()
        # live leases lost (a simulation that fell behind) count as expired too:
        # make sure of the victims themselves
        while time.monotonic() < give_up and not all(e for e, _ in ended):
            tail.extend(keepers.run(0.5))
            ended = ends()
        if window.lost + alone.lost + tail.lost:
            _progress(
                "warning: live leases were lost: the simulated workers fell behind their "
                "heartbeats (see heartbeat_lag_p99_ms); the machine is too busy for this "
                "size, so these figures do not describe the design's load"
            )
        late = [
            int(e) - d
            for (e, outcome), d in zip(ended, deadlines, strict=True)
            if e and d is not None and outcome in (b"lost", b"timed_out")
        ]
        shares = split(window.total, window.seconds, alone.total, alone.seconds)
        # the kill phase's reaper: its Redis CPU less the heartbeats of the
        # workers still alive, at the cost per renewal measured alone
        hb_pct = shares["heartbeat_cpu_pct"] * _rate(tail) / max(_rate(alone), 1e-9)
        tail_pct = round(100 * tail.total.cpu / tail.seconds, 1)
        spread = percentiles(late)
        bound_ms = min_ttl_ms + interval_ms
        worst_cpu = max(shares["redis_cpu_pct"], tail_pct)
        reap_ok = (
            len(late) == len(victims) and spread["max"] is not None and spread["max"] <= bound_ms
        )
        return {
            "leases": sum(len(w.leases) for w in workers),
            "workers": len(workers),
            "leases_per_worker": opts.per_worker,
            "shards": bapp.broker.shards,
            "masters": keepers.redis.masters(),
            "tenants": opts.tenants,
            "heartbeat_s": opts.heartbeat_s,
            "ttl_s": opts.ttl,
            "min_ttl_s": min_ttl_ms / 1000,
            "maintenance_interval_s": interval_ms / 1000,
            "window_s": round(window.seconds, 1),
            "heartbeats_per_s": round(_rate(window)),
            "heartbeat_calls_per_s": round(window.calls / window.seconds),
            "heartbeat_lag_p99_ms": p99(sorted(window.lag_ms)) if window.lag_ms else None,
            "heartbeat_us_per_lease": round(alone.total.scripts * 1e6 / max(1, alone.renewed), 2),
            **shares,
            "heartbeat_profile_pct": profile(alone.total, alone.seconds),
            "reaper_profile_pct": profile(window.total, window.seconds, alone.total, alone.seconds),
            "maintenance_passes_per_shard_s": round(
                len(window.pass_ms) / window.seconds / bapp.broker.shards, 1
            ),
            "maintenance_pass_ms_p99": p99(sorted(window.pass_ms)) if window.pass_ms else None,
            "lost_live_leases": window.lost + alone.lost + tail.lost,
            "expired_live_leases": expired_live,
            "killed_leases": len(victims),
            "reaped": len(late),
            "reap_late_p50_ms": spread["p50"],
            "reap_late_p99_ms": spread["p99"],
            "reap_late_max_ms": spread["max"],
            "kill_phase_s": round(tail.seconds, 1),
            "kill_phase_redis_cpu_pct": tail_pct,
            "kill_phase_reaper_cpu_pct": round(tail_pct - hb_pct, 1),
            "cpu_target_pct": CPU_TARGET_PCT,
            "cpu_target_met": worst_cpu <= CPU_TARGET_PCT,
            "reap_bound_ms": bound_ms,
            "reap_target_met": reap_ok,
            "setup_s": round(setup_s, 1),
        }


def _rate(phase: _Phase) -> float:
    """Leases renewed per second."""
    return phase.renewed / max(phase.seconds, 1e-9)


def _server_ms(bapp: App) -> int:
    return int(bapp.jobs.server_now().timestamp() * 1000)
