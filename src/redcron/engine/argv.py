"""Every script's ARGV, laid out in one place.

Each function here mirrors the ARGV header of one ``lua/<name>.lua`` and is
the only code that builds that script's arguments: the broker, the job
store, the beat and the tests' Lua helpers all call it, so a layout cannot
drift between callers.

``now`` is for tests only: ``None`` (production) sends ``""`` and the script
reads the Redis server clock (``TIME``); an int is used as the script's
current time in ms, so a test can step time without sleeping.

Rows.  The scripts that take a batch of wide items (enqueue, fail, fire,
fire_batch), and job_put its one job, take each item as ONE argument: a msgpack map of the item's
fields by name, read in Lua with ``cmsgpack.unpack(ARGV[i])`` (shared/DESIGN.md
§5), so adding a field is a change to the row's class, its builder here and
the line of the script that reads it, and no positional layout has to agree.
Two rules keep what the scripts see, and so what they write, as it was when
every field was an argument of its own:

- Numbers travel as their text, as redis-py sends an argument (``str()``:
  ``repr()`` for a float).  Scripts store many of them verbatim in hashes, and
  a Lua number is written back by Redis 6.2 with ``%.17g`` (0.1 would land as
  ``0.10000000000000001``); a number past 2^53 would also lose digits in Lua.
- A field that is absent (None, or ``""`` where ``""`` means none) is left out
  of the map; the script reads a missing field as ``""``.

Rows are packed with ``use_bin_type=False``: Redis's cmsgpack (6.2, 7, Valkey
9) has no bin types and refuses them, so bytes (task args) travel as msgpack
str, which cmsgpack gives the script as the same bytes.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgpack

from redcron.model.fields import TI_DEFAULTS
from redcron.model.progress import RECENT_MAX, Pending


def _put(row: dict[str, Any], name: str, value: Any, unset: Any) -> None:
    """``row[name] = str(value)`` unless ``value`` is ``unset`` (the script reads an
    absent field as it): a row carries only what differs from its default."""
    if value != unset:
        row[name] = str(value)


def _pack(row: dict[str, Any]) -> bytes:
    """One row, one argument (module docstring): no bin types for cmsgpack.
    (``packb`` per row, not one shared ``Packer``: a Packer's buffer is not
    safe across threads, and callers enqueue from many.)"""
    packed: bytes = msgpack.packb(row, use_bin_type=False)
    return packed


class EnqueueRow(NamedTuple):
    """One task instance to create, as enqueue.lua takes it (its ARGV header):
    one msgpack map per row, the fields by these names (:func:`enqueue_row`).

    The App builds these (validated).  A NamedTuple, not a frozen dataclass:
    a frozen dataclass's ``__init__`` sets each of its 15 fields through
    ``object.__setattr__``, ~2.2 µs a row against ~0.9 µs for this (measured
    on the App's ``enqueue_many`` path, about 35 µs a row in all); read it by
    name all the same.
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
    # concurrency key (lib/ckeys.lua): its value ("" = none) and max_concurrent
    # (sent only with a key)
    ck: str = ""
    ckn: int = 0
    # a call's retry_on/permanent_on (model/error_classes.py wire(), JSON), "" = none
    error_classes: str = ""
    # the W3C trace context of the span that enqueued it (redcron/tracing.py;
    # "" = none: tracing off)
    traceparent: str = ""
    tracestate: str = ""
    # its rate limit (model/rate.py, lua/lib/rate.lua): unit ms and count (0: none),
    # the rate_key argument's name and this call's value ("": the task as a whole)
    rate_ms: int = 0
    rate_n: int = 0
    rate_key: str = ""
    rate_group: str = ""


@dataclass(frozen=True, slots=True)
class FailItem:
    """One failed (or timed out, or cancelled) attempt to report: one msgpack
    map per item in fail.lua's ARGV (:func:`fail`)."""

    iid: str
    epoch: str
    outcome: str  # failed | timed_out | lost | cancelled
    error: str
    retryable: bool
    delay_ms: int | None = None
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class FireArgs:
    """One fire of one job: one msgpack map in fire.lua's and fire_batch.lua's
    ARGV (:func:`fire_row`), but for ``epoch``, which is the call's (ARGV[2]):
    every fire of one call is the same beat's."""

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
    # the W3C trace context of the span that fired it ("" = none), for its run's tasks
    traceparent: str = ""
    tracestate: str = ""


def clock(now: int | None) -> int | str:
    """A script's now_override: ``""`` = the server clock."""
    return "" if now is None else now


def flat(head: list[Any], groups: Iterable[Sequence[Any]]) -> list[Any]:
    """Fixed head values, then each group's values in order."""
    return [*head, *(v for group in groups for v in group)]


_TIMEOUT_MS, _RETRY_BASE_MS, _RETRY_CAP_MS, _RESULT_TTL_S = (
    TI_DEFAULTS["timeout_ms"],
    TI_DEFAULTS["retry_base_ms"],
    TI_DEFAULTS["retry_cap_ms"],
    TI_DEFAULTS["result_ttl_s"],
)


def enqueue_row(r: EnqueueRow) -> bytes:
    """One row of enqueue.lua: a msgpack map by field name, numbers as text.
    A number at its default (the instance hash's TI_DEFAULTS, which the script
    does not store either; 0 for delay_ms) and an optional field that is not
    set (cpu, mem, dedupe, ck and ckn, error_classes, traceparent and
    tracestate) are left out: every field a row carries is one more key and
    value the script's cmsgpack decodes."""
    row = {
        "iid": r.iid,
        "name": r.name,
        "kind": r.kind,
        "args": r.args,
        "queue": r.queue,
        "tenant": r.tenant,
        "priority": r.priority,
        "max_attempts": str(r.max_attempts),
    }
    _put(row, "timeout_ms", r.timeout_ms, _TIMEOUT_MS)
    _put(row, "retry_base_ms", r.retry_base_ms, _RETRY_BASE_MS)
    _put(row, "retry_cap_ms", r.retry_cap_ms, _RETRY_CAP_MS)
    _put(row, "delay_ms", r.delay_ms, 0)
    _put(row, "result_ttl_s", r.result_ttl_s, _RESULT_TTL_S)
    _put(row, "cpu", r.cpu, None)
    _put(row, "mem", r.mem, None)
    if r.dedupe:
        row["dedupe"] = r.dedupe
    if r.ck:
        row["ck"] = r.ck
        row["ckn"] = str(r.ckn)
    if r.error_classes:
        row["error_classes"] = r.error_classes
    if r.traceparent:
        row["traceparent"] = r.traceparent
        if r.tracestate:
            row["tracestate"] = r.tracestate
    if r.rate_ms:
        row |= {"rate_ms": str(r.rate_ms), "rate_n": str(r.rate_n)}
        if r.rate_group:
            row |= {"rate_key": r.rate_key, "rate_group": r.rate_group}
    return _pack(row)


def enqueue(rows: Iterable[EnqueueRow], now: int | None = None) -> list[Any]:
    """enqueue.lua: now, then one row per task (:func:`enqueue_row`)."""
    return [clock(now), *map(enqueue_row, rows)]


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
    tasks: Iterable[str] | None = None,
    now: int | None = None,
) -> list[Any]:
    """lease.lua: ``capacity`` is the worker's free (cpu, mem), None = no limit;
    ``metrics`` the deployment's Settings.metrics (basic: no share-of-dispatch counts);
    ``tasks`` the task names the worker registered (None: it leases any task)."""
    cpu, mem = capacity
    cap = (
        ""
        if capacity == (None, None)
        else f"{'' if cpu is None else cpu},{'' if mem is None else mem}"
    )
    return [worker, max_tasks, ttl_ms, clock(now), ",".join(tenants), quantum, aging_ms, cap,
            metrics, task_set(tasks), *queues]  # fmt: skip


def task_set(tasks: Iterable[str] | None) -> str:
    """lease.lua's ARGV[10]: each name between newlines, which a name never holds
    (``"\\na\\nb\\n"``; no name: ``"\\n"``, nothing runs); None: ``""``, any task."""
    if tasks is None:
        return ""
    return _task_set(tasks if isinstance(tasks, frozenset) else frozenset(tasks))


@functools.lru_cache(maxsize=16)
def _task_set(tasks: frozenset[str]) -> str:
    # a worker passes the same set on every lease call: joined once
    return "\n" + "".join(f"{name}\n" for name in sorted(tasks))


def tokens(worker: str, pairs: Iterable[tuple[str, str]], now: int | None = None) -> list[Any]:
    """start.lua and release.lua: (iid, epoch) pairs."""
    return flat([worker, clock(now)], pairs)


def heartbeat(
    worker: str, ttl_ms: int, pairs: Iterable[tuple[str, str]], now: int | None = None
) -> list[Any]:
    return flat([worker, ttl_ms, clock(now)], pairs)


def progress(
    worker: str, items: Iterable[tuple[str, str, Pending]], now: int | None = None
) -> list[Any]:
    """progress.lua: worker, now, the recent messages kept, then per (iid, epoch,
    pending) the latest value's JSON and the new messages' JSON array."""
    args: list[Any] = [worker, clock(now), RECENT_MAX]
    for iid, epoch, pending in items:
        args += [iid, epoch, *pending.argv()]
    return args


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
    """fail.lua: worker, now, then one msgpack map per item (numbers as text;
    error, delay_ms and exit_code only when set).  Redis seeds Lua's ``random``
    identically on every call, so the backoff's jitter fraction is rolled here
    (``jitter`` fixes it for tests)."""
    args: list[Any] = [worker, clock(now)]
    for it in items:
        row = {
            "iid": it.iid,
            "epoch": it.epoch,
            "outcome": it.outcome,
            "retryable": "1" if it.retryable else "0",
            "jitter": repr(random.random() if jitter is None else float(jitter)),
        }
        if it.error:
            row["error"] = it.error
        if it.delay_ms is not None:
            row["delay_ms"] = str(max(0, int(it.delay_ms)))
        if it.exit_code is not None:
            row["exit_code"] = str(it.exit_code)
        args.append(_pack(row))
    return args


def reap(
    limit: int, min_idle_ms: int, now: int | None = None, jitter: float | None = None
) -> list[Any]:
    return [clock(now), limit, random.random() if jitter is None else jitter, min_idle_ms]


def promote(limit: int, now: int | None = None) -> list[Any]:
    return [clock(now), limit]


def follow_ends(metrics: str, ids: Sequence[str]) -> list[Any]:
    return [metrics, *ids]


def map_expand(
    iid: str, start: int, total: int, page: Sequence[bytes], now: int | None = None
) -> list[Any]:
    """``total`` -1: the map cannot be made, ``page`` holds the error."""
    return [clock(now), iid, start, total, *page]


def cancel(iid: str, now: int | None = None) -> list[Any]:
    return [iid, clock(now)]


def dlq_replay(iids: Sequence[str], now: int | None = None, only: str | None = None) -> list[Any]:
    """``only``: the one tenant whose instances may be acted on (None: any)."""
    return [clock(now), only or "", *iids]


def dlq_discard(iids: Sequence[str], now: int | None = None, only: str | None = None) -> list[Any]:
    return dlq_replay(iids, now, only)


def fire_row(f: FireArgs) -> bytes:
    """One fire as fire.lua and fire_batch.lua read it: a msgpack map by field
    name, numbers as text, a field that is "" or None (or no skipped fires) left
    out.  ``epoch`` is not in it: it is the call's."""
    row: dict[str, str] = {"job_id": f.job_id, "trigger": f.trigger, "run_id": f.run_id}
    _put(row, "expected", f.expected, "")
    _put(row, "version", f.version, "")
    _put(row, "fire_ms", f.fire_ms, "")
    _put(row, "next_ms", f.next_ms, None)
    _put(row, "next_due", f.next_due, None)
    _put(row, "skipped", f.skipped, 0)
    _put(row, "params", f.params, "")
    _put(row, "traceparent", f.traceparent, "")
    _put(row, "tracestate", f.tracestate, "")
    return _pack(row)


def fire(f: FireArgs, now: int | None = None) -> list[Any]:
    """fire.lua: now, the beat's owner epoch, the fire's row."""
    return [clock(now), f.epoch, fire_row(f)]


def fire_batch(fires: Iterable[FireArgs], now: int | None = None) -> list[Any]:
    """fire_batch.lua: now, the owner epoch of every fire of the call, a row per fire."""
    fires = list(fires)
    epochs = {f.epoch for f in fires}
    if len(epochs) > 1:
        raise ValueError(f"one fire_batch call is one beat's: fires carry epochs {sorted(epochs)}")
    return [clock(now), epochs.pop() if epochs else "", *map(fire_row, fires)]


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
    settings: Mapping[str, str],
    task_args: Mapping[str, bytes],
    now: int | None = None,
    depends_on: Sequence[str] = (),
    legacy: str = "",
) -> list[Any]:
    """job_put.lua: now, then the job as one msgpack map (its ARGV header).
    ``trigger`` is the schedule signature (JSON), ``settings`` the job hash's
    settings not at their default (``JobSpec.hash_settings``: the script writes
    these and drops the others), ``task_args`` task name -> msgpack (a nested
    map), ``depends_on`` the job's upstream job names, ``legacy`` the sha1 of
    the spec text an older release stored (only for a job that exists: "" = none)."""
    row: dict[str, Any] = {
        "tenant": tenant,
        "name": name,
        "id": new_id,
        "spec": spec,
        "template": template,
        "sig": trigger,
        "args": task_args,
        **settings,
    }
    if nominal_ms != "":
        row["next_ms"] = str(nominal_ms)
        row["due_ms"] = str(due_ms)
    if depends_on:
        row["upstreams"] = ",".join(depends_on)
    if legacy:
        row["legacy"] = legacy
    return [clock(now), _pack(row)]


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
