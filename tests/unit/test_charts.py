"""The dashboard's SVG drawings (redcron.dashboard.ui.charts, .dag): layout, safety, escaping.

Every drawing is parsed as XML, so a stray ``<`` or ``&`` fails the test; the
layout is read back from the boxes' coordinates.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from redcron.dashboard.ui.charts import PLOT_H, activity_svg, durations_svg, format_seconds
from redcron.dashboard.ui.dag import BOX_W, NAME_CHARS, DagNode, dag_svg
from redcron.model.states import CANCEL_REQUESTED, EXPIRED, RunState, TaskState

SVG = "{http://www.w3.org/2000/svg}"
CSS = Path(__file__).resolve().parents[2] / "src/redcron/dashboard/static/charts.css"


def parse(markup: str) -> ET.Element:
    return ET.fromstring(str(markup))


def n(name: str, *deps: str, state: str = "succeeded", **kw: str) -> DagNode:
    return DagNode(name, state, deps, **kw)


def node_groups(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "node" in g.get("class", "").split()]


def boxes(root: ET.Element) -> dict[str, tuple[float, float]]:
    """Task name -> (x, y) of its box."""
    out = {}
    for g in node_groups(root):
        rect = g.find(f"{SVG}rect")
        assert rect is not None
        out[g.get("data-task", "")] = (float(rect.get("x", "")), float(rect.get("y", "")))
    return out


def columns(root: ET.Element) -> dict[str, int]:
    return {name: round((x - 10) / (BOX_W + 56)) for name, (x, _y) in boxes(root).items()}


def edges(root: ET.Element) -> list[ET.Element]:
    return [p for p in root.iter(f"{SVG}path") if "edge" in p.get("class", "").split()]


def crossings(root: ET.Element) -> int:
    """Pairs of edges between the same two adjacent columns whose ends swap order."""
    at = boxes(root)
    col = columns(root)
    pairs = [
        (at[e.get("data-from", "")][1], at[e.get("data-to", "")][1], col[e.get("data-from", "")])
        for e in edges(root)
    ]
    return sum(
        1
        for i, (a1, b1, c1) in enumerate(pairs)
        for a2, b2, c2 in pairs[i + 1 :]
        if c1 == c2 and (a1 - a2) * (b1 - b2) < 0
    )


# -- DAG layout ------------------------------------------------------------------------


def test_fan_out_fan_in_puts_each_task_in_its_longest_path_column() -> None:
    root = parse(dag_svg([n("a"), n("b", "a"), n("c", "a"), n("d", "b", "c")]))
    assert columns(root) == {"a": 0, "b": 1, "c": 1, "d": 2}
    at = boxes(root)
    assert at["b"][1] < at["c"][1], "ties keep the job's task order"
    # the single boxes sit half-way between the pair
    assert at["a"][1] == at["d"][1] == (at["b"][1] + at["c"][1]) / 2
    assert len(edges(root)) == 4
    assert crossings(root) == 0


def test_a_diamond_with_a_long_branch_routes_the_short_edge_around_the_boxes() -> None:
    nodes = [n("a"), n("b", "a"), n("c", "b"), n("e", "c"), n("d", "a", "e")]
    root = parse(dag_svg(nodes))
    assert columns(root) == {"a": 0, "b": 1, "c": 2, "e": 3, "d": 4}
    (short,) = [e for e in edges(root) if (e.get("data-from"), e.get("data-to")) == ("a", "d")]
    path = short.get("d", "")
    # one straight run through each column it crosses, below the chain's boxes
    assert path.count("H") == 3
    at = boxes(root)
    (chain_top,) = {at[t][1] for t in "bce"}
    through = [float(y) for y in re.findall(r"[\d.]+,([\d.]+) H", path)]
    assert len(through) == 3 and all(y > chain_top + 44 for y in through)


def test_a_column_is_ordered_by_its_upstream_tasks() -> None:
    # d is listed first but hangs off b, c off a: they swap to avoid a crossing
    root = parse(dag_svg([n("a"), n("b"), n("d", "b"), n("c", "a")]))
    at = boxes(root)
    assert at["c"][1] < at["d"][1]
    assert crossings(root) == 0


def test_roots_are_reordered_by_what_they_feed() -> None:
    # listed a, b, c: d needs a and c, e needs b; c moves next to a
    root = parse(dag_svg([n("a"), n("b"), n("c"), n("d", "a", "c"), n("e", "b")]))
    at = boxes(root)
    assert at["a"][1] < at["c"][1] < at["b"][1]
    assert at["d"][1] < at["e"][1]
    assert crossings(root) == 0


def test_independent_tasks_keep_the_task_order() -> None:
    names = ["z", "y", "x", "w"]
    at = boxes(parse(dag_svg([n(name) for name in names])))
    assert sorted(names, key=lambda t: at[t][1]) == names


def test_a_cycle_is_broken_and_still_drawn() -> None:
    root = parse(dag_svg([n("a", "b"), n("b", "a"), n("c", "b")]))
    assert len(node_groups(root)) == 3
    kinds = sorted(e.get("class", "") for e in edges(root))
    assert kinds == ["edge", "edge", "edge back"]


@pytest.mark.timeout(10)
def test_long_chains_and_rings_do_not_recurse_or_hang() -> None:
    size = 3000
    chain = [n(f"t{i}", f"t{i - 1}") if i else n("t0") for i in range(size)]
    ring = [n(f"r{i}", f"r{(i - 1) % 300}") for i in range(300)]
    assert len(node_groups(parse(dag_svg(chain)))) == size
    root = parse(dag_svg(ring))
    assert len(node_groups(root)) == 300
    assert [e.get("class") for e in edges(root)].count("edge back") == 1


def test_unknown_self_and_repeated_dependencies_are_ignored() -> None:
    root = parse(dag_svg([n("a", "nope", "a"), n("b", "a", "a", "gone")]))
    assert columns(root) == {"a": 0, "b": 1}
    assert len(edges(root)) == 1


def test_a_name_given_twice_keeps_its_first_node() -> None:
    root = parse(dag_svg([n("a", state="failed"), n("a", state="succeeded")]))
    assert [g.get("data-state") for g in node_groups(root)] == ["failed"]


def test_no_tasks_draws_a_note() -> None:
    root = parse(dag_svg([]))
    assert root.get("class") == "dag"
    assert not node_groups(root)
    assert "No tasks" in "".join(root.itertext())


# -- DAG markup ------------------------------------------------------------------------


def test_the_drawing_is_well_formed_and_sized_to_its_content() -> None:
    svg = dag_svg([n("a"), n("b", "a", state="running"), n("c", "a", state="failed")])
    root = parse(svg)
    assert root.tag == f"{SVG}svg"
    assert root.get("class") == "dag"
    assert root.get("role") == "img"
    assert root.get("aria-label") == "Task graph, 3 tasks: 1 succeeded, 1 running, 1 failed"
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    right = max(x for x, _y in boxes(root).values()) + BOX_W
    assert float(root.get("width", "")) == right + 10
    # the contract's exact node element, which the browser tests select on
    assert '<g class="node state-running" data-task="b" data-state="running">' in svg
    for g in node_groups(root):
        assert g[0].tag == f"{SVG}title"
    assert all(e.get("marker-end") == "url(#rc-dag-arrow)" for e in edges(root))
    assert root.find(f".//{SVG}marker[@id='rc-dag-arrow']") is not None


def test_edges_run_from_the_right_of_the_upstream_box_to_the_left_of_the_downstream() -> None:
    root = parse(dag_svg([n("a"), n("b", "a")]))
    at = boxes(root)
    (edge,) = edges(root)
    numbers = [float(x) for x in re.findall(r"-?[\d.]+", edge.get("d", ""))]
    assert edge.get("d", "").startswith("M") and " C" in edge.get("d", "")
    assert numbers[0] == at["a"][0] + BOX_W
    assert numbers[-2] == at["b"][0]


def test_every_name_and_text_is_escaped() -> None:
    evil = "<b>&\"quoted\" 'x'</b>"
    nodes = [
        n(evil, state="succeeded", href='/runs/r?task=<b>&x="1"', detail="<i>& 'd'"),
        n("after", evil, state='odd "state" <x>'),
    ]
    svg = dag_svg(nodes)
    assert "<b>" not in svg and "<i>" not in svg
    root = parse(svg)
    first, second = node_groups(root)
    assert first.get("data-task") == evil
    assert second.get("data-state") == 'odd "state" <x>'
    # a state that cannot be a class name is styled as unknown
    assert second.get("class") == "node state-unknown"
    title = first.find(f"{SVG}title")
    assert title is not None and title.text == f"{evil}\nsucceeded\n<i>& 'd'"
    link = root.find(f"{SVG}a")
    assert link is not None and link.get("href") == '/runs/r?task=<b>&x="1"'
    (edge,) = edges(root)
    assert edge.get("data-from") == evil


def test_long_names_are_cut_with_an_ellipsis_and_kept_whole_in_the_title() -> None:
    name = "extract_every_customer_from_the_warehouse"
    (g,) = node_groups(parse(dag_svg([n(name)])))
    shown = g.find(f"{SVG}text")
    assert shown is not None and shown.text is not None
    assert shown.text.endswith("\u2026") and len(shown.text) == NAME_CHARS
    assert name.startswith(shown.text[:-1])
    title = g.find(f"{SVG}title")
    assert title is not None and title.text is not None and title.text.startswith(name)


def test_the_output_is_deterministic() -> None:
    nodes = [n("a"), n("b", "a"), n("c", "a", "b"), n("d", "c", "a"), n("e", "b")]
    assert dag_svg(nodes) == dag_svg(list(nodes))
    assert dag_svg(nodes) == dag_svg(tuple(nodes))


# -- activity --------------------------------------------------------------------------

NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


def minutes_of(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == "minute"]


def rects(root: ET.Element, cls: str) -> list[ET.Element]:
    return [r for r in root.iter(f"{SVG}rect") if cls in r.get("class", "").split()]


@pytest.mark.parametrize(
    "data", [[], [(NOW, 0, 0), (NOW - timedelta(minutes=5), 0, 0)]], ids=["none", "zeros"]
)
def test_an_idle_hour_says_so(data: list[tuple[datetime, int, int]]) -> None:
    root = parse(activity_svg(data, now=NOW))
    assert root.get("class") == "chart activity"
    assert "no tasks in the last hour" in "".join(root.itertext())
    assert not rects(root, "ok") and not rects(root, "fail")
    assert not minutes_of(root)


def test_activity_draws_sixty_stacked_minutes() -> None:
    data = [
        (NOW, 3, 1),
        (NOW - timedelta(minutes=1), 1, 0),
        (NOW - timedelta(minutes=1, seconds=-20), 1, 0),  # same minute: adds up
        (NOW - timedelta(minutes=59), 0, 2),
        (NOW - timedelta(minutes=60), 50, 50),  # before the hour: ignored
    ]
    root = parse(activity_svg(data, now=NOW))
    groups = minutes_of(root)
    assert len(groups) == 60
    titles = [g.findtext(f"{SVG}title") for g in groups]
    assert titles[0] == "11:01 UTC: 0 succeeded, 2 failed"
    assert titles[-2] == "11:59 UTC: 2 succeeded, 0 failed"
    assert titles[-1] == "12:00 UTC: 3 succeeded, 1 failed"
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "4" in texts  # the y axis' maximum
    # the busiest minute fills the plot: ok and fail stacked
    ok, fail = rects(groups[-1], "ok")[0], rects(groups[-1], "fail")[0]
    assert float(ok.get("height", "")) + float(fail.get("height", "")) == PLOT_H
    assert float(fail.get("y", "")) + float(fail.get("height", "")) == float(ok.get("y", ""))
    assert len(rects(root, "hatch")) == 2  # failures are hatched, not only coloured
    assert root.get("aria-label") == "Tasks per minute, last hour: 5 succeeded, 3 failed"


def test_activity_without_now_ends_at_the_latest_minute_and_takes_naive_as_utc() -> None:
    root = parse(activity_svg([(datetime(2026, 1, 1, 8, 15, 59), 2, 0)]))
    titles = [g.findtext(f"{SVG}title") for g in minutes_of(root)]
    assert titles[-1] == "08:15 UTC: 2 succeeded, 0 failed"
    assert titles[0] == "07:16 UTC: 0 succeeded, 0 failed"


# -- durations -------------------------------------------------------------------------


def test_durations_draw_a_bar_per_run_in_the_order_given() -> None:
    runs = [("r1", 30.0, "succeeded"), ("r2", 120.0, "failed"), ("r3", None, "running")]
    root = parse(durations_svg(runs))
    assert root.get("class") == "chart durations"
    groups = [g for g in root.iter(f"{SVG}g") if g.get("class") == "run"]
    assert [g.findtext(f"{SVG}title") for g in groups] == [
        "r1: 30 s (succeeded)",
        "r2: 2 min (failed)",
        "r3: not finished (running)",
    ]
    bars = rects(root, "bar")
    assert [b.get("class") for b in bars] == [
        "bar state-succeeded",
        "bar state-failed",
        "bar unfinished state-running",
    ]
    xs = [float(b.get("x", "")) for b in bars]
    assert xs == sorted(xs)
    heights = [float(b.get("height", "")) for b in bars]
    assert heights[1] == PLOT_H and heights[0] == PLOT_H / 4
    assert "2 min" in [t.text for t in root.iter(f"{SVG}text")]
    assert len(rects(root, "hatch")) == 1


def test_durations_with_only_unfinished_runs_and_escaped_labels() -> None:
    root = parse(durations_svg([("<r&1>", None, "running"), ("r2", float("nan"), "queued")]))
    titles = [g.findtext(f"{SVG}title") for g in root.iter(f"{SVG}g")]
    assert titles == ["<r&1>: not finished (running)", "r2: not finished (queued)"]
    assert len(rects(root, "unfinished")) == 2


def test_no_runs_draws_a_note() -> None:
    root = parse(durations_svg([]))
    assert root.get("class") == "chart durations"
    assert "No runs yet" in "".join(root.itertext())


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0123, "12 ms"), (0.85, "850 ms"), (4.14, "4.1 s"), (59, "59 s"), (720, "12 min"),
     (9000, "2.5 h"), (3600, "1 h")],
)  # fmt: skip
def test_format_seconds_picks_a_readable_unit(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


# -- styles ----------------------------------------------------------------------------


def test_the_stylesheet_colours_every_state_and_has_a_dark_theme() -> None:
    css = CSS.read_text(encoding="utf-8")
    states = {s.value for s in TaskState} | {s.value for s in RunState}
    states |= {EXPIRED, CANCEL_REQUESTED, "unknown"}
    missing = sorted(s for s in states if not re.search(rf"\.state-{s}\b", css))
    assert not missing, f"charts.css has no colour for {missing}"
    assert "prefers-color-scheme: dark" in css
    # failure is told apart by the border's shape too, not by colour alone
    assert re.search(r"\.state-failed rect \{[^}]*stroke-dasharray", css)


def test_the_activity_chart_has_a_legend_for_both_colours() -> None:
    root = parse(activity_svg([(NOW, 3, 1)], now=NOW))
    legend = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "legend")
    assert [t.text for t in legend.iter(f"{SVG}text")] == ["succeeded (3)", "failed (1)"]
    classes = [r.get("class") for r in legend.iter(f"{SVG}rect")]
    # the failed swatch is hatched as the failed bars are
    assert classes == ["swatch swatch-ok", "swatch swatch-fail", "swatch-hatch"]


def test_one_slow_run_is_clipped_and_marked_instead_of_flattening_the_others() -> None:
    runs = [(f"r{i}", 10.0 + i, "succeeded") for i in range(9)] + [("slow", 3600.0, "failed")]
    root = parse(durations_svg(runs))
    groups = [g for g in root.iter(f"{SVG}g") if "run" in g.get("class", "").split()]
    clipped = [g for g in groups if "clipped" in g.get("class", "").split()]
    assert [g.findtext(f"{SVG}title") for g in clipped] == [
        "slow: 1 h, clipped at 51 s (failed)"  # 3 x the 80th percentile (17 s)
    ]
    marks = [p for p in clipped[0].iter(f"{SVG}path") if p.get("class") == "clip-mark"]
    assert len(marks) == 1  # the zigzag marker
    heights = [float(r.get("height", "")) for r in rects(root, "bar")]
    assert heights[-1] == PLOT_H and heights[0] > PLOT_H / 6  # the others keep their shape
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "51 s" in texts and "1 clipped" in texts
    assert "1 longer run(s) clipped" in root.get("aria-label", "")


def test_durations_of_a_similar_kind_are_not_clipped() -> None:
    root = parse(durations_svg([("a", 30.0, "succeeded"), ("b", 80.0, "succeeded")]))
    assert not [g for g in root.iter(f"{SVG}g") if "clipped" in g.get("class", "")]
    assert not [p for p in root.iter(f"{SVG}path") if p.get("class") == "clip-mark"]
