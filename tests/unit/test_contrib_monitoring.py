"""The Grafana dashboard and the Prometheus alerting rules in ``contrib/`` are
well formed: the JSON imports into any Grafana (a datasource variable, not a
datasource of the author's; every panel with PromQL; the variables it uses
defined), and the rule file has the shape Prometheus loads (``promtool check
rules`` is not on CI's machine: this checks the structure it would).
That every metric they name is served: tests/integration/test_metric_names.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "contrib" / "grafana" / "redcron.json"
ALERTS = ROOT / "contrib" / "prometheus" / "alerts.yml"
#: Grafana's own variables a query may use
GRAFANA_VARS = {"__rate_interval", "__interval", "__range"}
#: a Prometheus duration (``for:``)
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


def dashboard() -> dict[str, Any]:
    out: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return out


def queries(d: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(panel title, target) of every panel that is not a row."""
    return [(p["title"], t) for p in d["panels"] if p["type"] != "row" for t in p["targets"]]


def test_the_dashboard_imports_anywhere() -> None:
    d = dashboard()
    assert d["schemaVersion"] >= 36 and d["uid"] and d["title"] and d["id"] is None
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    # no datasource uid of the author's Grafana: every reference is the variable
    refs = [p["datasource"] for p in d["panels"] if "datasource" in p]
    refs += [t["datasource"] for _title, t in queries(d)]
    refs += [v["datasource"] for v in variables.values() if "datasource" in v]
    assert refs and all(r == {"type": "prometheus", "uid": "${datasource}"} for r in refs)
    assert "__inputs" not in d  # nothing to answer on import


def test_every_panel_has_promql_and_a_place_of_its_own() -> None:
    d = dashboard()
    panels = [p for p in d["panels"] if p["type"] != "row"]
    assert len(panels) >= 20
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in panels:
        assert p["targets"], p["title"]
        assert [t["refId"] for t in p["targets"]] == [chr(65 + i) for i in range(len(p["targets"]))]
        assert all("redcron_" in t["expr"] for t in p["targets"]), p["title"]
    cells: set[tuple[int, int]] = set()
    for p in d["panels"]:
        g = p["gridPos"]
        x0, y0, w, h = g["x"], g["y"], g["w"], g["h"]
        assert x0 >= 0 and x0 + w <= 24, p["title"]
        mine = {(x, y) for x in range(x0, x0 + w) for y in range(y0, y0 + h)}
        assert not cells & mine, f"{p['title']} overlaps another panel"
        cells |= mine


def test_the_queries_use_only_the_variables_defined() -> None:
    d = dashboard()
    defined = {v["name"] for v in d["templating"]["list"]} | GRAFANA_VARS
    texts = [t["expr"] for _title, t in queries(d)]
    texts += [v["query"] for v in d["templating"]["list"] if v["type"] == "query"]
    used = {m for text in texts for m in re.findall(r"\$\{?(\w+)", text)}
    assert used <= defined, used - defined
    # the per-tenant panels filter by the tenant variable, the per-queue ones by queue
    assert sum("$tenant" in t for t in texts) >= 10 and sum("$queue" in t for t in texts) >= 4


def test_the_alert_rules_have_the_shape_prometheus_loads() -> None:
    doc = yaml.safe_load(ALERTS.read_text())
    assert set(doc) == {"groups"}
    names = []
    for group in doc["groups"]:
        assert set(group) <= {"name", "interval", "rules"} and group["name"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            names.append(rule["alert"])
            assert re.fullmatch(r"Redcron[A-Z][A-Za-z]+", rule["alert"])
            assert isinstance(rule["expr"], str) and "redcron_" in rule["expr"]
            assert rule["expr"].count("(") == rule["expr"].count(")"), rule["alert"]
            assert "for" not in rule or DURATION.match(rule["for"]), rule["alert"]
            assert rule["labels"]["severity"] in {"critical", "warning", "info"}
            assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]
    assert len(names) == len(set(names))
    # the alerts people write first (issue 34)
    assert {
        "RedcronDeadLettersGrowing",
        "RedcronTriggerLagHigh",
        "RedcronQueueUnserved",
        "RedcronBreakerOpen",
        "RedcronShardDown",
        "RedcronRunsLate",
    } <= set(names)
