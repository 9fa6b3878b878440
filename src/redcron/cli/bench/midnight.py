"""``redcron bench midnight``: the design's promise measured end to end.

SCHEDULES cron schedules over TENANTS tenants, DUE of them due in the same
second (no jitter, no ``H``: they really collide), the rest once a year; one
beat and WORKERS worker processes (no-op body) take the burst.  Per task the
delay from the nominal fire time to its start (``started`` in the instance
hash, or ``a:1:s`` once the attempt ended other than by success, written by
``start.lua`` on the server clock; a worker marks only attempts that outlive
its 50 ms tick, so a no-op's start is bounded by its end, ``ended``, and that
bound is what counts: never earlier than the truth), fires and starts per
second, the Jain index of starts per tenant while every tenant still has work
pending, the due fires that never produced a finished task, Redis memory and
CPU, the CPU of the beat and the workers over the burst, and set-up time; the
design's targets marked met or not.  Figures are defined in
``docs/benchmarks.md``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import click

from redcron.app import App
from redcron.cli.bench.fixtures import (
    BenchRun,
    beat_process,
    bench_run,
    idle_jobs,
    jain_index,
    percentile,
    proc_cpu_s,
    redis_cpu_s,
    redis_used_memory,
    wait_all_done,
    worker_process,
)
from redcron.keys import MAINT_BEAT_OWNER, run_id, shard_of_id
from redcron.model.jobs import JobSpec, Task
from redcron.model.states import TaskState
from redcron.schedule.timeutil import to_ms

#: the design's targets (DESIGN §9, issue 18 §2)
START_WITHIN_MS = 30_000
START_WITHIN_SHARE = 0.99
JAIN_TARGET = 0.95
#: reads per pipeline when the instance hashes are collected
READ_CHUNK = 5_000
#: the due task's name in each job (one task: the instance id is run id + "/t")
TASK = "t"


def default_workers(cores: int | None = None) -> int:
    """Worker processes sized to the machine: one per core but one, which is
    left to Redis (single-threaded, on CPU about as long per task as a worker
    in the burst) and the beat (busy only while it fires); at least one."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return max(1, cores - 1)


@dataclass(frozen=True)
class Instance:
    """What the bench reads of one due task: its tenant and the server-clock
    times (ms) it was created (the fire), first leased, marked running and
    ended; None: not (yet)."""

    tenant: str
    created: int | None
    leased: int | None
    running: int | None
    ended: int | None
    succeeded: bool

    @property
    def started(self) -> int | None:
        """When the task started: its running mark, else its end (a no-op ends
        within the worker's tick, unmarked; it started by then)."""
        return self.running if self.running is not None else self.ended


def due_jobs(due: int, tenants: int, target: datetime) -> list[JobSpec]:
    """``due`` jobs round-robin over ``tenants`` tenants, all due at the second
    ``target`` (a 6-field cron, daily): no jitter of their own and no ``H``."""
    expr = f"{target.second} {target.minute} {target.hour} * * *"
    return [
        JobSpec(
            name=f"due{i}",
            tenant=f"t{i % tenants}",
            cron=expr,
            jitter_s=0.0,
            tasks={TASK: Task("bench.noop")},
        )
        for i in range(due)
    ]


def jain_in_burst(starts: dict[str, list[int]], demand: dict[str, int]) -> float | None:
    """The Jain index of starts per tenant over the window in which every tenant
    still had work pending: from the burst's start until the first tenant's last
    start (inclusive).  ``starts`` maps a tenant to its tasks' start times,
    ``demand`` every tenant to its due tasks (a tenant without starts counts 0).
    None when a tenant has fewer than 2 due tasks: its only start ends the
    window, and shares of 0 or 1 start say nothing about fairness."""
    if not demand or min(demand.values()) < 2:
        return None
    window_end = min((max(starts[t]) for t in demand if starts.get(t)), default=0)
    counts = [sum(1 for ms in starts.get(t, ()) if ms <= window_end) for t in demand]
    return jain_index(counts)


def mark_targets(
    started_within_share: float, jain: float | None, dropped: int
) -> dict[str, dict[str, Any]]:
    """The design's three targets, each with its value and whether it was met
    (``met`` None: not measured, a Jain index without 2 due tasks per tenant)."""
    return {
        "started_within_30s": {
            "value": round(started_within_share, 4),
            "target": f">= {START_WITHIN_SHARE}",
            "met": started_within_share >= START_WITHIN_SHARE,
        },
        "jain": {
            "value": None if jain is None else round(jain, 4),
            "target": f">= {JAIN_TARGET}",
            "met": None if jain is None else jain >= JAIN_TARGET,
        },
        "dropped": {"value": dropped, "target": "== 0", "met": dropped == 0},
    }


def rate_per_s(count: int, start_ms: int, times: Sequence[int]) -> float:
    """``count`` events over the span from ``start_ms`` (the nominal fire
    time) to the last of ``times`` (at least 1 ms); 0 without events."""
    if not count or not times:
        return 0.0
    return count / (max(1, max(times) - start_ms) / 1000)


def delay_figures(prefix: str, delays: Sequence[int]) -> dict[str, int | None]:
    """p50, p99 and max of ``delays`` (ms) as ``<prefix>_p50_ms`` ...; None
    when there are none."""
    ordered = sorted(delays)
    pick: dict[str, Callable[[Sequence[int]], int]] = {
        "p50": lambda d: percentile(d, 0.5),
        "p99": lambda d: percentile(d, 0.99),
        "max": lambda d: d[-1],
    }
    return {f"{prefix}_{k}_ms": (f(ordered) if ordered else None) for k, f in pick.items()}


class _Progress:
    """Set-up progress on stderr, at most one line every two seconds per phase."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - self.last >= 2.0:
            self.last = now
            click.echo(f"midnight: registered {done:,}/{total:,} {self.what}", err=True)


def _register(bapp: App, specs: list[JobSpec], what: str) -> tuple[list[str], float]:
    """put_many ``specs``; their job ids and the seconds it took."""
    click.echo(f"midnight: registering {len(specs):,} {what}", err=True)
    t0 = time.perf_counter()
    changes = bapp.jobs.put_many(specs, progress=_Progress(what)) if specs else []
    return [c.id for c in changes], time.perf_counter() - t0


def _lead_s(due: int, put_per_s: float) -> float:
    """How far ahead the due second is set when the idle schedules are in:
    twice the due schedules' expected registration time (a shared machine is
    noisy) plus 10 s to start the processes and let them settle."""
    return 2 * due / max(put_per_s, 1.0) + 10.0


@contextmanager
def _processes(run: BenchRun, workers: int) -> Iterator[dict[str, list[int]]]:
    """One beat and ``workers`` worker processes (threads pool, the worker's
    default slots and prefetch): their pids by role."""
    with ExitStack() as stack:
        beat = stack.enter_context(beat_process(run.url, run.prefix))
        pids = [
            stack.enter_context(worker_process(run.url, run.prefix, None, "threads", None)).pid
            for _ in range(workers)
        ]
        yield {"beat": [beat.pid], "workers": pids}


def _wait_ready(bapp: App, workers: int, until_ms: int) -> None:
    """Wait until every shard has a beat owner and ``workers`` workers are
    registered, before the server clock reaches ``until_ms``."""
    client = bapp.broker.client
    keys = bapp.broker.keys
    shards = range(bapp.broker.shards)
    while True:
        pipe = client.pipeline(transaction=False)
        for shard in shards:
            pipe.hget(keys.maintenance(shard), MAINT_BEAT_OWNER)
        owners = pipe.execute()
        if all(owners) and client.zcard(keys.workers()) >= workers:
            return
        if bapp.broker.server_ms() >= until_ms:
            raise RuntimeError(
                "the beat and workers were not ready before the due second; "
                "use fewer --schedules or --workers on this machine"
            )
        time.sleep(0.1)


def _sleep_until(bapp: App, target_ms: int) -> None:
    """Sleep until the server clock reaches ``target_ms``."""
    while (left := target_ms - bapp.broker.server_ms()) > 0:
        time.sleep(min(left / 1000, 0.5))


def _read_instances(bapp: App, job_ids: Sequence[str], target_ms: int) -> list[Instance]:
    """Each due job's task instance of the burst, read from its own shard
    (the job id carries it) in pipelines of :data:`READ_CHUNK`."""
    client = bapp.broker.client
    keys = bapp.broker.keys
    out: list[Instance] = []
    for c in range(0, len(job_ids), READ_CHUNK):
        pipe = client.pipeline(transaction=False)
        for jid in job_ids[c : c + READ_CHUNK]:
            iid = f"{run_id(jid, target_ms)}/{TASK}"
            pipe.hmget(keys.ti(shard_of_id(jid), iid), "tenant", "state", "created",
                       "a:1:l", "leased", "a:1:s", "started", "a:1:ended", "ended")  # fmt: skip
        for tenant, state, *times in pipe.execute():
            # the first attempt's times: a:1:* once it ended other than by success,
            # else the instance's own (a succeeded last attempt keeps them there)
            created, a_l, leased, a_s, running, a_ended, ended = (
                int(t) if t else None for t in times
            )
            leased, running, ended = a_l or leased, a_s or running, a_ended or ended
            out.append(
                Instance(
                    tenant=tenant.decode() if tenant else "",
                    created=created,
                    leased=leased,
                    running=running,
                    ended=ended,
                    succeeded=state == TaskState.SUCCEEDED.encode(),
                )
            )
    return out


def summarize(instances: Sequence[Instance], target_ms: int) -> dict[str, Any]:
    """The burst's figures from its instances (pure): delays, rates, Jain, drops."""
    due = len(instances)
    created = [i.created for i in instances if i.created is not None]
    leased = [i.leased for i in instances if i.leased is not None]
    started: list[int] = []
    starts: dict[str, list[int]] = {}
    demand: dict[str, int] = {}
    for i in instances:
        demand[i.tenant] = demand.get(i.tenant, 0) + 1
        if (ms := i.started) is not None:
            started.append(ms)
            starts.setdefault(i.tenant, []).append(ms)
    dropped = sum(1 for i in instances if not (i.succeeded and i.started is not None))
    within = sum(1 for ms in started if ms - target_ms <= START_WITHIN_MS)
    share = within / due if due else 1.0
    jain = jain_in_burst(starts, demand)
    return {
        "fired": len(created),
        "started": len(started),
        "dropped": dropped,
        **delay_figures("start_delay", [ms - target_ms for ms in started]),
        **delay_figures("fire_delay", [ms - target_ms for ms in created]),
        **delay_figures("lease_delay", [ms - target_ms for ms in leased]),
        "started_within_30s_pct": round(100 * share, 2),
        "fires_per_s": round(rate_per_s(len(created), target_ms, created)),
        "starts_per_s": round(rate_per_s(len(started), target_ms, started)),
        "jain_index": None if jain is None else round(jain, 4),
        "targets": mark_targets(share, jain, dropped),
    }


@dataclass(frozen=True)
class _SetUp:
    """What registration left: the due jobs' ids, their due second and how long
    it took."""

    due_ids: list[str]
    target: datetime
    seconds: float


@dataclass(frozen=True)
class _Burst:
    """The burst as the processes saw it: wall time, CPU seconds by role, and
    whether the wait for the last success gave up."""

    seconds: float
    cpu_s: dict[str, float]
    timed_out: bool


def _set_up(bapp: App, schedules: int, tenants: int, due: int) -> _SetUp:
    """Register the idle schedules, then the due ones for a second far enough
    ahead (:func:`_lead_s`, at the rate the idle ones went in)."""
    _, idle_s = _register(bapp, idle_jobs(schedules - due, tenants), "idle schedules")
    rate = (schedules - due) / idle_s if schedules > due and idle_s > 0 else 5_000.0
    now = bapp.jobs.server_now()
    target = (now + timedelta(seconds=_lead_s(due, rate))).replace(microsecond=0)
    due_ids, due_s = _register(bapp, due_jobs(due, tenants, target), "due schedules")
    return _SetUp(due_ids, target, idle_s + due_s)


def _burst(run: BenchRun, workers: int, setup: _SetUp) -> _Burst:
    """Start the processes, wait for them and for the due second, then for
    every due task to succeed; CPU by role over that window."""
    bapp = run.app
    target_ms = to_ms(setup.target)
    due = len(setup.due_ids)
    click.echo(f"midnight: starting 1 beat, {workers} workers", err=True)
    with _processes(run, workers) as pids:
        _wait_ready(bapp, workers, target_ms - 500)
        click.echo(f"midnight: ready; {due:,} due at {setup.target.isoformat()}", err=True)
        _sleep_until(bapp, target_ms - 200)
        cpu0 = _cpu(bapp, pids)
        wall0 = time.monotonic()
        timed_out = False
        try:
            wait_all_done(bapp, [f"{run_id(j, target_ms)}/{TASK}" for j in setup.due_ids],
                          timeout_s=120 + due / 200)  # fmt: skip
        except TimeoutError:
            timed_out = True
        wall = time.monotonic() - wall0
        cpu = {k: round(v - cpu0[k], 2) for k, v in _cpu(bapp, pids).items()}
    return _Burst(wall, cpu, timed_out)


def midnight(
    schedules: int,
    tenants: int,
    due: int,
    workers: int | None,
    redis_url: str | None,
    masters: int = 0,
    shards: int | None = None,
) -> dict[str, Any]:
    """Run the midnight burst (see the module docstring); ``masters`` > 0 starts
    a local cluster of that many masters for the run."""
    if not 0 < tenants <= due <= schedules:
        raise ValueError("need 0 < tenants <= due <= schedules")
    workers = workers or default_workers()
    with bench_run(redis_url, "rcmid", masters=masters, shards=shards) as run:
        bapp = run.app
        setup = _set_up(bapp, schedules, tenants, due)
        memory_setup = redis_used_memory(bapp)
        click.echo(f"midnight: set up in {setup.seconds:.1f} s", err=True)
        burst = _burst(run, workers, setup)
        instances = _read_instances(bapp, setup.due_ids, to_ms(setup.target))
        figures = summarize(instances, to_ms(setup.target))
        return {
            "schedules": schedules,
            "tenants": tenants,
            "due": due,
            "shards": bapp.broker.shards,
            "masters": len(bapp.broker.server_info("server")),
            "beats": 1,
            "workers": workers,
            **figures,
            "timed_out": burst.timed_out,
            "burst_s": round(burst.seconds, 2),
            "cpu_s": burst.cpu_s,
            "redis_cpu_pct": round(100 * burst.cpu_s["redis"] / burst.seconds, 1),
            "redis_used_memory_setup_mb": round(memory_setup / 2**20, 1),
            "redis_used_memory_mb": round(redis_used_memory(bapp) / 2**20, 1),
            "setup_s": round(setup.seconds, 1),
            "targets_met": all(t["met"] is not False for t in figures["targets"].values()),
        }


def _cpu(bapp: App, pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far of Redis (every master), the beat and the workers."""
    out = {"redis": sum(redis_cpu_s(bapp))}
    for role, ps in pids.items():
        out[role] = sum(proc_cpu_s(p) for p in ps)
    return out
