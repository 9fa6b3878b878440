"""How attempts, runs and scheduled fires went, as the scripts record them and
``store/stats.py`` and ``/metrics`` read them back: a known workload on two
shards, driven through the broker with explicit ``now`` values, gives exactly
the counts, per-minute activity and lag quantiles it should."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from followups import follow  # tests/helpers
from prometheus_client.parser import text_string_to_metric_families

from redcron import App
from redcron.dashboard import create_app
from redcron.engine import Broker, FailItem, Lease
from redcron.engine.argv import FireArgs
from redcron.keys import ACTIVITY_TTL_S, shard_of
from redcron.model import LagSummary, MinuteActivity
from redcron.model.jobs import Task
from redcron.schedule.timeutil import from_ms
from redcron.store.stats import activity, trigger_lag, trigger_lag_by_tenant

T1, T2 = "alpha", "beta"  # shards 0 and 1 of 2
W = "w1"
T = 1_800_000_000_000  # attempts happen in the minutes from here (a minute boundary)
M = 60_000
DAY = 86_400_000


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), shards=2)
    assert (shard_of(T1, 2), shard_of(T2, 2)) == (0, 1)

    @a.task(name="s.ok", retries=0)
    def ok() -> None: ...

    @a.task(name="s.bad", retries=1)
    def bad() -> None: ...

    @a.task(name="s.flaky", retries=2)
    def flaky() -> None: ...

    yield a
    a.close()


def lease(b: Broker, tenant: str, now: int, n: int = 50, queue: str = "default") -> list[Lease]:
    return b.leases.lease(shard_of(tenant, b.shards), W, n, 1_000, [queue], now=now)


def by_name(leases: list[Lease]) -> dict[str, list[Lease]]:
    out: dict[str, list[Lease]] = {}
    for x in leases:
        out.setdefault(x.name, []).append(x)
    return out


def complete(b: Broker, tenant: str, leases: list[Lease], now: int) -> None:
    items = [(x.iid, x.epoch, b"\xc0") for x in leases]
    assert b.leases.complete(shard_of(tenant, b.shards), W, items, now=now) == [True] * len(leases)
    follow(b)  # counted and timed in a follow-up: maintenance's, within the interval


def fail(
    b: Broker, tenant: str, x: Lease, now: int, outcome: str = "failed", retry: bool = True
) -> str:
    item = FailItem(x.iid, x.epoch, outcome, "boom", retry, 0 if retry else None)
    [res] = b.leases.fail(shard_of(tenant, b.shards), W, [item], now=now)
    follow(b)
    return str(res.state)


def attempts_workload(app: App) -> None:
    """alpha: 3 succeed; 2 fail twice (out of retries, dead); 1 times out, is handed
    back, is lost (reaped), then cancelled.  beta: 1 succeeds, 1 fails for good."""
    b = app.broker
    for _ in range(3):
        app.tasks["s.ok"].enqueue(_tenant=T1)
    for _ in range(2):
        app.tasks["s.bad"].enqueue(_tenant=T1)
    app.tasks["s.flaky"].enqueue(_tenant=T1)
    app.tasks["s.ok"].enqueue(_tenant=T2)
    app.tasks["s.bad"].enqueue(_tenant=T2, _retries=0)

    # minute 0: 3 succeed, 2 fail, 1 times out (retried at once)
    now = T + 1_000
    got = by_name(lease(b, T1, now))
    complete(b, T1, got["s.ok"], now)
    assert [fail(b, T1, x, now) for x in got["s.bad"]] == ["ready", "ready"]
    assert fail(b, T1, got["s.flaky"][0], now, "timed_out") == "ready"

    # minute 1: the 2 fail again (dead); flaky is handed back; beta: 1 + 1
    now = T + M + 1_000
    got = by_name(lease(b, T1, now))
    assert [fail(b, T1, x, now) for x in got["s.bad"]] == ["dead", "dead"]
    assert b.leases.release(0, W, [(got["s.flaky"][0].iid, got["s.flaky"][0].epoch)], now=now) == 1
    got = by_name(lease(b, T2, now))
    complete(b, T2, got["s.ok"], now)
    assert fail(b, T2, got["s.bad"][0], now, retry=False) == "dead"

    # minute 2: flaky's lease expires and the reaper ends it 'lost' (retried at once)
    now = T + 2 * M + 1_000
    [x] = lease(b, T1, now)
    assert b.maintenance.reap(0, now=now + 5_000, jitter=0.0)[0] == 1
    # minute 3: cancelled (counted, but neither a success nor a failure)
    now = T + 3 * M + 1_000
    [x] = lease(b, T1, now)
    assert fail(b, T1, x, now, "cancelled", retry=False) == "cancelled"


def jobs_workload(app: App) -> int:
    """A job of alpha fired from its schedule 30 ms, 4 s, 400 s and 10 ms late (the
    last while the third run is still going: recorded as a skipped run); its first
    run fails, its second succeeds; a manual run is no fire.  Returns the first
    fire's due time."""
    b = app.broker
    job = app.jobs.put(
        "nightly",
        tenant=T1,
        cron="* * * * *",
        tasks={"a": Task("s.ok", queue="jobs")},
        now=datetime.fromtimestamp((T + DAY - 30_000) / 1000, tz=UTC),
    )
    sched = b.keys.schedule(job.shard)
    s = int(b.client.zscore(sched, job.id) or 0)
    assert s == T + DAY

    def fire(k: int, late_ms: int) -> str:
        due = s + k * M
        assert int(b.client.zscore(sched, job.id) or 0) == due
        args = FireArgs(job.id, due, "", due, due + M, due + M, "", "cron", 0, f"{job.id}@{due}")
        return b.beat.fire_one(job.shard, args, now=due + late_ms)[0]

    assert fire(0, 30) == "created"
    [x] = lease(b, T1, s + 1_000, queue="jobs")
    assert fail(b, T1, x, s + 1_000, retry=False) == "dead"  # run 1 failed
    assert fire(1, 4_000) == "created"
    [x] = lease(b, T1, s + M + 5_000, queue="jobs")
    complete(b, T1, [x], s + M + 5_000)  # run 2 succeeded
    assert fire(2, 400_000) == "created"  # run 3 goes on
    assert fire(3, 10) == "skipped"
    app.jobs.trigger("nightly", tenant=T1, now=s + 4 * M)  # manual: not a scheduled fire
    return s


def scrape(app: App, query: str = "") -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    follow(app)  # every end's follow-ups applied, as maintenance has by a scrape
    resp = create_app(app).test_client().get(f"/metrics{query}")
    assert resp.status_code == 200
    out = {}
    for family in text_string_to_metric_families(resp.get_data(as_text=True)):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_outcomes_activity_and_lag_match_a_known_workload(app: App) -> None:
    attempts_workload(app)
    s = jobs_workload(app)
    b = app.broker

    # -- /metrics: lifetime counters and the histogram ----------------------------
    # both tenants named: per-tenant series are written for the busiest tenants
    # (oldest ready work: here none is ready) and those a scrape names
    m = scrape(app, f"?tenant={T1}&tenant={T2}")

    def v(name: str, **labels: str) -> float:
        return m[(name, tuple(sorted(labels.items())))]

    attempts = {
        (T1, "succeeded"): 4,  # 3 tasks + the job's second run
        (T1, "failed"): 5,  # 2 tasks x 2 attempts + the job's first run
        (T1, "timed_out"): 1,
        (T1, "lost"): 2,  # handed back at shutdown, reaped
        (T1, "cancelled"): 1,
        (T2, "succeeded"): 1,
        (T2, "failed"): 1,
    }
    got = {
        (dict(labels)["tenant"], dict(labels)["outcome"]): n
        for (name, labels), n in m.items()
        if name == "redcron_task_attempts_total"
    }
    assert got == attempts
    summed: dict[str, int] = {}
    for (_t, outcome), n in attempts.items():
        summed[outcome] = summed.get(outcome, 0) + n
    assert {
        dict(labels)["outcome"]: n
        for (name, labels), n in m.items()
        if name == "redcron_task_attempts_all_total"
    } == summed
    runs = {
        (dict(labels)["tenant"], dict(labels)["state"]): n
        for (name, labels), n in m.items()
        if name == "redcron_runs_total"
    }
    assert runs == {(T1, "failed"): 1, (T1, "succeeded"): 1, (T1, "skipped"): 1}

    buckets = {
        dict(labels)["le"]: n
        for (name, labels), n in m.items()
        if name == "redcron_trigger_lag_seconds_bucket"
    }
    assert buckets["0.01"] == 1  # 10 ms
    assert buckets["0.025"] == 1
    assert buckets["0.05"] == 2  # 30 ms
    assert buckets["2.5"] == 2
    assert buckets["5"] == 3  # 4 s
    assert buckets["300"] == 3
    assert buckets["+Inf"] == 4 == v("redcron_trigger_lag_seconds_count")  # 400 s
    assert v("redcron_trigger_lag_seconds_sum") == pytest.approx(404.04)
    assert v("redcron_fires_total") == 5  # the manual run counts there, not in the histogram
    assert ("redcron_trigger_overdue_seconds", (("shard", "0"),)) in m

    # -- the dashboard's last hour: activity ---------------------------------------
    def minute(k: int) -> datetime:
        return from_ms(T + k * M)

    now = T + 3 * M + 30_000
    assert activity(b, None, 5, now_ms=now) == [
        MinuteActivity(minute(-1), 0, 0),
        MinuteActivity(minute(0), 3, 3),
        MinuteActivity(minute(1), 1, 3),  # the hand-back is no failure
        MinuteActivity(minute(2), 0, 1),
        MinuteActivity(minute(3), 0, 0),  # cancelled: neither
    ]
    assert [(a.succeeded, a.failed) for a in activity(b, T1, 5, now_ms=now)] == [
        (0, 0),
        (3, 3),
        (0, 2),
        (0, 1),
        (0, 0),
    ]
    assert [(a.succeeded, a.failed) for a in activity(b, T2, 3, now_ms=now)] == [
        (1, 1),
        (0, 0),
        (0, 0),
    ]
    hour = activity(b, None, now_ms=now)
    assert len(hour) == 60 and hour[-1].minute == minute(3)
    assert sum(a.succeeded for a in hour) == 4 and sum(a.failed for a in hour) == 7
    # a day later the window holds the job's attempts only
    later = activity(b, T1, 60, now_ms=s + 10 * M)
    assert sum(a.succeeded for a in later) == 1 and sum(a.failed for a in later) == 1

    # -- the dashboard's last hour: trigger lag ------------------------------------
    assert trigger_lag(b, T1, 60, now_ms=s + 3 * M + 10) == LagSummary(
        minutes=60, fires=3, p50_s=0.05, p99_s=5, max_bucket_s=5, beyond_last_bucket=0
    )
    # the 400 s fire was recorded 400 s after its due time, minutes later
    hour_lag = trigger_lag(b, None, 60, now_ms=s + 2 * M + 400_000)
    assert hour_lag == LagSummary(
        minutes=60, fires=4, p50_s=0.05, p99_s=300, max_bucket_s=300, beyond_last_bucket=1
    )
    assert trigger_lag(b, T1, 1, now_ms=s + M + 4_000).p50_s == 5
    assert trigger_lag(b, T2, 60, now_ms=s + 10 * M) == LagSummary(60, 0, None, None, None, 0)
    assert trigger_lag(b, T1, 60, now_ms=T).fires == 0  # a day earlier: nothing
    assert trigger_lag_by_tenant(b, 60, now_ms=s + 2 * M + 400_000) == {T1: hour_lag}
    assert trigger_lag_by_tenant(b, 60, now_ms=T) == {}


def test_minute_hashes_expire_and_lifetime_ones_do_not(app: App) -> None:
    b = app.broker
    app.tasks["s.ok"].enqueue(_tenant=T1)
    now = b.server_ms()
    [x] = lease(b, T1, now)
    complete(b, T1, [x], now)
    minute = now // M
    assert 0 < b.client.ttl(b.keys.minute(0, minute)) <= ACTIVITY_TTL_S
    assert b.client.ttl(b.keys.counters(0)) == -1
    assert [a.succeeded for a in activity(b, T1, 1, now_ms=now)] == [1]
