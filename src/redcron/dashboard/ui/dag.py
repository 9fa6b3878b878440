"""A run's tasks drawn as a left-to-right DAG, as inline SVG (:func:`dag_svg`).

No JavaScript and no graph library: columns by longest path, rows by the
order of the upstream boxes, edges as curves through waypoints.  Every colour
comes from a CSS class (``static/charts.css``); the output is a function of
the input alone, so pages diff cleanly and tests can compare strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from markupsafe import Markup, escape

from redcron.dashboard.ui.svg import empty_svg, num, state_class

# -- DAG geometry (px) --------------------------------------------------------------

BOX_W, BOX_H = 168, 44
#: room between columns for the edges' curves and arrowheads
COL_GAP = 56
ROW_GAP = 14
PAD = 10
#: characters of a task name that fit in a box at the 13 px bold name font
NAME_CHARS = 18
_ARROW_ID = "rc-dag-arrow"
_ARROW = "\u2192"


@dataclass(frozen=True)
class DagNode:
    """One task of a run, as the DAG drawing needs it.

    ``detail`` is extra hover text (e.g. "attempt 2/3, 4.1 s"); ``href`` makes
    the box a link (to the task's page); ``carried`` is what the task's result
    looks like (a short preview): the hover text of the edges leaving it.
    """

    name: str
    state: str
    depends_on: tuple[str, ...]
    href: str | None = None
    detail: str | None = None
    carried: str | None = None
    #: a few characters shown after the state (a mapped task's ``998/1,000``)
    badge: str | None = None
    #: a running task's done/total (0..1, ``ctx.progress``), drawn as a bar along
    #: the box's foot (None: no bar); its ``40/100`` is the ``badge``
    fraction: float | None = None


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
    return f"C{num(x1 + dx)},{num(y1)} {num(x2 - dx)},{num(y2)} {num(x2)},{num(y2)}"


def _edge(layout: _Layout, a: int, b: int, via: list[int]) -> str:
    """Path data from the right side of ``a`` to the left side of ``b``, passing
    straight through each waypoint's slot."""
    x = _box_x(layout.column[a]) + BOX_W
    y = _box_y(layout.row[a]) + BOX_H / 2
    parts = [f"M{num(x)},{num(y)}"]
    for w in via:
        wx, wy = _box_x(layout.column[w]), _box_y(layout.row[w]) + BOX_H / 2
        parts.append(_curve(x, y, wx, wy))
        x, y = wx + BOX_W, wy
        parts.append(f"H{num(x)}")
    parts.append(_curve(x, y, _box_x(layout.column[b]), _box_y(layout.row[b]) + BOX_H / 2))
    return " ".join(parts)


def _node(node: DagNode, x: float, y: float) -> str:
    state, name = escape(node.state), escape(node.name)
    tip = "\n".join(t for t in (node.name, node.state, node.detail) if t)
    bar = ""
    if node.fraction is not None:
        bar = (
            f'<rect class="progress-track" x="{num(x + 6)}" y="{num(y + BOX_H - 6)}"'
            f' width="{BOX_W - 12}" height="3"/>'
            f'<rect class="progress-bar" x="{num(x + 6)}" y="{num(y + BOX_H - 6)}"'
            f' width="{num((BOX_W - 12) * node.fraction)}" height="3"/>'
        )
    g = (
        f'<g class="node {state_class(node.state)}" data-task="{name}" data-state="{state}">'
        f"<title>{escape(tip)}</title>"
        f'<rect x="{num(x)}" y="{num(y)}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
        f'<text class="name" x="{num(x + 10)}" y="{num(y + 19)}">'
        f"{escape(_truncate(node.name, NAME_CHARS))}</text>"
        f'<text class="state" x="{num(x + 10)}" y="{num(y + 35)}" font-size="10.5">'
        f"{escape(_truncate(_state_line(node), NAME_CHARS + 4))}</text>"
        f"{bar}</g>"
    )
    return f'<a href="{escape(node.href)}">{g}</a>' if node.href else g


def _state_line(node: DagNode) -> str:
    return f"{node.state} · {node.badge}" if node.badge else node.state


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
        return empty_svg("dag", "No tasks", 240, 40)
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
        carried = todo[a].carried
        tail = "/>"
        if carried is not None:  # what the edge carried (the upstream's result): its hover text
            tip = escape(f"{todo[a].name} {_ARROW} {todo[b].name}: {carried}")
            tail = f' data-carried="{escape(carried)}"><title>{tip}</title></path>'
        out.append(
            f'<path class="{cls}" data-from="{escape(todo[a].name)}"'
            f' data-to="{escape(todo[b].name)}" d="{_edge(layout, a, b, via)}"'
            f' fill="none" marker-end="url(#{_ARROW_ID})"{tail}'
        )
    for i, node in enumerate(todo):
        out.append(_node(node, _box_x(layout.column[i]), _box_y(layout.row[i])))
    out.append("</svg>")
    return Markup("".join(out))
