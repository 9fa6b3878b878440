"""The pure arithmetic of ``redcron bench leases``: how leases, heartbeat
phases and killed workers are laid out, and how Redis time from ``INFO`` is
summed, split and profiled (no Redis here: tests/unit/test_lease_figures.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from redcron.cli.bench.fixtures import info_cpu_s, p99

_T = TypeVar("_T")


def tenant_counts(leases: int, tenants: int) -> list[int]:
    """Tasks per tenant ``t0..``: ``leases`` spread as evenly as integers allow."""
    base, extra = divmod(leases, tenants)
    return [base + (1 if i < extra else 0) for i in range(tenants)]


def hb_offsets(workers: int, period_s: float) -> list[float]:
    """Each worker's heartbeat phase within the period: evenly spread, so the
    heartbeat rate is flat (workers started at random times look the same)."""
    return [period_s * i / workers for i in range(workers)]


def warm_up_s(heartbeat_s: float, ttl_s: float, min_ttl_s: float) -> float:
    """How long to run before measuring: one heartbeat period spreads the
    phases, but the reaper first looks at a stream at its earliest lease
    deadline, one TTL after the first heartbeat, and every minimum TTL after:
    a window that starts sooner sees the reaper idle for part of it."""
    return max(heartbeat_s, ttl_s + 2 * min_ttl_s)


def interleave(groups: Sequence[Sequence[_T]]) -> list[_T]:
    """The groups' items merged round-robin, each group spread evenly over the
    result (a group twice the size of another comes up twice as often)."""
    keyed = [
        ((j + 0.5) / len(group), g, item)
        for g, group in enumerate(groups)
        for j, item in enumerate(group)
    ]
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [item for _pos, _g, item in keyed]


def killed(workers: int, fraction: float) -> list[int]:
    """Which workers die: ``ceil(fraction x workers)`` of them, spread over the
    list (so over shards and heartbeat phases alike)."""
    k = max(1, min(workers, math.ceil(fraction * workers)))
    return sorted({int(i * workers / k) for i in range(k)})


def percentiles(values: Sequence[int]) -> dict[str, int | None]:
    """p50, p99 (nearest rank) and max of ``values`` (None when empty)."""
    if not values:
        return {"p50": None, "p99": None, "max": None}
    ordered = sorted(values)
    return {"p50": ordered[len(ordered) // 2], "p99": p99(ordered), "max": ordered[-1]}


@dataclass
class Usage:
    """Redis time over a phase, all masters together, in seconds."""

    #: server CPU (INFO cpu: used_cpu_sys + used_cpu_user)
    cpu: float = 0.0
    #: script time (INFO commandstats: cmdstat_evalsha usec)
    scripts: float = 0.0
    script_calls: int = 0
    #: command -> seconds (commandstats count the commands scripts call too)
    commands: dict[str, float] = field(default_factory=dict)

    def minus(self, other: Usage) -> Usage:
        return Usage(
            self.cpu - other.cpu,
            self.scripts - other.scripts,
            self.script_calls - other.script_calls,
            {k: v - other.commands.get(k, 0.0) for k, v in self.commands.items()},
        )

    def add(self, other: Usage) -> None:
        self.cpu += other.cpu
        self.scripts += other.scripts
        self.script_calls += other.script_calls
        for k, v in other.commands.items():
            self.commands[k] = self.commands.get(k, 0.0) + v


def profile(
    usage: Usage, seconds: float, less: Usage | None = None, less_s: float = 1.0, top: int = 6
) -> dict[str, float]:
    """The commands that took most time (scripts' own calls included, EVALSHA
    left out: it is their sum), in % of a core; ``less`` (over ``less_s``)
    subtracted as a rate first."""
    rates = {k: v / max(seconds, 1e-9) for k, v in usage.commands.items() if k != "evalsha"}
    if less is not None:
        for k, v in less.commands.items():
            rates[k] = rates.get(k, 0.0) - v / max(less_s, 1e-9)
    ranked = sorted(rates.items(), key=lambda kv: -kv[1])[:top]
    return {k: round(100 * v, 1) for k, v in ranked if v > 0}


def split(both: Usage, both_s: float, heartbeats: Usage, heartbeats_s: float) -> dict[str, float]:
    """% of one core: all of Redis with heartbeats and maintenance running
    (``both`` over ``both_s``), heartbeats alone (maintenance paused), the
    reaper as the difference, and the same split of script time alone."""
    pb, ph = 100 / max(both_s, 1e-9), 100 / max(heartbeats_s, 1e-9)
    return {
        "redis_cpu_pct": round(both.cpu * pb, 1),
        "heartbeat_cpu_pct": round(heartbeats.cpu * ph, 1),
        "reaper_cpu_pct": round(both.cpu * pb - heartbeats.cpu * ph, 1),
        "heartbeat_script_pct": round(heartbeats.scripts * ph, 1),
        "reaper_script_pct": round(both.scripts * pb - heartbeats.scripts * ph, 1),
    }


def usage_of(cpu_infos: Sequence[dict[str, Any]], stat_infos: Sequence[dict[str, Any]]) -> Usage:
    """A :class:`Usage` from INFO cpu and INFO commandstats replies (one per master)."""
    out = Usage()
    for info in cpu_infos:
        out.cpu += info_cpu_s(info)
    for info in stat_infos:
        evalsha = info.get("cmdstat_evalsha") or {}
        out.scripts += int(evalsha.get("usec", 0)) / 1e6
        out.script_calls += int(evalsha.get("calls", 0))
        for key, stat in info.items():
            if key.startswith("cmdstat_") and isinstance(stat, dict):
                name = key[len("cmdstat_") :]
                out.commands[name] = out.commands.get(name, 0.0) + int(stat.get("usec", 0)) / 1e6
    return out
