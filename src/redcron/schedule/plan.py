"""Fire planning: which fire.lua calls one due job gets (catch-up, backlog, chaining).

Pure: ``now`` and every fire time are integers (ms, Unix epoch) passed in; the
beat reads the Redis clock and sends the planned calls.  Each fire time is
judged on its own (invariant 2): one overdue by at most the catch-up window is
fired, only older ones follow the job's catch-up policy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta

from redcron.schedule.jitter import effective_jitter_s, jitter_ms
from redcron.schedule.timeutil import from_ms, to_ms
from redcron.schedule.triggers import Trigger, fires_between, next_fire

#: missed fires counted per job and pass; more are reported as this many
MISSED_LIMIT = 100_000
#: fire.lua calls for one job in one pass (a longer backlog continues next pass)
CHAIN_LIMIT = 100


@dataclass(frozen=True, slots=True)
class FirePolicy:
    """What planning needs of a job beside its trigger (``JobSpec.fire_policy()``):
    its catch-up policy (``latest``, ``all``, ``none``), how many fires ``all``
    keeps, and its own jitter (0: the tenant's default)."""

    catchup: str = "latest"
    catchup_limit: int = 100
    jitter_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire.lua call: fire ``fire_ms`` (if the score is ``expected``), then
    schedule ``next_ms`` (None: leave the schedule) at ``next_due``."""

    expected: int
    fire_ms: int
    next_ms: int | None
    next_due: int | None
    trigger: str  # the job's trigger kind (cron | every | at) | catchup | skip
    skipped: int = 0


def _due(job_id: str, nominal: int | None, jitter_s: float) -> int | None:
    return None if nominal is None else nominal + jitter_ms(job_id, nominal, jitter_s)


def _end_of(ms: int) -> datetime:
    """The last instant stored as ``ms``: "after fire ``ms``" must skip its lost
    sub-millisecond part, or a one-shot at 12:00:00.5004 would come back."""
    return from_ms(ms) + timedelta(microseconds=999)


@functools.lru_cache(maxsize=65_536)
def _after(trigger: Trigger, ms: int) -> int | None:
    # memoized: jobs on the same schedule share their fire times (10,000 hourly jobs
    # compute one next fire, not 10,000)
    nxt = next_fire(trigger, _end_of(ms))
    return None if nxt is None else to_ms(nxt)


def backlog(trigger: Trigger, nominal: int, now: int, keep: int) -> tuple[list[int], int]:
    """Missed fires in ``[nominal, now]``: the latest ``keep`` of them, and how many
    there are (capped at MISSED_LIMIT for cron; exact for intervals)."""
    if trigger.kind == "every" and trigger.every is not None:
        step = max(1, int(trigger.every.total_seconds() * 1000))
        total = (now - nominal) // step + 1
        last = nominal + (total - 1) * step
        k = min(keep, total)
        return [last - (k - 1 - i) * step for i in range(k)], total
    listed = fires_between(trigger, _end_of(nominal), _end_of(now), MISSED_LIMIT - 1)
    fires = [nominal, *map(to_ms, listed)]
    if keep <= 0:
        return [], len(fires)
    if len(fires) < MISSED_LIMIT:
        return fires[-keep:], len(fires)
    # truncated: the latest fires lie past the listed ones; widen a window back from now
    span = 1_000
    while span < now - nominal:
        tail = fires_between(trigger, _end_of(now - span), _end_of(now), MISSED_LIMIT)
        if keep <= len(tail) < MISSED_LIMIT:
            return [to_ms(f) for f in tail[-keep:]], MISSED_LIMIT
        span *= 2
    return fires[-keep:], MISSED_LIMIT


def plan_fires(
    job_id: str,
    policy: FirePolicy,
    trigger: Trigger,
    nominal: int,
    score: int,
    now: int,
    window_ms: int,
    tenant_jitter: float = 0.0,
) -> list[Fire]:
    """The fire.lua calls for one due job, chained oldest first (pure: ``now`` given).

    Each fire time is judged on its own (invariant 2).  One overdue by at most
    ``window_ms`` is fired (recorded under the trigger's kind: "cron", "every",
    "at"), late but never collapsed, so a beat failover loses nothing.  The
    older ones (real downtime) follow the job's policy:
    ``latest`` fires the newest of them, ``all`` the newest ``catchup_limit``
    ("catchup"), ``none`` nothing ("skip"); every fire left out is counted as
    skipped.  Next due times use the job's ``jitter_s``, or ``tenant_jitter``
    (the tenant's default) when the job has none.  At most CHAIN_LIMIT calls:
    the schedule then holds the next fire and the next pass goes on from it.
    """
    jitter = effective_jitter_s(policy.jitter_s, tenant_jitter)
    if now - nominal <= window_ms:
        return _chain(job_id, trigger, jitter, score, nominal, now, [])
    # fires at or before old_end are overdue by more than the window
    old_end = now - window_ms - 1
    catchup = policy.catchup if policy.catchup in ("all", "none") else "latest"
    keep = {"latest": 1, "all": policy.catchup_limit, "none": 0}[catchup]
    kept, total = backlog(trigger, nominal, old_end, keep)
    # the first fire inside the window (or, if none is, the first one still to come)
    recent = _after(trigger, old_end)
    if not kept:
        calls = [Fire(score, nominal, recent, _due(job_id, recent, jitter), "skip", total)]
    else:
        calls = []
        expected = score
        for i, fire_ms in enumerate(kept):
            nxt = kept[i + 1] if i + 1 < len(kept) else recent
            nxt_due = _due(job_id, nxt, jitter)
            skipped = total - len(kept) if i == 0 else 0
            calls.append(Fire(expected, fire_ms, nxt, nxt_due, "catchup", skipped))
            if nxt_due is None or len(calls) >= CHAIN_LIMIT:
                return calls
            expected = nxt_due
    last = calls[-1]
    if last.next_ms is None or last.next_due is None or last.next_due > now:
        return calls
    return _chain(job_id, trigger, jitter, last.next_due, last.next_ms, now, calls)


def _chain(
    job_id: str,
    trigger: Trigger,
    jitter: float,
    expected: int,
    n: int,
    now: int,
    calls: list[Fire],
) -> list[Fire]:
    """Append on-time fires from fire ``n`` (at score ``expected``) on, while they are
    due, up to CHAIN_LIMIT calls in all; returns ``calls``.  Each is recorded
    under the trigger's kind (``cron``, ``every``, ``at``): a run says what
    started it."""
    while len(calls) < CHAIN_LIMIT:
        nxt = _after(trigger, n)
        nxt_due = _due(job_id, nxt, jitter)
        calls.append(Fire(expected, n, nxt, nxt_due, trigger.kind))
        if nxt is None or nxt_due is None or nxt_due > now:
            break
        expected, n = nxt_due, nxt
    return calls
