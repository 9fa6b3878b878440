"""The arithmetic of ``python -m bench.compare``, pure (no Redis, no clock): the
order systems run in each round, INFO commandstats parsed and differenced
(the benchmark's own commands taken out), medians over rounds and the
redcron/peer ratios, and the table printed without ``--json``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

#: the figures of one system in one round, and how each ratio redcron/peer reads:
#: "higher" (a rate: redcron/peer > 1 is redcron faster) or "lower" (a cost or a
#: latency: redcron/peer < 1 is redcron cheaper or quicker)
FIGURES: dict[str, str] = {
    "enqueue_one_per_s": "higher",
    "enqueue_bulk_per_s": "higher",
    "drain_per_s": "higher",
    "latency_p50_ms": "lower",
    "latency_p99_ms": "lower",
    "redis_cmd_us_per_task": "lower",
    "redis_cpu_us_per_task": "lower",
    "worker_cpu_us_per_task": "lower",
}


def round_order(systems: Sequence[str], rounds: int) -> list[list[str]]:
    """The systems in the order each round runs them: rotated by one each
    round, so none is always first (a cold machine) or always last (a warm
    one, or behind a noisy neighbour's burst)."""
    n = len(systems)
    return [[systems[(r + i) % n] for i in range(n)] for r in range(rounds)] if n else []


def parse_commandstats(info: Mapping[str, Any]) -> dict[str, tuple[int, float]]:
    """``{command: (calls, usec)}`` from INFO commandstats, as redis-py returns
    it (``{"cmdstat_get": {"calls": 3, "usec": 12, ...}}``) or as raw text
    (``{"cmdstat_get": "calls=3,usec=12,..."}``)."""
    out: dict[str, tuple[int, float]] = {}
    for key, value in info.items():
        if not key.startswith("cmdstat_"):
            continue
        if isinstance(value, str):
            fields = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
        else:
            fields = {k: str(v) for k, v in dict(value).items()}
        out[key.removeprefix("cmdstat_")] = (int(fields["calls"]), float(fields["usec"]))
    return out


def commandstats_text(text: str) -> dict[str, tuple[int, float]]:
    """:func:`parse_commandstats` of the raw ``INFO commandstats`` reply."""
    info: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition(":")
        if sep and name.startswith("cmdstat_"):
            info[name] = value
    return parse_commandstats(info)


def command_usec(
    before: Mapping[str, tuple[int, float]],
    after: Mapping[str, tuple[int, float]],
    exclude: Mapping[str, int] | None = None,
) -> float:
    """Microseconds Redis spent executing commands between two commandstats,
    less ``exclude``: ``{command: calls}`` that were not the system's (the
    INCR body's own INCRs, the benchmark's polls), each taken out at that
    command's mean cost over the interval (never more than it spent).

    As Redis counts them, a command a script runs is counted both inside its
    EVAL/EVALSHA/FCALL time and on its own line; so are they here.
    """
    exclude = exclude or {}
    total = 0.0
    for cmd, (calls, usec) in after.items():
        calls0, usec0 = before.get(cmd, (0, 0.0))
        d_calls, d_usec = calls - calls0, usec - usec0
        if d_calls <= 0 or d_usec < 0:
            continue  # a CONFIG RESETSTAT in between, or nothing new
        theirs = min(d_calls, exclude.get(cmd, 0))
        total += d_usec * (d_calls - theirs) / d_calls
    return total


def medians(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The median of each figure of :data:`FIGURES` over the rounds of one
    system (None where no round measured it)."""
    out: dict[str, Any] = {}
    for name in FIGURES:
        values = [r[name] for r in rounds if r.get(name) is not None]
        out[name] = _round(statistics.median(values)) if values else None
    return out


def ratios(ours: Mapping[str, Any], peer: Mapping[str, Any]) -> dict[str, float | None]:
    """redcron/peer for every figure both have (None otherwise)."""
    out: dict[str, float | None] = {}
    for name in FIGURES:
        a, b = ours.get(name), peer.get(name)
        out[name] = _ratio(a / b) if a is not None and b else None
    return out


def _ratio(value: float) -> float:
    """Two decimals; two significant digits below 0.1 (arq's 0.5 s polls make
    latency ratios of 0.002, which two decimals would print as 0)."""
    return round(value, 2) if abs(value) >= 0.1 else float(f"{value:.2g}")


def _round(value: float) -> float:
    return round(value, 1) if abs(value) >= 100 else round(value, 3)


#: the table's columns: (figure, header)
COLUMNS = [
    ("enqueue_one_per_s", "enq 1/s"),
    ("enqueue_bulk_per_s", "enq bulk/s"),
    ("drain_per_s", "drain/s"),
    ("latency_p50_ms", "p50 ms"),
    ("latency_p99_ms", "p99 ms"),
    ("redis_cmd_us_per_task", "redis cmd us"),
    ("redis_cpu_us_per_task", "redis cpu us"),
    ("worker_cpu_us_per_task", "worker cpu us"),
]


def table(result: Mapping[str, Any]) -> str:
    """The medians of every system, then redcron/peer, as aligned text."""
    systems: Mapping[str, Any] = result["systems"]
    rows: list[list[str]] = [["system"] + [h for _f, h in COLUMNS]]
    for name, entry in systems.items():
        if entry.get("skipped"):
            continue
        rows.append([name] + [_cell(entry["median"].get(f)) for f, _h in COLUMNS])
    for name, ratio in result.get("ratios", {}).items():
        rows.append([f"redcron/{name}"] + [_cell(ratio.get(f), "x") for f, _h in COLUMNS])
    for row, against in result.get("procs_ratios", {}).items():
        for name, ratio in against.items():
            rows.append([f"{row}/{name}"] + [_cell(ratio.get(f), "x") for f, _h in COLUMNS])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(_align(r, widths)) for r in rows]
    for name, entry in systems.items():
        if entry.get("skipped"):
            lines.append(f"{name}: skipped: {entry['skipped']}")
    return "\n".join(lines)


def _align(row: Sequence[str], widths: Sequence[int]) -> list[str]:
    """The first column left-aligned, the figures right-aligned."""
    return [
        c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
    ]


def _cell(value: Any, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and abs(value) >= 100:
        return f"{value:,.0f}{suffix}"
    return f"{value}{suffix}"
