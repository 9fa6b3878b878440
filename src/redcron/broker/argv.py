"""Every script's ARGV, laid out in one place.

Each function here mirrors the ARGV header of one ``lua/<name>.lua`` and is
the only code that builds that script's arguments: the broker, the job
store, the beat and the tests' Lua helpers all call it, so a layout cannot
drift between callers.

``now`` is for tests only: ``None`` (production) sends ``""`` and the script
reads the Redis server clock (``TIME``); an int is used as the script's
current time in ms, so a test can step time without sleeping.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple


class EnqueueRow(NamedTuple):
    """One task instance to create, as enqueue.lua takes it (its ARGV header).

    The App builds these (validated); only :func:`enqueue` knows their order on
    the wire, and lays the fields out in the order they are declared here.
    A NamedTuple, not a frozen dataclass: a frozen dataclass's ``__init__``
    sets each of its 15 fields through ``object.__setattr__``, ~2.2 µs a row
    against ~0.9 µs for this (measured on the App's ``enqueue_many`` path,
    about 35 µs a row in all); read it by name all the same.
    """

    iid: str
    name: str
    kind: str  # python | command | container
    args: bytes  # msgpack
    queue: str
    tenant: str
    priority: str
    timeout_ms: int
    max_attempts: int
    retry_base_ms: int
    retry_cap_ms: int
    delay_ms: int
    result_ttl_s: int
    cpu: float | None = None  # cores (None: no request)
    mem: int | None = None  # bytes (None: no request)
    # unique window / debounce (issue 21 §4): model/dedupe.py wire(), "" = none
    dedupe: str = ""
    # concurrency key (lib/ckeys.lua): its value ("" = none) and max_concurrent;
    # the last two fields, sent only by a call that has a keyed row (CK_F in
    # enqueue.lua = ENQUEUE_FIELDS + 2)
    ck: str = ""
    ckn: int = 0


#: values per task in enqueue.lua's ARGV (without the concurrency key's two)
ENQUEUE_FIELDS = len(EnqueueRow._fields) - 2


@dataclass(frozen=True, slots=True)
class FailItem:
    """One failed (or timed out, or cancelled) attempt to report."""

    iid: str
    epoch: str
    outcome: str  # failed | timed_out | lost | cancelled
    error: str
    retryable: bool
    delay_ms: int | None = None
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class FireArgs:
    """One fire of one job, as fire.lua takes it (ARGV[1..12])."""

    job_id: str
    expected: int | str  # due score the caller read ("" = not from the schedule)
    version: str  # job version the caller computed with ("" = any)
    fire_ms: int | str  # nominal fire time ("" = now: manual runs)
    next_ms: int | None  # next nominal fire time (None: leaves the schedule)
    next_due: int | None  # next due score (nominal + jitter)
    epoch: str  # owner epoch of the calling beat ("" = not a beat)
    trigger: str  # cron | every | at | catchup | manual | skip
    skipped: int  # missed fires skipped by the catch-up policy
    run_id: str
    params: str = ""  # JSON text (manual runs)


def clock(now: int | None) -> int | str:
    """A script's now_override: ``""`` = the server clock."""
    return "" if now is None else now


def flat(head: list[Any], groups: Iterable[Sequence[Any]]) -> list[Any]:
    """Fixed head values, then each group's values in order."""
    return [*head, *(v for group in groups for v in group)]


def enqueue(rows: Iterable[EnqueueRow], now: int | None = None) -> list[Any]:
    """enqueue.lua: every row's 16 fields (resource requests "" when None), 18
    when a row of the call has a concurrency key (ck, ckn; "" for the others)."""
    rows = list(rows)
    with_ck = any(r.ck for r in rows)
    args: list[Any] = [clock(now), ENQUEUE_FIELDS + 2 if with_ck else ENQUEUE_FIELDS]
    for r in rows:
        args += r[:13]  # EnqueueRow declares its fields in ARGV order
        args.append("" if r.cpu is None else r.cpu)
        args.append("" if r.mem is None else r.mem)
        args.append(r.dedupe)
        if with_ck:
            args += (r.ck, r.ckn) if r.ck else ("", "")
    return args


def enqueue_check(
    admission: Mapping[str, int] | None, ids: Sequence[str], granted: Iterable[str] = ()
) -> list[Any]:
    """enqueue_check.lua: ``admission`` = tenant -> instances the whole batch makes
    ready at once on this shard (None: not checked by this call); ``granted``:
    tenants whose command or container rows need the grant ``allow_commands``."""
    return ["" if admission is None else json.dumps(admission), ",".join(sorted(granted)), *ids]


def lease(
    worker: str,
    max_tasks: int,
    ttl_ms: int,
    queues: Sequence[str],
    *,
    tenants: Sequence[str] = (),
    quantum: float | str = "",
    aging_ms: int | str = "",
    capacity: tuple[float | None, int | None] = (None, None),
    metrics: str = "full",
    now: int | None = None,
) -> list[Any]:
    """lease.lua: ``capacity`` is the worker's free (cpu, mem), None = no limit;
    ``metrics`` the deployment's Settings.metrics (basic: no share-of-dispatch counts)."""
    cpu, mem = capacity
    cap = (
        ""
        if capacity == (None, None)
        else f"{'' if cpu is None else cpu},{'' if mem is None else mem}"
    )
    return [worker, max_tasks, ttl_ms, clock(now), ",".join(tenants), quantum, aging_ms, cap,
            metrics, *queues]  # fmt: skip


def tokens(worker: str, pairs: Iterable[tuple[str, str]], now: int | None = None) -> list[Any]:
    """start.lua and release.lua: (iid, epoch) pairs."""
    return flat([worker, clock(now)], pairs)


def heartbeat(
    worker: str, ttl_ms: int, pairs: Iterable[tuple[str, str]], now: int | None = None
) -> list[Any]:
    return flat([worker, ttl_ms, clock(now)], pairs)


def complete(
    worker: str, items: Iterable[tuple[str, str, bytes]], now: int | None = None
) -> list[Any]:
    """complete.lua: (iid, epoch, msgpack result) triples."""
    return flat([worker, clock(now)], items)


def fail(
    worker: str,
    items: Iterable[FailItem],
    now: int | None = None,
    jitter: float | None = None,
) -> list[Any]:
    """fail.lua.  Redis seeds Lua's ``random`` identically on every call, so the
    backoff's jitter fraction is rolled here (``jitter`` fixes it for tests)."""
    args: list[Any] = [worker, clock(now)]
    for it in items:
        args += [
            it.iid,
            it.epoch,
            it.outcome,
            it.error,
            "1" if it.retryable else "0",
            "" if it.delay_ms is None else max(0, int(it.delay_ms)),
            random.random() if jitter is None else jitter,
            "" if it.exit_code is None else it.exit_code,
        ]
    return args


def reap(
    limit: int, min_idle_ms: int, now: int | None = None, jitter: float | None = None
) -> list[Any]:
    return [clock(now), limit, random.random() if jitter is None else jitter, min_idle_ms]


def promote(limit: int, now: int | None = None) -> list[Any]:
    return [clock(now), limit]


def follow_ends(metrics: str, ids: Sequence[str]) -> list[Any]:
    return [metrics, *ids]


def cancel(iid: str, now: int | None = None) -> list[Any]:
    return [iid, clock(now)]


def dlq_replay(iids: Sequence[str], now: int | None = None) -> list[Any]:
    return [clock(now), *iids]


def dlq_discard(iids: Sequence[str], now: int | None = None) -> list[Any]:
    return [clock(now), *iids]


def fire(f: FireArgs, now: int | None = None) -> list[Any]:
    """fire.lua (one group); fire_batch.lua takes these groups back to back."""
    return [
        f.job_id,
        f.expected,
        f.version,
        f.fire_ms,
        "" if f.next_ms is None else f.next_ms,
        "" if f.next_due is None else f.next_due,
        f.epoch,
        f.trigger,
        clock(now),
        f.skipped,
        f.run_id,
        f.params,
    ]


def fire_batch(fires: Iterable[FireArgs], now: int | None = None) -> list[Any]:
    return flat([], (fire(f, now) for f in fires))


def beat_own(owner: str, ttl_ms: int, mode: str, now: int | None = None) -> list[Any]:
    """beat_own.lua: mode is acquire | renew | release."""
    return [owner, ttl_ms, mode, clock(now)]


def job_pause(
    job_id: str, paused: bool, next_ms: int | None = None, next_due: int | None = None
) -> list[Any]:
    return [
        job_id,
        "1" if paused else "0",
        "" if next_ms is None else next_ms,
        "" if next_due is None else next_due,
    ]


def job_put(
    tenant: str,
    name: str,
    new_id: str,
    spec: str,
    template: str,
    trigger: str,
    nominal_ms: int | str,
    due_ms: int | str,
    policies: tuple[str, int, int, int],
    paused: bool,
    task_args: Mapping[str, bytes],
    now: int | None = None,
    depends_on: Sequence[str] = (),
) -> list[Any]:
    """job_put.lua: ``policies`` = (overlap, keep_runs, keep_s, pause_after_failures);
    ``trigger`` is the schedule signature (JSON), ``task_args`` task name -> msgpack,
    ``depends_on`` the job's upstream job names."""
    return flat(
        [tenant, name, new_id, spec, template, trigger, nominal_ms, due_ms, *policies,
         "1" if paused else "0", clock(now), ",".join(depends_on)],
        task_args.items(),
    )  # fmt: skip


def job_park(
    job_id: str, version: str, expected: int, reason: str, now: int | None = None
) -> list[Any]:
    """job_park.lua: park the job if it is still at ``version`` and score ``expected``."""
    return [job_id, version, expected, reason, clock(now)]


def deadline_sweep(limit: int, now: int | None = None) -> list[Any]:
    """deadline_sweep.lua: mark late the runs of up to ``limit`` due deadlines."""
    return [clock(now), limit]


def job_delete(tenant: str, name: str) -> list[Any]:
    return [tenant, name]


def run_cancel(run_id: str, now: int | None = None) -> list[Any]:
    return [run_id, clock(now)]


def run_retry(run_id: str, tasks: Sequence[str] = (), now: int | None = None) -> list[Any]:
    return [run_id, clock(now), *tasks]
