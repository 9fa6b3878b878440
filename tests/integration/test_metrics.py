"""GET /metrics: Prometheus text format whose figures match a known workload
exactly, read with prometheus-client's own parser."""

from __future__ import annotations

from collections.abc import Iterator

import flask
import pytest
from followups import follow  # tests/helpers
from prometheus_client.parser import text_string_to_metric_families

from redcron import App
from redcron.dashboard import create_app
from redcron.dashboard.totals import EXTENSION as TOTALS
from redcron.engine.argv import FailItem
from redcron.engine.workers import Registration, WorkerRegistry
from redcron.keys import shard_of
from redcron.model.jobs import Task

T1, T2 = "alpha", "beta"


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))

    @a.task(name="m.work", tenant=T1, retries=0)
    def work(x: int) -> int:
        return x

    yield a
    a.close()


def scrape(
    web: flask.Flask, token: str | None = None
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """sample name and sorted labels -> value"""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = web.test_client().get("/metrics", headers=headers)
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.headers["Content-Type"].startswith("text/plain; version=")
    out = {}
    for family in text_string_to_metric_families(resp.get_data(as_text=True)):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_match_a_known_workload(app: App) -> None:
    broker = app.broker
    for i in range(5):
        app.enqueue("m.work", i)  # alpha, default
    for i in range(2):
        app.enqueue("m.work", i, _queue="bulk")
    for i in range(3):
        app.enqueue("m.work", i, _tenant=T2)
    app.enqueue("m.work", 9, _tenant=T2, _countdown=3600)  # delayed

    shard = shard_of(T1, broker.shards)
    leases = broker.leases.lease(shard, "w1", 3, 60_000, ["default"], tenants=[T1])
    assert len(leases) == 3
    dead = leases[0]
    [res] = broker.leases.fail(
        shard, "w1", [FailItem(dead.iid, dead.epoch, "failed", "boom", False)]
    )
    assert res.state == "dead"
    follow(app)  # its count: a follow-up (maintenance's, within the interval)
    WorkerRegistry(broker).publish(
        Registration("w1", "h", 1, ("default",), (), 4, 2, ("m.work",)), 60_000
    )
    app.jobs.put("nightly", tenant=T1, cron="0 2 * * *", tasks={"a": Task("m.work", args=[1])})

    web = create_app(app)
    # delayed per tenant and the workers' slots come from the background totals,
    # which the first scrape starts: the second one reads them
    scrape(web)
    assert web.extensions[TOTALS].wait() is not None
    m = scrape(web)

    def v(name: str, **labels: str) -> float:
        return m[(name, tuple(sorted(labels.items())))]

    assert v("redcron_queue_ready", tenant=T1, queue="default") == 2
    assert v("redcron_queue_ready", tenant=T1, queue="bulk") == 2
    assert v("redcron_queue_ready", tenant=T2, queue="default") == 3
    assert v("redcron_tenant_in_flight", tenant=T1) == 2
    assert v("redcron_tenant_in_flight", tenant=T2) == 0
    assert v("redcron_tenant_delayed", tenant=T1) == 0
    assert v("redcron_tenant_delayed", tenant=T2) == 1
    assert v("redcron_tenant_dlq", tenant=T1) == 1
    assert v("redcron_tenant_dlq", tenant=T2) == 0
    assert v("redcron_workers_live") == 1
    assert v("redcron_queue_workers", queue="default") == 1
    assert v("redcron_queue_workers", queue="bulk") == 0
    assert v("redcron_worker_slots") == 4
    assert v("redcron_worker_running") == 2
    assert v("redcron_dead_total") == 1
    # closed breakers are not reported (only the open-breaker index is read)
    assert ("redcron_job_breaker_state", (("job", "nightly"), ("tenant", T1))) not in m
    assert v("redcron_tenants") == 2 and v("redcron_metrics_tenants_shown") == 2
    assert v("redcron_task_attempts_all_total", outcome="failed") == 1
    assert 0 <= v("redcron_queue_oldest_ready_age_seconds", tenant=T2, queue="default") < 60
    assert v("redcron_trigger_overdue_seconds", shard=str(shard)) == 0
    assert {k for k in m if k[0] == "redcron_queue_ready"} == {
        ("redcron_queue_ready", (("queue", q), ("tenant", t)))
        for t, q in ((T1, "default"), (T1, "bulk"), (T2, "default"), (T2, "bulk"))
    }

    # an open breaker reads 1; a scheduled fire 90 s overdue is 90 s of lag
    job = app.jobs.get("nightly", tenant=T1)
    client = broker.client
    # as breaker_open does: the job's state, and the open-breaker index
    client.hset(broker.keys.job(job.shard, job.id), "breaker", "open")
    client.zadd(broker.keys.attention(job.shard), {f"breaker:{job.id}": 0})
    client.zadd(broker.keys.schedule(job.shard), {job.id: broker.server_ms() - 90_000})
    m = scrape(create_app(app))
    assert v("redcron_job_breaker_state", tenant=T1, job="nightly") == 1
    assert 90 <= v("redcron_trigger_overdue_seconds", shard=str(job.shard)) < 100


def test_metrics_token_is_optional(app: App) -> None:
    web = create_app(app, metrics_token="scrape-secret")
    assert web.test_client().get("/metrics").status_code == 401
    bad = {"Authorization": "Bearer nope"}
    assert web.test_client().get("/metrics", headers=bad).status_code == 401
    assert ("redcron_workers_live", ()) in scrape(web, "scrape-secret")
    # the admin token is not the metrics token, and /metrics is not under /v1
    assert create_app(app, admin_token="adm").test_client().get("/metrics").status_code == 200


def test_each_app_has_its_own_registry(app: App) -> None:
    # two apps in one process: no duplicate-timeseries error from a shared registry
    scrape(create_app(app))
    scrape(create_app(app))


def dead_letter(app: App, tenant: str, n: int) -> None:
    """``n`` tasks of ``tenant`` leased and failed for good: its DLQ holds ``n`` more."""
    broker = app.broker
    for i in range(n):
        app.enqueue("m.work", i, _tenant=tenant)
    shard = shard_of(tenant, broker.shards)
    leases = broker.leases.lease(shard, "w1", n, 60_000, ["default"], tenants=[tenant])
    assert len(leases) == n
    items = [FailItem(x.iid, x.epoch, "failed", "boom", False) for x in leases]
    assert [r.state for r in broker.leases.fail(shard, "w1", items)] == ["dead"] * n


def test_a_quiet_deployments_dead_tasks_are_exact_on_the_first_scrape(app: App) -> None:
    # nothing ready, nothing in flight: only dead tasks. Each tenant with some
    # gets its series, so `redcron_tenant_dlq > 0` can fire
    dead_letter(app, T1, 4)
    dead_letter(app, T2, 2)
    m = scrape(create_app(app))  # the first scrape of the process
    dlq = {dict(labels)["tenant"]: v for (name, labels), v in m.items()
           if name == "redcron_tenant_dlq"}  # fmt: skip
    assert dlq == {T1: 4, T2: 2} and sum(dlq.values()) == 6
    assert m[("redcron_metrics_tenants_shown", ())] == 2
    assert m[("redcron_deployment_tasks", (("place", "dlq"),))] == 6


def test_a_scrape_serves_no_totals_from_before_an_idle_spell(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DLQ once read 1 while it held 6: the background totals counted when
    the first task died, the dashboard went unlooked-at, and the next scrape
    served that count (starting a refresh only for the one after)."""
    web = create_app(app)
    dead_letter(app, T1, 1)
    assert scrape(web)[("redcron_deployment_tasks", (("place", "dlq"),))] == 1
    dead_letter(app, T1, 5)
    snap = web.extensions[TOTALS].wait()
    assert snap is not None and snap.taken_at is not None
    snap.taken_at -= 60  # a minute without a view or a scrape
    assert scrape(web)[("redcron_deployment_tasks", (("place", "dlq"),))] == 6
    # a count that cannot finish within the scrape's wait: a snapshot from
    # before the idle spell is left out rather than shown as the current figure
    monkeypatch.setattr("redcron.dashboard.metrics.SCRAPE_WAIT_S", 0.0)
    snap = web.extensions[TOTALS].wait()
    assert snap is not None and snap.taken_at is not None
    snap.taken_at -= 600
    m = scrape(web)
    assert not any(name == "redcron_deployment_tasks" for name, _l in m)
    assert m[("redcron_tenant_dlq", (("tenant", T1),))] == 6  # per tenant: read live


def test_tenants_shown_are_those_with_something_to_show(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the cap, tenants are taken in turn from each kind of work: the
    oldest ready work does not crowd out dead tasks or tasks in flight."""
    monkeypatch.setattr("redcron.store.metrics.TOP_TENANTS", 3)
    broker = app.broker
    for t in ("r1", "r2", "r3"):  # ready work, r1's the oldest
        app.enqueue("m.work", 1, _tenant=t)
    dead_letter(app, "d1", 1)  # only a dead task
    app.enqueue("m.work", 1, _tenant="l1")  # only a task in flight
    shard = shard_of("l1", broker.shards)
    assert broker.leases.lease(shard, "w1", 1, 60_000, ["default"], tenants=["l1"])
    m = scrape(create_app(app))
    shown = {dict(labels)["tenant"] for (_n, labels) in m if "tenant" in dict(labels)}
    assert shown == {"r1", "d1", "l1"}
    assert m[("redcron_metrics_tenants_shown", ())] == 3
    assert m[("redcron_tenant_dlq", (("tenant", "d1"),))] == 1
    assert m[("redcron_tenant_in_flight", (("tenant", "l1"),))] == 1
