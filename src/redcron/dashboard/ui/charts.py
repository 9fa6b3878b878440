"""The dashboard's drawings, as inline SVG built by pure functions.

No JavaScript and no graph library: the server draws a run's DAG
(:func:`dag_svg`), the tasks finished per minute (:func:`activity_svg`) and a
job's run durations (:func:`durations_svg`).  Every colour comes from a CSS
class (``static/charts.css``), so light and dark themes need no second
drawing; the only paint set here is a hatch pattern's geometry, which keeps
failures distinct from successes without relying on colour.  Output is a
function of the input alone (no clock, no random ids), so pages diff cleanly
and tests can compare strings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from markupsafe import Markup, escape

# -- DAG geometry (px) --------------------------------------------------------------

BOX_W, BOX_H = 168, 44
#: room between columns for the edges' curves and arrowheads
COL_GAP = 56
ROW_GAP = 14
PAD = 10
#: characters of a task name that fit in a box at the 13 px bold name font
NAME_CHARS = 18
#: a state word usable in a class name; anything else is styled as "unknown"
_CLASS_SAFE = re.compile(r"[A-Za-z0-9_-]+")
_ARROW_ID = "rc-dag-arrow"


@dataclass(frozen=True)
class DagNode:
    """One task of a run, as the DAG drawing needs it.

    ``detail`` is extra hover text (e.g. "attempt 2/3, 4.1 s"); ``href`` makes
    the box a link (to the task's page).
    """

    name: str
    state: str
    depends_on: tuple[str, ...]
    href: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class _Layout:
    """Where each vertex goes: real nodes are 0..n-1, edge waypoints follow."""

    column: list[int]
    row: list[float]  # vertical slot, centred per column (may be x.5)
    rows: int
    columns: int
    #: (upstream node, downstream node, waypoints between them), drawn left to right
    chains: list[tuple[int, int, list[int]]]
    #: dependencies that closed a cycle: drawn, but ignored by the layout
    back: list[tuple[int, int]]


def _num(x: float) -> str:
    """A coordinate as short, stable text (at most one decimal)."""
    x = round(x, 1) + 0.0  # + 0.0 turns -0.0 into 0.0
    return str(int(x)) if x.is_integer() else f"{x:.1f}"


def _state_class(state: str) -> str:
    return f"state-{state}" if _CLASS_SAFE.fullmatch(state) else "state-unknown"


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _topology(nodes: Sequence[DagNode]) -> tuple[list[list[int]], list[tuple[int, int]], list[int]]:
    """Each node's upstream indexes with cycles broken, the edges that were
    dropped to break them, and the nodes in dependency (topological) order.

    A depth-first walk along ``depends_on`` in task order: a dependency on a
    node still being walked closes a cycle, so that one edge is set aside.
    Iterative, so a chain of thousands of tasks does not hit the recursion limit.
    """
    index = {node.name: i for i, node in enumerate(nodes)}
    deps = [
        list(dict.fromkeys(index[d] for d in node.depends_on if d in index and index[d] != i))
        for i, node in enumerate(nodes)
    ]
    NEW, OPEN, DONE = 0, 1, 2
    mark = [NEW] * len(nodes)
    back: list[tuple[int, int]] = []
    order: list[int] = []
    for root in range(len(nodes)):
        if mark[root] != NEW:
            continue
        mark[root] = OPEN
        stack = [(root, iter(deps[root]))]
        while stack:
            v, pending = stack[-1]
            for d in pending:
                if mark[d] == OPEN:
                    back.append((d, v))
                elif mark[d] == NEW:
                    mark[d] = OPEN
                    stack.append((d, iter(deps[d])))
                    break
            else:
                mark[v] = DONE
                order.append(v)
                stack.pop()
    dropped = set(back)
    forward = [[d for d in ds if (d, v) not in dropped] for v, ds in enumerate(deps)]
    return forward, back, order


def _layout(nodes: Sequence[DagNode]) -> _Layout:
    """Layered (Sugiyama-style) layout: column = longest path from a root; an
    edge spanning several columns gets a waypoint in each column it crosses,
    so it is routed around boxes and takes part in the ordering; each column
    is then ordered by the barycenter of its neighbours (down, up, down)."""
    n = len(nodes)
    deps, back, order = _topology(nodes)
    column = [0] * n
    for v in order:  # every dependency comes before its dependents
        column[v] = max((column[d] + 1 for d in deps[v]), default=0)

    ups: list[list[int]] = [[] for _ in range(n)]
    downs: list[list[int]] = [[] for _ in range(n)]
    # ties are broken by the job's task order; a waypoint sits by its downstream task
    tie: list[tuple[int, int]] = [(i, 0) for i in range(n)]
    chains: list[tuple[int, int, list[int]]] = []
    for v in range(n):
        for d in deps[v]:
            path = [d]
            for c in range(column[d] + 1, column[v]):
                w = len(column)
                column.append(c)
                ups.append([])
                downs.append([])
                tie.append((v, d + 1))
                path.append(w)
            path.append(v)
            for a, b in pairwise(path):
                downs[a].append(b)
                ups[b].append(a)
            chains.append((d, v, path[1:-1]))

    columns = max(column, default=-1) + 1
    layers: list[list[int]] = [[] for _ in range(columns)]
    for v in sorted(range(len(column)), key=lambda v: tie[v]):
        layers[column[v]].append(v)
    rows = max((len(layer) for layer in layers), default=0)
    row = [0.0] * len(column)

    def place(layer: list[int]) -> None:
        top = (rows - len(layer)) / 2  # centre short columns against the tallest
        for i, v in enumerate(layer):
            row[v] = top + i

    def sweep(cols: range, neighbours: list[list[int]]) -> None:
        for c in cols:
            layers[c].sort(
                key=lambda v: (
                    sum(row[u] for u in neighbours[v]) / len(neighbours[v])
                    if neighbours[v]
                    else row[v],
                    tie[v],
                )
            )
            place(layers[c])

    for layer in layers:
        place(layer)
    sweep(range(1, columns), ups)
    sweep(range(columns - 2, -1, -1), downs)
    sweep(range(1, columns), ups)
    return _Layout(column, row, rows, columns, chains, back)


def _box_x(column: int) -> float:
    return PAD + column * (BOX_W + COL_GAP)


def _box_y(row: float) -> float:
    return PAD + row * (BOX_H + ROW_GAP)


def _curve(x1: float, y1: float, x2: float, y2: float) -> str:
    """A cubic Bézier leaving and entering horizontally."""
    dx = max(abs(x2 - x1) / 2, COL_GAP / 2)
    return f"C{_num(x1 + dx)},{_num(y1)} {_num(x2 - dx)},{_num(y2)} {_num(x2)},{_num(y2)}"


def _edge(layout: _Layout, a: int, b: int, via: list[int]) -> str:
    """Path data from the right side of ``a`` to the left side of ``b``, passing
    straight through each waypoint's slot."""
    x = _box_x(layout.column[a]) + BOX_W
    y = _box_y(layout.row[a]) + BOX_H / 2
    parts = [f"M{_num(x)},{_num(y)}"]
    for w in via:
        wx, wy = _box_x(layout.column[w]), _box_y(layout.row[w]) + BOX_H / 2
        parts.append(_curve(x, y, wx, wy))
        x, y = wx + BOX_W, wy
        parts.append(f"H{_num(x)}")
    parts.append(_curve(x, y, _box_x(layout.column[b]), _box_y(layout.row[b]) + BOX_H / 2))
    return " ".join(parts)


def _node(node: DagNode, x: float, y: float) -> str:
    state, name = escape(node.state), escape(node.name)
    tip = "\n".join(t for t in (node.name, node.state, node.detail) if t)
    g = (
        f'<g class="node {_state_class(node.state)}" data-task="{name}" data-state="{state}">'
        f"<title>{escape(tip)}</title>"
        f'<rect x="{_num(x)}" y="{_num(y)}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
        f'<text class="name" x="{_num(x + 10)}" y="{_num(y + 19)}">'
        f"{escape(_truncate(node.name, NAME_CHARS))}</text>"
        f'<text class="state" x="{_num(x + 10)}" y="{_num(y + 35)}" font-size="10.5">'
        f"{escape(_truncate(node.state, NAME_CHARS + 4))}</text>"
        "</g>"
    )
    return f'<a href="{escape(node.href)}">{g}</a>' if node.href else g


def _summary(states: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    for s in states:
        counts[s] = counts.get(s, 0) + 1
    return ", ".join(f"{k} {s}" for s, k in counts.items())


def dag_svg(nodes: Sequence[DagNode]) -> Markup:
    """A run's tasks as a left-to-right DAG: ``<svg class="dag">``.

    Dependencies on names not in ``nodes`` and on the task itself are ignored;
    a dependency that closes a cycle is drawn (``class="edge back"``) but does
    not place anything, so bad data still draws.  A name given twice keeps its
    first node.
    """
    unique: dict[str, DagNode] = {}
    for node in nodes:
        unique.setdefault(node.name, node)
    todo = list(unique.values())
    if not todo:
        return _empty_svg("dag", "No tasks", 240, 40)
    layout = _layout(todo)
    width = 2 * PAD + layout.columns * BOX_W + (layout.columns - 1) * COL_GAP
    height = 2 * PAD + layout.rows * BOX_H + (layout.rows - 1) * ROW_GAP
    label = f"Task graph, {len(todo)} tasks: {_summary([n.state for n in todo])}"
    out = [
        f'<svg class="dag" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}"'
        f' width="{width}" height="{height}" role="img" aria-label="{escape(label)}"'
        ' font-size="13">',
        f'<defs><marker id="{_ARROW_ID}" viewBox="0 0 10 10" refX="10" refY="5"'
        ' markerWidth="7" markerHeight="7" orient="auto">'
        '<path class="arrowhead" d="M0,0 L10,5 L0,10 z"/></marker></defs>',
    ]
    drawn = [("edge", a, b, via) for a, b, via in layout.chains]
    drawn += [("edge back", a, b, []) for a, b in layout.back]
    for cls, a, b, via in drawn:
        out.append(
            f'<path class="{cls}" data-from="{escape(todo[a].name)}"'
            f' data-to="{escape(todo[b].name)}" d="{_edge(layout, a, b, via)}"'
            f' fill="none" marker-end="url(#{_ARROW_ID})"/>'
        )
    for i, node in enumerate(todo):
        out.append(_node(node, _box_x(layout.column[i]), _box_y(layout.row[i])))
    out.append("</svg>")
    return Markup("".join(out))


# -- bar charts ---------------------------------------------------------------------

PLOT_H = 80
#: room left of the plot for the y label, above it, and below it for the x labels
LEFT, TOP, BOTTOM = 44, 8, 18
PLOT_W = 480
MINUTES = 60
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


def _empty_svg(kind: str, text: str, width: int, height: int) -> Markup:
    cls = "dag" if kind == "dag" else f"chart {kind}"
    return Markup(
        f'<svg class="{cls}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}"'
        f' width="{width}" height="{height}" role="img" aria-label="{escape(text)}"'
        f' font-size="12"><text class="empty" x="{_num(width / 2)}" y="{_num(height / 2 + 4)}"'
        f' text-anchor="middle">{escape(text)}</text></svg>'
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


def _rect(cls: str, x: float, y: float, w: float, h: float, paint: str = "") -> str:
    return (
        f'<rect class="{cls}" x="{_num(x)}" y="{_num(y)}" width="{_num(w)}"'
        f' height="{_num(h)}"{paint}/>'
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
    width, height = LEFT + PLOT_W + 8, TOP + PLOT_H + BOTTOM
    label = f"Tasks per minute, last hour: {total_ok} succeeded, {total_fail} failed"
    out = [_chart_open("activity", width, height, label), _axes(str(top) if top else "", width)]
    if top == 0:
        out.append(
            f'<text class="empty" x="{_num(LEFT + PLOT_W / 2)}" y="{TOP + PLOT_H // 2}"'
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


def durations_svg(runs: Sequence[tuple[str, float | None, str]]) -> Markup:
    """One bar per run, in the order given (pass them oldest first: it is drawn
    left to right).  Each is (label, duration in seconds or None while the run
    has not finished, state); unfinished runs show as a stub on the axis."""
    if not runs:
        return _empty_svg("durations", "No runs yet", LEFT + PLOT_W + 8, TOP + PLOT_H + BOTTOM)
    known = [d for _l, d, _s in runs if d is not None and math.isfinite(d) and d > 0]
    top = max(known, default=0.0)
    slot = min(24.0, max(6.0, PLOT_W / len(runs)))
    bar = max(3.0, slot * 0.7)
    width, height = LEFT + math.ceil(slot * len(runs)) + 8, TOP + PLOT_H + BOTTOM
    label = f"Durations of the last {len(runs)} runs, longest {format_seconds(top)}"
    out = [
        _chart_open("durations", width, height, label),
        _axes(format_seconds(top) if top else "", width),
    ]
    base = TOP + PLOT_H
    for i, (name, seconds, state) in enumerate(runs):
        x = LEFT + i * slot + (slot - bar) / 2
        done = max(seconds, 0.0) if seconds is not None and math.isfinite(seconds) else None
        said = "not finished" if done is None else format_seconds(done)
        out.append(
            f'<g class="run" data-state="{escape(state)}">'
            f"<title>{escape(name)}: {said} ({escape(state)})</title>"
            + _rect("hit", LEFT + i * slot, TOP, slot, PLOT_H, _HIT)
        )
        cls = _state_class(state)
        if done is None:
            out.append(_rect(f"bar unfinished {cls}", x, base - 3, bar, 3))
        else:
            h = max(1.0, done / top * PLOT_H) if top > 0 else 1.0
            out.append(_rect(f"bar {cls}", x, base - h, bar, h))
            if state in _FAILED:
                out.append(_rect("hatch", x, base - h, bar, h, _HATCH.format("durations")))
        out.append("</g>")
    out.append("</svg>")
    return Markup("".join(out))
