"""GET /metrics' attempt- and run-duration histograms, per tenant and task (job)
name: recorded by the scripts where attempts and runs end (``lua/lib/durations.lua``),
timed on the clock the scripts are given (``now`` passed in: no sleeping), with at
most DURATION_NAMES names per tenant (the rest count as ``(other)``)."""

from __future__ import annotations

from collections.abc import Iterator

import flask
import pytest
from followups import follow  # tests/helpers
from prometheus_client.parser import text_string_to_metric_families

from redcron import App
from redcron.dashboard import create_app
from redcron.dashboard.metrics import CONTENT_TYPE
from redcron.engine.argv import FailItem
from redcron.keys import DURATION_BUCKETS_S, DURATION_NAMES, DURATION_OTHER, shard_of
from redcron.model.jobs import Task
from redcron.store.metrics import read_metrics

T1, T2 = "alpha", "beta"
T0 = 1_900_000_000_000  # a server time for the scripts (ms)


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    for i in range(DURATION_NAMES + 2):

        @a.task(name=f"d.t{i:02d}", tenant=T1, retries=1)
        def work() -> None:
            return None

    yield a
    a.close()


def scrape(web: flask.Flask) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Per-tenant series are of the busiest tenants and those named: name both."""
    resp = web.test_client().get(f"/metrics?tenant={T1}&tenant={T2}")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert (
        resp.headers["Content-Type"] == CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
    )
    out = {}
    for family in text_string_to_metric_families(resp.get_data(as_text=True)):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def run_one(app: App, name: str, took_ms: int, *, fail: bool = False, tenant: str = T1) -> None:
    """Enqueue ``name``, lease it at T0, mark it started 10 ms later, end it
    ``took_ms`` after that."""
    handle = app.enqueue(name, _tenant=tenant)
    shard = shard_of(tenant, app.broker.shards)
    (lease,) = app.broker.leases.lease(shard, "w", 1, 60_000, ["default"], now=T0)
    assert lease.iid == handle.id
    app.broker.leases.start(shard, "w", [(lease.iid, lease.epoch)], now=T0 + 10)
    end = T0 + 10 + took_ms
    if fail:
        item = FailItem(lease.iid, lease.epoch, "failed", "boom", False)
        app.broker.leases.fail(shard, "w", [item], now=end)
    else:
        assert app.broker.leases.complete(shard, "w", [(lease.iid, lease.epoch, b"")], now=end)
    follow(app)  # timed in a follow-up: maintenance's, within the interval


def test_attempt_durations_per_task_name(app: App) -> None:
    run_one(app, "d.t00", 40)  # <= 0.1 s
    run_one(app, "d.t00", 1_500)  # <= 2.5 s
    run_one(app, "d.t01", 7_200_000, fail=True)  # 2 h: +Inf
    run_one(app, "d.t00", 3, tenant=T2)

    m = scrape(create_app(app))

    def v(name: str, **labels: str) -> float:
        return m[(name, tuple(sorted(labels.items())))]

    fam = "redcron_task_attempt_duration_seconds"
    assert v(f"{fam}_count", tenant=T1, task="d.t00") == 2
    assert v(f"{fam}_sum", tenant=T1, task="d.t00") == pytest.approx(1.54)
    assert v(f"{fam}_bucket", tenant=T1, task="d.t00", le="0.025") == 0
    assert v(f"{fam}_bucket", tenant=T1, task="d.t00", le="0.1") == 1
    assert v(f"{fam}_bucket", tenant=T1, task="d.t00", le="1") == 1
    assert v(f"{fam}_bucket", tenant=T1, task="d.t00", le="2.5") == 2
    assert v(f"{fam}_bucket", tenant=T1, task="d.t00", le="+Inf") == 2
    # a failed attempt is timed too; past the last bound it is in +Inf alone
    assert v(f"{fam}_bucket", tenant=T1, task="d.t01", le="3600") == 0
    assert v(f"{fam}_bucket", tenant=T1, task="d.t01", le="+Inf") == 1
    assert v(f"{fam}_sum", tenant=T1, task="d.t01") == 7200
    assert v(f"{fam}_count", tenant=T2, task="d.t00") == 1
    # every bound, and +Inf, for each (tenant, task)
    les = {dict(k[1])["le"] for k in m if k[0] == f"{fam}_bucket"}
    assert len(les) == len(DURATION_BUCKETS_S) + 1


def test_run_durations_per_job_name(app: App) -> None:
    app.jobs.put("nightly", tenant=T1, cron="0 2 * * *", tasks={"a": Task("d.t00")})
    run_id = app.jobs.trigger("nightly", tenant=T1, now=T0 - 5_000)
    assert run_id
    shard = shard_of(T1, app.broker.shards)
    (lease,) = app.broker.leases.lease(shard, "w", 1, 60_000, ["default"], now=T0)
    assert app.broker.leases.complete(shard, "w", [(lease.iid, lease.epoch, b"")], now=T0 + 20_000)
    follow(app)

    m = scrape(create_app(app))
    fam = "redcron_run_duration_seconds"
    key = (("job", "nightly"), ("tenant", T1))
    # from its start (the first lease), not its creation
    assert m[(f"{fam}_sum", key)] == 20
    assert m[(f"{fam}_bucket", (*key[:1], ("le", "10"), key[1]))] == 0
    assert m[(f"{fam}_bucket", (*key[:1], ("le", "30"), key[1]))] == 1


def test_a_tenants_task_names_are_capped_the_rest_counted_as_other(app: App) -> None:
    names = [f"d.t{i:02d}" for i in range(DURATION_NAMES + 2)]
    shard = shard_of(T1, app.broker.shards)
    for name in names:
        app.enqueue(name)
    leases = app.broker.leases.lease(shard, "w", len(names), 60_000, ["default"], now=T0)
    assert len(leases) == len(names)
    # one batch: the cap holds within a call as across calls
    done = app.broker.leases.complete(
        shard, "w", [(x.iid, x.epoch, b"") for x in leases], now=T0 + 50
    )
    assert all(done)
    follow(app)
    got = read_metrics(app.broker, [T1]).attempt_durations
    # which names of one batch come first is the script's to choose: find one left out
    left_out = sorted(set(names) - {task for _tenant, task in got})
    assert len(left_out) == 2
    run_one(app, left_out[0], 50)  # a later call: still (other)

    got = read_metrics(app.broker, [T1]).attempt_durations
    tasks = {task for tenant, task in got if tenant == T1}
    assert len(tasks) == DURATION_NAMES + 1
    assert DURATION_OTHER in tasks
    assert got[(T1, DURATION_OTHER)].count == 3  # the 2 past the cap, and the later one
    assert sum(h.count for h in got.values()) == len(names) + 1
    # the hash holds no more names than that: Redis memory is bounded as well
    fields = app.broker.client.hkeys(app.broker.keys.durations(shard, T1))
    tasks_held = {
        f.decode().rpartition("|")[0] for f in fields if f.startswith(b"task:") and b"|" in f
    }
    assert len(tasks_held) == DURATION_NAMES + 1
    assert (
        app.broker.client.hget(app.broker.keys.durations(shard, T1), "task:#names")
        == str(DURATION_NAMES).encode()
    )
