"""The dashboard's charts, as inline SVG built by pure functions.

No JavaScript and no chart library: the server draws the tasks finished per
minute (:func:`activity_svg`) and a job's run durations (:func:`durations_svg`);
a run's DAG is in ``dag.py``.  Every colour comes from a CSS class
(``static/charts.css``), so light and dark themes need no second drawing; the
only paint set here is a hatch pattern's geometry, which keeps failures
distinct from successes without relying on colour.  Output is a function of
the input alone (no clock, no random ids), so pages diff cleanly and tests can
compare strings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from markupsafe import Markup, escape

from redcron.dashboard.ui.svg import empty_svg, num, state_class

# -- bar charts ---------------------------------------------------------------------

PLOT_H = 80
#: room left of the plot for the y label, above it, and below it for the x labels
LEFT, TOP, BOTTOM = 44, 8, 18
PLOT_W = 480
MINUTES = 60
#: room under the x labels for a chart's legend
LEGEND_H = 16
#: a duration chart's scale stops at CLIP_FACTOR x the CLIP_PERCENTILE of its runs:
#: one slow run no longer flattens the others (longer bars are clipped, and marked)
CLIP_PERCENTILE, CLIP_FACTOR = 0.8, 3.0
#: a slot's whole height answers hover (its <title>) without being seen
_HIT = ' opacity="0"'
#: fills a failed bar's overlay with its chart's hatch pattern
_HATCH = ' fill="url(#rc-hatch-{})"'


def format_seconds(seconds: float) -> str:
    """A duration in the unit that reads best: "850 ms", "4.1 s", "12 min", "2.5 h"."""
    unit, size = next(
        ((u, k) for u, k in (("h", 3600.0), ("min", 60.0), ("s", 1.0)) if seconds >= k),
        ("ms", 0.001),
    )
    value = seconds / size
    text = f"{value:.1f}" if value < 10 else f"{value:.0f}"
    return f"{text.removesuffix('.0')} {unit}"


def _chart_open(kind: str, width: int, height: int, label: str) -> str:
    return (
        f'<svg class="chart {kind}" xmlns="http://www.w3.org/2000/svg"'
        f' viewBox="0 0 {width} {height}" width="{width}" height="{height}"'
        f' role="img" aria-label="{escape(label)}" font-size="10">'
        # diagonal lines over failed bars, so failure does not rest on colour alone
        f'<defs><pattern id="rc-hatch-{kind}" width="4" height="4"'
        ' patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<path class="hatch-line" d="M0,0 V4" fill="none"/></pattern></defs>'
    )


def _axes(top_label: str, width: int) -> str:
    """The baseline with its 0, and the scale's maximum at the top (if any)."""
    base = TOP + PLOT_H
    out = (
        f'<line class="axis-line" x1="{LEFT}" y1="{base}" x2="{width - 8}" y2="{base}"/>'
        f'<text class="axis" x="{LEFT - 4}" y="{base}" text-anchor="end">0</text>'
    )
    if top_label:
        out += (
            f'<text class="axis y-max" x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">'
            f"{escape(top_label)}</text>"
        )
    return out


def _legend(kind: str, y: int, ok: int, fail: int) -> str:
    """What the colours mean, under the x axis: a swatch each for succeeded and
    failed (hatched, as the failed bars are), with the hour's totals."""
    out = ['<g class="legend">']
    x = LEFT
    for cls, word, count in (("ok", "succeeded", ok), ("fail", "failed", fail)):
        out.append(_rect(f"swatch swatch-{cls}", x, y + 2, 10, 10))
        if cls == "fail":
            out.append(_rect("swatch-hatch", x, y + 2, 10, 10, _HATCH.format(kind)))
        text = f"{word} ({count})"
        out.append(f'<text class="legend-text" x="{x + 14}" y="{y + 11}">{text}</text>')
        x += 14 + 7 * len(text) + 16
    out.append("</g>")
    return "".join(out)


def _rect(cls: str, x: float, y: float, w: float, h: float, paint: str = "") -> str:
    return (
        f'<rect class="{cls}" x="{num(x)}" y="{num(y)}" width="{num(w)}" height="{num(h)}"{paint}/>'
    )


def _minute(t: datetime) -> datetime:
    """``t`` floored to its UTC minute (a naive datetime is taken as UTC)."""
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return t.replace(second=0, microsecond=0)


def activity_svg(
    minutes: Sequence[tuple[datetime, int, int]], *, now: datetime | None = None
) -> Markup:
    """Tasks succeeded and failed per minute over the last hour: 60 stacked bars.

    ``minutes`` holds (minute, succeeded, failed); minutes missing from it count
    as zero and several entries for one minute add up.  The hour ends at
    ``now``'s minute, or at the latest minute given.
    """
    counts: dict[datetime, tuple[int, int]] = {}
    for t, ok, fail in minutes:
        m = _minute(t)
        was = counts.get(m, (0, 0))
        counts[m] = (was[0] + max(ok, 0), was[1] + max(fail, 0))
    end = _minute(now) if now is not None else max(counts, default=None)
    slots = (
        [] if end is None else [end - timedelta(minutes=MINUTES - 1 - i) for i in range(MINUTES)]
    )
    bars = [(m, *counts.get(m, (0, 0))) for m in slots]
    top = max((ok + fail for _m, ok, fail in bars), default=0)
    total_ok = sum(b[1] for b in bars)
    total_fail = sum(b[2] for b in bars)
    slot = PLOT_W / MINUTES
    width, height = LEFT + PLOT_W + 8, TOP + PLOT_H + BOTTOM + LEGEND_H
    label = f"Tasks per minute, last hour: {total_ok} succeeded, {total_fail} failed"
    out = [_chart_open("activity", width, height, label), _axes(str(top) if top else "", width)]
    out.append(_legend("activity", TOP + PLOT_H + BOTTOM, total_ok, total_fail))
    if top == 0:
        out.append(
            f'<text class="empty" x="{num(LEFT + PLOT_W / 2)}" y="{TOP + PLOT_H // 2}"'
            ' text-anchor="middle">no tasks in the last hour</text>'
        )
    else:
        for i, (m, ok, fail) in enumerate(bars):
            x = LEFT + i * slot
            h_ok, h_fail = ok / top * PLOT_H, fail / top * PLOT_H
            base = TOP + PLOT_H
            out.append(
                f'<g class="minute"><title>{m:%H:%M} UTC: {ok} succeeded, {fail} failed</title>'
                + _rect("hit", x, TOP, slot, PLOT_H, _HIT)
            )
            if ok:
                out.append(_rect("ok", x + 1, base - h_ok, slot - 2, h_ok))
            if fail:
                y = base - h_ok - h_fail
                out.append(_rect("fail", x + 1, y, slot - 2, h_fail))
                out.append(_rect("hatch", x + 1, y, slot - 2, h_fail, _HATCH.format("activity")))
            out.append("</g>")
    if slots:
        y = TOP + PLOT_H + 13
        out.append(f'<text class="axis" x="{LEFT}" y="{y}">{slots[0]:%H:%M}</text>')
        out.append(
            f'<text class="axis" x="{width - 8}" y="{y}" text-anchor="end">'
            f"{slots[-1]:%H:%M} UTC</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))


#: run and task states drawn hatched: they failed
_FAILED = frozenset({"failed", "dead", "upstream_failed", "rejected"})


def duration_scale(known: Sequence[float]) -> float:
    """The top of a duration chart's scale: the longest run, unless it is more
    than :data:`CLIP_FACTOR` times the :data:`CLIP_PERCENTILE` (nearest rank) of
    the runs, where the scale stops (the longer bars are drawn clipped)."""
    if not known:
        return 0.0
    ordered = sorted(known)
    typical = ordered[max(0, math.ceil(CLIP_PERCENTILE * len(ordered)) - 1)]
    return min(ordered[-1], CLIP_FACTOR * typical)


def durations_svg(runs: Sequence[tuple[str, float | None, str]]) -> Markup:
    """One bar per run, in the order given (pass them oldest first: it is drawn
    left to right).  Each is (label, duration in seconds or None while the run
    has not finished, state); unfinished runs show as a stub on the axis.  A
    run longer than the scale (:func:`duration_scale`) fills the plot and
    carries a marker (``clip-mark``, a zigzag at its top); its tooltip says its
    real duration, and the chart says how many were clipped."""
    if not runs:
        return empty_svg("durations", "No runs yet", LEFT + PLOT_W + 8, TOP + PLOT_H + BOTTOM)
    known = [d for _l, d, _s in runs if d is not None and math.isfinite(d) and d > 0]
    top = duration_scale(known)
    clipped = sum(1 for d in known if d > top)
    slot = min(24.0, max(6.0, PLOT_W / len(runs)))
    bar = max(3.0, slot * 0.7)
    width, height = LEFT + math.ceil(slot * len(runs)) + 8, TOP + PLOT_H + BOTTOM
    longest = format_seconds(max(known, default=0.0))
    label = f"Durations of the last {len(runs)} runs, longest {longest}"
    if clipped:
        label += f"; scale stops at {format_seconds(top)}, {clipped} longer run(s) clipped"
    out = [
        _chart_open("durations", width, height, label),
        _axes(format_seconds(top) if top else "", width),
    ]
    base = TOP + PLOT_H
    for i, (name, seconds, state) in enumerate(runs):
        x = LEFT + i * slot + (slot - bar) / 2
        done = max(seconds, 0.0) if seconds is not None and math.isfinite(seconds) else None
        said = "not finished" if done is None else format_seconds(done)
        over = done is not None and top > 0 and done > top
        if over:
            said += f", clipped at {format_seconds(top)}"
        out.append(
            f'<g class="run{" clipped" if over else ""}" data-state="{escape(state)}">'
            f"<title>{escape(name)}: {said} ({escape(state)})</title>"
            + _rect("hit", LEFT + i * slot, TOP, slot, PLOT_H, _HIT)
        )
        cls = state_class(state)
        if done is None:
            out.append(_rect(f"bar unfinished {cls}", x, base - 3, bar, 3))
        else:
            h = max(1.0, min(done / top, 1.0) * PLOT_H) if top > 0 else 1.0
            out.append(_rect(f"bar {cls}", x, base - h, bar, h))
            if state in _FAILED:
                out.append(_rect("hatch", x, base - h, bar, h, _HATCH.format("durations")))
            if over:
                out.append(_clip_mark(x, TOP, bar))
        out.append("</g>")
    if clipped:
        out.append(
            f'<text class="axis clip-note" x="{LEFT}" y="{TOP + PLOT_H + 13}">'
            f"{clipped} clipped</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))


def _clip_mark(x: float, y: float, w: float) -> str:
    """A zigzag across a bar's top: the bar goes on past the scale."""
    mid = x + w / 2
    return (
        f'<path class="clip-mark" d="M{num(x)},{num(y + 6)} L{num(mid)},{num(y + 2)}'
        f' L{num(x + w)},{num(y + 6)}"/>'
    )
