"""``GET /metrics``: Prometheus text format, read from Redis at scrape time.

A custom collector (:class:`RedcronCollector`) on a registry of the Flask app's
own (never prometheus-client's global one, so two apps in one process do not
mix) turns :func:`redcron.store.metrics.read_metrics` into metric families.
The route sits outside ``/v1`` and, like most scrape targets, needs no token
unless ``create_app(..., metrics_token=...)`` sets one: firewall it otherwise
(it names tenants, queues and jobs).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator, Sequence

import flask
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from redcron.app import App
from redcron.dashboard.api.auth import bearer
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.totals import TTL_S, Totals, WorkTotals, totals
from redcron.engine import unavailable_shards
from redcron.errors import ValidationError
from redcron.keys import DURATION_NAMES, DURATION_OTHER
from redcron.model import validation
from redcron.store import BREAKER_VALUES, Metrics, digest, read_metrics

#: Flask config key: SHA-256 of the token ``GET /metrics`` requires (None: open)
METRICS_DIGEST = "REDCRON_METRICS_TOKEN_SHA256"
#: what ``GET /metrics`` says it serves: the Prometheus text format 0.0.4, which
#: every Prometheus reads (recent prometheus-client releases name 1.0.0 in
#: CONTENT_TYPE_LATEST for the same text: so it is not taken from the installed one)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: tenants one scrape may name (``/metrics?tenant=a&tenant=b``) for their series
MAX_TENANTS_ASKED = 100
#: how long a scrape that finds the background totals stale waits for their
#: refresh (a count of every tenant: ~1.4 s at 10,000 tenants), and how old a
#: snapshot it may still serve when that wait runs out (older: the families
#: read from it are left out, not shown with figures from before an idle spell)
SCRAPE_WAIT_S = 2.0
SNAPSHOT_MAX_AGE_S = 120.0


class RedcronCollector(Collector):
    """Every ``redcron_*`` family, read fresh on each ``collect``: per-tenant
    series of the tenants with something to show (at most ``TOP_TENANTS``) and
    of ``tenants`` (named by the scrape)."""

    def __init__(self, app: App, tenants: Sequence[str] = (), totals: Totals | None = None) -> None:
        self.app = app
        self.tenants = tenants
        self.totals = totals

    def collect(self) -> Iterator[Metric]:
        snap = None
        if self.totals is not None:
            snap = self.totals.get(SCRAPE_WAIT_S, SNAPSHOT_MAX_AGE_S)
        delayed = snap.delayed_by_tenant if snap is not None else None
        m = read_metrics(self.app.broker, self.tenants, delayed=delayed)
        gone = unavailable_shards()
        yield _shards_up(self.app.broker.shards, gone)
        # a shard out (a cluster master down): the sums over shards are left out,
        # absent rather than short (a counter short of a shard reads as a reset)
        whole = not gone
        if whole:
            yield from _deployment(m, snap)
        ready = GaugeMetricFamily(
            "redcron_queue_ready", "Ready tasks (all priority classes)", labels=["tenant", "queue"]
        )
        for (tenant, queue), n in sorted(m.ready.items()):
            ready.add_metric([tenant, queue], n)
        yield ready
        oldest = GaugeMetricFamily(
            "redcron_queue_oldest_ready_age_seconds",
            "Age of the oldest ready task (tenants parked at a cap or rate limit are left out)",
            labels=["tenant", "queue"],
        )
        for (tenant, queue), age in sorted(m.oldest_ready_s.items()):
            oldest.add_metric([tenant, queue], age)
        yield oldest
        for name, doc, figures in (
            ("redcron_tenant_in_flight", "Tasks leased to a worker", m.in_flight),
            (
                "redcron_tenant_delayed",
                "Retries and countdown tasks waiting for their time",
                m.delayed,
            ),
            ("redcron_tenant_dlq", "Dead-lettered tasks", m.dlq),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=["tenant"])
            for tenant, n in sorted(figures.items()):
                gauge.add_metric([tenant], n)
            yield gauge
        yield GaugeMetricFamily("redcron_workers_live", "Live workers", value=m.workers_live)
        if snap is not None:  # summed over every worker: the background totals'
            yield from _workers(snap, m.queues)
        for stat, n in sorted(m.stats.items()) if whole else ():
            # prometheus-client appends _total to counter samples
            yield CounterMetricFamily(f"redcron_{stat}", f"Lifetime count: {stat}", value=n)
        breaker = GaugeMetricFamily(
            "redcron_job_breaker_state",
            "Circuit breaker of a job: 0 closed, 1 open, 2 trial",
            labels=["tenant", "job"],
        )
        for (tenant, job), state in sorted(m.breakers.items()):
            breaker.add_metric([tenant, job], BREAKER_VALUES.get(state, 0))
        yield breaker
        parked = GaugeMetricFamily(
            "redcron_jobs_parked",
            "Jobs the beat parked: off the schedule, not fired until updated or resumed",
            labels=["tenant"],
        )
        for tenant, n in sorted(m.jobs_parked.items()):
            parked.add_metric([tenant], n)
        yield parked
        overdue = GaugeMetricFamily(
            "redcron_trigger_overdue_seconds",
            "How late the most overdue scheduled fire still to make is (0: none is due)",
            labels=["shard"],
        )
        for shard, seconds in sorted(m.trigger_overdue_s.items()):
            overdue.add_metric([str(shard)], seconds)
        yield overdue
        if whole:
            yield HistogramMetricFamily(
                "redcron_trigger_lag_seconds",
                "How late scheduled fires were made (manual runs are not counted)",
                buckets=m.trigger_lag.cumulative(),
                sum_value=m.trigger_lag.sum_s,
            )
        yield from _durations(m)
        attempts = CounterMetricFamily(
            "redcron_task_attempts",
            "Task attempts ended, by outcome (succeeded, failed, timed_out, lost, cancelled)",
            labels=["tenant", "outcome"],
        )
        for (tenant, outcome), n in sorted(m.attempts.items()):
            attempts.add_metric([tenant, outcome], n)
        yield attempts
        runs = CounterMetricFamily(
            "redcron_runs",
            "Runs ended, by state (succeeded, failed, cancelled; skipped and rejected fires)",
            labels=["tenant", "state"],
        )
        for (tenant, state), n in sorted(m.runs.items()):
            runs.add_metric([tenant, state], n)
        yield runs
        late = CounterMetricFamily(
            "redcron_runs_late",
            "Runs still going past their job's deadline_s (each counted once, when found late)",
            labels=["tenant"],
        )
        for tenant, n in sorted(m.runs_late.items()):
            late.add_metric([tenant], n)
        yield late


def init_metrics(web: flask.Flask, app: App, token: str | None) -> None:
    """Register ``GET /metrics`` on ``web``; each scrape builds a registry of its
    own (never prometheus-client's global one, so two apps in one process do not
    mix), with the tenants it names."""
    web.config[METRICS_DIGEST] = digest(token) if token else None
    web.add_url_rule("/metrics", "metrics", metrics, methods=["GET"])


def metrics() -> flask.Response:
    want = flask.current_app.config.get(METRICS_DIGEST)
    if want:
        token = bearer(flask.request.headers.get("Authorization", ""))
        if token is None or not hmac.compare_digest(want, digest(token)):
            return flask.Response(
                "send the metrics token: Authorization: Bearer <token>\n",
                status=401,
                mimetype="text/plain",
                headers={"WWW-Authenticate": "Bearer"},
            )
    tenants = flask.request.args.getlist("tenant")
    if len(tenants) > MAX_TENANTS_ASKED:
        return _refuse(f"at most {MAX_TENANTS_ASKED} tenant= arguments per scrape")
    for t in tenants:
        try:
            validation.name("tenant", t)
        except ValidationError as exc:
            return _refuse(str(exc))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RedcronCollector(redcron_app(), tenants, totals()))
    return flask.Response(generate_latest(registry), headers={"Content-Type": CONTENT_TYPE})


def _durations(m: Metrics) -> Iterator[Metric]:
    """The attempt- and run-duration histograms of the tenants shown."""
    for name, doc, label, figures in (
        (
            "redcron_task_attempt_duration_seconds",
            "How long attempts that succeeded, failed or timed out took, per task name "
            f"(a tenant's names past its first {DURATION_NAMES} count as {DURATION_OTHER})",
            "task",
            m.attempt_durations,
        ),
        (
            "redcron_run_duration_seconds",
            "How long ended runs took from their start, per job name "
            f"(a tenant's names past its first {DURATION_NAMES} count as {DURATION_OTHER})",
            "job",
            m.run_durations,
        ),
    ):
        family = HistogramMetricFamily(name, doc, labels=["tenant", label])
        for (tenant, what), hist in sorted(figures.items()):
            family.add_metric([tenant, what], hist.cumulative(), sum_value=hist.sum_s)
        yield family


def _refuse(message: str) -> flask.Response:
    return flask.Response(message + "\n", status=400, mimetype="text/plain")


def _workers(snap: WorkTotals, queues: Sequence[str]) -> Iterator[Metric]:
    served = GaugeMetricFamily(
        "redcron_queue_workers", "Live workers leasing from a queue", labels=["queue"]
    )
    for queue in sorted(set(snap.workers_by_queue) | set(queues)):
        served.add_metric([queue], snap.workers_by_queue.get(queue, 0))
    yield served
    unrunnable = GaugeMetricFamily(
        "redcron_queue_unrunnable",
        "Ready tasks of a queue whose task no live worker serving it has registered "
        "(workers leave them ready; counted in the background, the first 1,000 per stream)",
        labels=["queue"],
    )
    for queue, n in sorted(snap.unrunnable_by_queue(queues).items()):
        unrunnable.add_metric([queue], n)
    yield unrunnable
    slots = GaugeMetricFamily("redcron_worker_slots", "Concurrency of the live workers")
    slots.add_metric([], snap.worker_slots)
    yield slots
    running = GaugeMetricFamily(
        "redcron_worker_running", "Attempts running at the live workers' last heartbeat"
    )
    running.add_metric([], snap.worker_running)
    yield running


def _shards_up(shards: int, gone: Sequence[int]) -> Metric:
    """1 per shard this scrape read, 0 per shard left out (a Redis Cluster with
    its master down: the scrape answers with the others' figures)."""
    up = GaugeMetricFamily(
        "redcron_shard_up",
        "1: the shard's figures are in this scrape; 0: its Redis master did not answer "
        "(the deployment-wide figures then leave it out)",
        labels=["shard"],
    )
    for shard in range(shards):
        up.add_metric([str(shard)], 0 if shard in gone else 1)
    return up


def _deployment(m: Metrics, snap: WorkTotals | None) -> Iterator[Metric]:
    """Figures of every tenant at once, whatever series are shown per tenant."""
    yield GaugeMetricFamily("redcron_tenants", "Tenants known", value=m.tenants)
    yield GaugeMetricFamily(
        "redcron_metrics_tenants_shown",
        "Tenants with per-tenant series in this scrape (those with something to show, "
        "and those asked for)",
        value=m.tenants_shown,
    )
    attempts = CounterMetricFamily(
        "redcron_task_attempts_all",
        "Task attempts ended, by outcome, all tenants",
        labels=["outcome"],
    )
    for outcome, n in sorted(m.attempts_all.items()):
        attempts.add_metric([outcome], n)
    yield attempts
    runs = CounterMetricFamily(
        "redcron_runs_all", "Runs ended, by state, all tenants", labels=["state"]
    )
    for state, n in sorted(m.runs_all.items()):
        runs.add_metric([state], n)
    yield runs
    yield CounterMetricFamily(
        "redcron_runs_late_all",
        "Runs still going past their job's deadline_s, all tenants",
        value=m.runs_late_all,
    )
    if snap is None:
        return  # the count outlasted the scrape's wait, and no recent snapshot is left
    tasks = GaugeMetricFamily(
        "redcron_deployment_tasks",
        f"Tasks of every tenant by place (ready, in_flight, delayed, dlq), counted "
        f"in the background at most every {TTL_S:.0f} s while scraped or viewed",
        labels=["place"],
    )
    for place, n in (
        ("ready", snap.ready_total),
        ("in_flight", snap.in_flight),
        ("delayed", snap.delayed or 0),
        ("dlq", snap.dlq),
    ):
        tasks.add_metric([place], n)
    yield tasks
