"""Every metric name the Grafana dashboard (``contrib/grafana/redcron.json``),
the alerting rules (``contrib/prometheus/alerts.yml``) and the docs use is one
``GET /metrics`` serves on a running deployment: a renamed metric fails here,
not on someone's blank panel or silent alert.

The deployment is real (an App on the test Redis, ``create_app`` scraped the
way Prometheus scrapes it) and has done a little of everything, so that nearly
every family has samples: tasks succeeded, failed for good, reaped; work on a
queue no worker serves and a delayed task; a worker registered; a job whose
breaker opened, a scheduled fire made late, a run past its deadline, a parked
job.  A family the scrape lists with no sample still counts as served (its
``# HELP``/``# TYPE`` lines are there): a panel over it is empty, not wrong.
Times are passed to the scripts (``now``), or set in the past on the server
clock: no sleeping.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import flask
import pytest
import yaml
from followups import follow  # tests/helpers
from prometheus_client.parser import text_string_to_metric_families

from redcron import App
from redcron.beat.beat import Beat
from redcron.dashboard import create_app
from redcron.dashboard.totals import EXTENSION as TOTALS
from redcron.engine import FailItem, Park, Registration, WorkerRegistry
from redcron.engine.beat import BeatStore
from redcron.keys import shard_of
from redcron.model.jobs import Task

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "contrib" / "grafana" / "redcron.json"
ALERTS = ROOT / "contrib" / "prometheus" / "alerts.yml"
DOCS = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])
#: a metric name where it is used: PromQL, or the docs' prose and tables
NAME = re.compile(r"redcron_[a-z0-9_]+")
#: ``redcron_*`` words of the docs that are no metric, and what they are
NOT_METRICS = {"redcron_session": "the dashboard's session cookie (docs/dashboard.md)"}
#: the series names each type of family gives PromQL (prometheus-client writes a
#: counter family ``x`` as samples ``x_total``)
SERIES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "unknown": ("",),
}

A, G = "acme", "globex"
T0 = 1_900_000_000_000  # a server time for the scripts (ms)


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))

    @a.task(name="g.ok", tenant=A, retries=1)
    def ok() -> None: ...

    @a.task(name="g.bad", tenant=A, retries=0)
    def bad() -> None: ...

    @a.task(name="g.rated", tenant=A, rate="1/h")
    def rated() -> None: ...

    yield a
    a.close()


def workload(app: App) -> None:
    """A little of everything a deployment does, so that the families have samples."""
    b = app.broker
    shard = shard_of(A, b.shards)
    for _ in range(4):
        app.enqueue("g.ok")
    leases = b.leases.lease(shard, "w1", 3, 1_000, ["default"], now=T0)
    assert len(leases) == 3
    done, dead, _reaped = leases
    b.leases.start(shard, "w1", [(done.iid, done.epoch)], now=T0 + 10)
    assert b.leases.complete(shard, "w1", [(done.iid, done.epoch, b"")], now=T0 + 250)
    [res] = b.leases.fail(
        shard, "w1", [FailItem(dead.iid, dead.epoch, "failed", "boom", False)], now=T0 + 300
    )
    assert res.state == "dead"
    # the third one's lease runs out: reaped, lost, retried
    assert b.maintenance.reap(shard, now=T0 + 5_000, jitter=0.0)[0] == 1
    for _ in range(2):  # a queue no live worker serves
        app.enqueue("g.ok", _queue="bulk")
    app.enqueue("g.ok", _tenant=G, _countdown=3600)  # delayed
    for _ in range(2):  # a rate of 1/h: the first takes its turn, the second waits
        app.enqueue("g.rated", _queue="rated")
    b.maintenance.promote(shard)
    WorkerRegistry(b).publish(
        Registration("w1", "h", 1, ("default", "jobs"), (), 4, 1, ("g.ok", "g.bad")), 60_000
    )

    # a job whose breaker opens at its first failure: a run failed and timed
    app.jobs.put("flaky", tenant=A, tasks={"t": Task("g.bad", queue="jobs")}, overlap="allow",
                 breaker_threshold=0.5, breaker_min_attempts=1)  # fmt: skip
    assert app.jobs.trigger("flaky", tenant=A, now=T0)
    [x] = b.leases.lease(shard, "w1", 1, 60_000, ["jobs"], now=T0 + 1_000)
    b.leases.fail(shard, "w1", [FailItem(x.iid, x.epoch, "failed", "boom", False)], now=T0 + 3_000)
    # a run two minutes past its job's deadline_s; a scheduled fire 5 s overdue
    app.jobs.put("report", tenant=G, tasks={"t": Task("g.ok", queue="jobs")}, deadline_s=60,
                 overlap="allow")  # fmt: skip
    assert app.jobs.trigger("report", tenant=G, now=b.server_ms() - 180_000)
    hourly = app.jobs.put("hourly", tenant=G, every="1h", tasks={"t": Task("g.ok", queue="jobs")})
    b.client.zadd(b.keys.schedule(hourly.shard), {hourly.id: b.server_ms() - 5_000})
    # a job the beat parked (off the schedule until someone fixes it)
    parked = app.jobs.put("broken", tenant=G, every="1h", tasks={"t": Task("g.ok")})
    score = int(b.client.zscore(b.keys.schedule(parked.shard), parked.id) or 0)
    park = Park(parked.id, str(parked.version), score, "unreadable spec: test")
    assert BeatStore(b).park(parked.shard, [park]) == [True]
    follow(app)  # counters, histograms and the breaker: follow-ups
    Beat(app, name="b1", apply_declared=False).tick()  # fires hourly, marks report late
    follow(app)
    assert app.jobs.get("flaky", tenant=A).breaker == "open"


def scrape(web: flask.Flask) -> str:
    resp = web.test_client().get(f"/metrics?tenant={A}&tenant={G}")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    return resp.get_data(as_text=True)


@pytest.fixture
def served(app: App) -> str:
    """The text of a scrape of the deployment after :func:`workload`."""
    workload(app)
    web = create_app(app)
    # delayed per tenant and the workers' figures come from the background
    # totals, which the first scrape starts: the second reads them
    scrape(web)
    assert web.extensions[TOTALS].wait() is not None
    return scrape(web)


def served_names(text: str) -> tuple[set[str], set[str], set[str]]:
    """What a scrape serves: the series names PromQL can select (a family listed
    with no sample included), those and the histograms' family names (which
    prose uses), and the series names that have samples."""
    series: set[str] = set()
    families: set[str] = set()
    sampled: set[str] = set()
    for family in text_string_to_metric_families(text):
        names = {family.name + suffix for suffix in SERIES[family.type]}
        series |= names
        families |= names | {family.name} if family.type == "histogram" else names
        sampled |= {s.name for s in family.samples}
    return series, families, sampled


def walk(node: object, key: str = "") -> Iterator[tuple[str, str]]:
    """(key, text) of every string in a parsed JSON or YAML document."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, str(k))
    elif isinstance(node, list):
        for v in node:
            yield from walk(v, key)
    elif isinstance(node, str):
        yield key, node


#: where PromQL sits: a panel's target, a template variable's query, a rule's expr
PROMQL_KEYS = {"expr", "query", "definition"}


def used(doc: object) -> tuple[set[str], set[str]]:
    """Metric names of a dashboard or rule file: (in its PromQL, in its prose)."""
    promql: set[str] = set()
    prose: set[str] = set()
    for key, text in walk(doc):
        (promql if key in PROMQL_KEYS else prose).update(NAME.findall(text))
    return promql, prose


def docs_names() -> dict[str, set[str]]:
    """``redcron_*`` names of each doc (docs/*.md, README.md), the non-metrics left out."""
    out = {}
    for doc in DOCS:
        names = set(NAME.findall(doc.read_text())) - set(NOT_METRICS)
        if names:
            out[doc.relative_to(ROOT).as_posix()] = names
    return out


def missing(text: str, dashboard: object, alerts: object) -> dict[str, list[str]]:
    """Where each name not served is used: PromQL must select series served; prose
    (descriptions, annotations, docs) may also name a histogram by its family."""
    series, families, _sampled = served_names(text)
    out: dict[str, list[str]] = {}
    for where, doc in (("contrib/grafana/redcron.json", dashboard),
                       ("contrib/prometheus/alerts.yml", alerts)):  # fmt: skip
        promql, prose = used(doc)
        for name in (promql - series) | (prose - families):
            out.setdefault(name, []).append(where)
    for where, names in docs_names().items():
        for name in names - families:
            out.setdefault(name, []).append(where)
    return out


def load() -> tuple[object, object]:
    return json.loads(DASHBOARD.read_text()), yaml.safe_load(ALERTS.read_text())


def test_every_metric_the_dashboard_alerts_and_docs_name_is_served(served: str) -> None:
    dashboard, alerts = load()
    gone = missing(served, dashboard, alerts)
    assert not gone, f"named but not served by GET /metrics (renamed?): {gone}"
    # the names were found at all (a walk or pattern gone wrong would pass the above)
    assert len(used(dashboard)[0]) >= 20 and len(used(alerts)[0]) >= 10
    assert len(docs_names().get("docs/operations.md", ())) >= 20


def test_the_workload_gives_what_the_dashboard_and_alerts_select_samples(served: str) -> None:
    # served with no sample would pass the check above; that every name has
    # samples here shows the scrape checked was of a deployment doing all of it
    _series, _families, sampled = served_names(served)
    dashboard, alerts = load()
    selected = used(dashboard)[0] | used(alerts)[0]
    assert not selected - sampled, f"no samples: extend workload() for {selected - sampled}"


def test_a_renamed_metric_fails_the_check(served: str) -> None:
    dashboard, alerts = load()
    # a panel selecting a name the scrape does not serve; a counter without _total
    renamed = json.loads(
        DASHBOARD.read_text().replace("redcron_queue_ready{", "redcron_queue_ready_tasks{")
    )
    assert missing(served, renamed, alerts) == {
        "redcron_queue_ready_tasks": ["contrib/grafana/redcron.json"]
    }
    bare = yaml.safe_load(ALERTS.read_text().replace("redcron_dead_total", "redcron_dead"))
    assert missing(served, dashboard, bare) == {"redcron_dead": ["contrib/prometheus/alerts.yml"]}
    # a histogram is selected by its series, not its family name
    assert "redcron_trigger_lag_seconds" not in served_names(served)[0]
