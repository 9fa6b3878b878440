"""Issue 18 §4: every list the faces serve is paged over an index (a cursor walk
returns every item once, a tenant token never sees another tenant's items on
any page) and /metrics keeps per-tenant series bounded however many tenants
there are.  Timing is the benchmark's (``redcron bench faces``), never asserted."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import flask
import pytest
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from redcron import App
from redcron.dashboard import create_app
from redcron.dashboard.totals import EXTENSION as TOTALS
from redcron.engine import ensure_indexes
from redcron.keys import LAYOUT, shard_of
from redcron.model.jobs import JobSpec, Task
from redcron.store import activity, count_tenants, page_runs, trigger_lag
from redcron.store.tokens import TokenStore

ADMIN = "faces-admin"
TENANTS = [f"t{i:02d}" for i in range(12)]


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    # four shards: every page merges several indexes
    a = App(redis_url, prefix=key_prefix.rstrip(":"), shards=4)

    @a.task(name="f.noop", retries=0)
    def noop() -> None:
        return None

    yield a
    a.close()


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def bearer(web: flask.Flask, token: str) -> FlaskClient:
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


def populate(app: App, jobs_per_tenant: int = 3) -> list[str]:
    """Jobs for every tenant (never due), a queued task each, and one manual run
    per job; the run ids."""
    specs = [
        JobSpec(name=f"j{k}", tenant=t, cron="0 0 1 1 *", tasks={"a": Task("f.noop")})
        for t in TENANTS
        for k in range(jobs_per_tenant)
    ]
    app.jobs.put_many(specs)
    for t in TENANTS:
        app.tasks["f.noop"].enqueue_many([()], _tenant=t)
    return [app.jobs.trigger(s.name, tenant=s.tenant) for s in specs]


def walk(client: FlaskClient, path: str, key: str, **query: Any) -> list[list[dict[str, Any]]]:
    """Every page of a list, following next_cursor; the pages."""
    pages = []
    cursor = None
    for _ in range(1000):
        args = dict(query, **({"cursor": cursor} if cursor else {}))
        resp = client.get(path, query_string=args)
        assert resp.status_code == 200, resp.get_data(as_text=True)
        body = resp.get_json()
        pages.append(body[key])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
    raise AssertionError("the cursor walk did not end")


def test_job_cursor_walk_returns_every_job_once_in_order(app: App, web: flask.Flask) -> None:
    populate(app)
    admin = bearer(web, ADMIN)
    pages = walk(admin, "/v1/jobs", "jobs", limit=5)
    seen = [(j["tenant"], j["name"]) for page in pages for j in page]
    assert len(pages) == 8 and all(len(p) == 5 for p in pages[:-1])
    assert seen == sorted((t, f"j{k}") for t in TENANTS for k in range(3))
    # no cursor: the first page of the default size, and where the next starts
    first = admin.get("/v1/jobs").get_json()
    assert len(first["jobs"]) == 36 and first["next_cursor"] is None
    small = admin.get("/v1/jobs", query_string={"limit": 2}).get_json()
    assert len(small["jobs"]) == 2 and small["next_cursor"]
    # one tenant's jobs, paged
    mine = walk(admin, "/v1/jobs", "jobs", tenant="t03", limit=2)
    assert [j["name"] for p in mine for j in p] == ["j0", "j1", "j2"]


def test_run_cursor_walk_returns_every_run_once_newest_first(app: App, web: flask.Flask) -> None:
    run_ids = populate(app)
    admin = bearer(web, ADMIN)
    pages = walk(admin, "/v1/runs", "runs", limit=7)
    seen = [r["id"] for page in pages for r in page]
    assert sorted(seen) == sorted(run_ids) and len(seen) == len(set(seen))
    created = [r["created_at"] for page in pages for r in page]
    assert created == sorted(created, reverse=True)
    # a state filter may come back in short pages, never repeat or miss a run
    queued = walk(admin, "/v1/runs", "runs", limit=4, state="queued")
    assert sorted(r["id"] for p in queued for r in p) == sorted(run_ids)
    assert walk(admin, "/v1/runs", "runs", state="succeeded") == [[]]


def test_tenant_token_sees_only_its_own_items_on_every_page(app: App, web: flask.Flask) -> None:
    populate(app)
    _info, secret = TokenStore(app.broker).create_tenant("t05")
    mine = bearer(web, secret)
    jobs = walk(mine, "/v1/jobs", "jobs", limit=1)
    assert [j["tenant"] for p in jobs for j in p] == ["t05"] * 3
    runs = walk(mine, "/v1/runs", "runs", limit=1)
    assert [r["tenant"] for p in runs for r in p] == ["t05"] * 3
    # another tenant's name, or a cursor taken from the admin's walk, shows nothing of it
    assert mine.get("/v1/jobs", query_string={"tenant": "t06"}).get_json()["jobs"] == []
    assert mine.get("/v1/runs", query_string={"tenant": "t06"}).get_json()["runs"] == []
    admin_cursor = bearer(web, ADMIN).get("/v1/jobs", query_string={"limit": 1}).get_json()
    after = mine.get("/v1/jobs", query_string={"cursor": admin_cursor["next_cursor"]})
    assert {j["tenant"] for j in after.get_json()["jobs"]} <= {"t05"}
    # a cursor this API never made is a 400 naming the field
    bad = mine.get("/v1/jobs", query_string={"cursor": "bm9wZQ"})
    assert bad.status_code == 400 and bad.get_json()["error"]["field"] == "cursor"


def login(web: flask.Flask, token: str) -> FlaskClient:
    client = web.test_client()
    client.get("/login")
    with client.session_transaction() as session:
        csrf = session["csrf_token"]
    assert client.post("/login", data={"token": token, "csrf_token": csrf}).status_code == 303
    return client


def page_walk(client: FlaskClient, path: str, row: str) -> list[str]:
    """Every row id of a paged HTML list, following its next links."""
    seen: list[str] = []
    url: str | None = path
    while url is not None:
        page = client.get(url).get_data(as_text=True)
        seen += re.findall(rf'{row}="([^"]+)"', page)
        found = re.search(r'rel="next" href="([^"]+)"', page)
        url = html.unescape(found.group(1)) if found else None
    return seen


def test_pages_walk_every_tenant_once(app: App, web: flask.Flask, monkeypatch: Any) -> None:
    monkeypatch.setattr("redcron.dashboard.ui.render.PER_PAGE", 5)
    populate(app, jobs_per_tenant=1)
    admin = login(web, ADMIN)
    assert page_walk(admin, "/tenants", "data-tenant") == TENANTS
    assert page_walk(admin, "/", "data-tenant") == TENANTS
    assert len(set(page_walk(admin, "/jobs", "data-job-id"))) == len(TENANTS)
    # a tenant's session: its own row, whatever the cursor
    _info, secret = TokenStore(app.broker).create_tenant("t07")
    mine = login(web, secret)
    assert page_walk(mine, "/tenants", "data-tenant") == ["t07"]
    assert page_walk(mine, "/?after=t00", "data-tenant") == []
    assert page_walk(mine, "/", "data-tenant") == ["t07"]


def test_indexes_are_backfilled_for_a_deployment_older_than_them(app: App) -> None:
    run_ids = populate(app, jobs_per_tenant=1)
    ensure_indexes(app.broker)  # this Broker has checked: it will not again
    client, keys = app.broker.client, app.broker.keys
    for shard in range(app.broker.shards):
        tenants = client.zrange(keys.tenants(shard), 0, -1)
        # the older layout's jobs: a name -> id HASH per tenant, no job index
        for member in client.zrange(keys.jobidx(shard), 0, -1):
            t, name, job_id = member.decode().split(" ")
            client.hset(f"{keys.retired(shard, 'jobs')}:{t}", name, job_id)
        client.delete(keys.tenants(shard), keys.jobidx(shard), keys.runidx(shard))
        client.delete(keys.maintenance(shard), *[keys.truns(shard, t) for t in TENANTS])
        # the older layout: tenants a SET, paged through a second ZSET (on some
        # shards only, as before that ZSET existed)
        if tenants:
            client.sadd(keys.tenants(shard), *tenants)
        if shard % 2:
            client.zadd(keys.retired(shard, "tenantidx"), dict.fromkeys(tenants, 0))
    client.hdel(keys.meta(), "layout")
    ensure_indexes(app.broker)  # nothing done
    assert client.zcard(keys.jobidx(shard_of("t00", app.broker.shards))) == 0
    # a process of this release starts: the upgrade, then the backfill at its first read
    app.broker.listing_indexed = False
    app.broker.ensure_meta()
    for shard in range(app.broker.shards):
        assert client.type(keys.tenants(shard)) in (b"zset", b"none")
        assert not client.exists(keys.retired(shard, "tenantidx"))
    assert int(client.hget(keys.meta(), "layout") or 0) == LAYOUT
    runs, _ = page_runs(app.broker, None, None, 100)
    assert sorted(r.id for r in runs) == sorted(run_ids)
    assert sum(client.zcard(keys.jobidx(s)) for s in range(app.broker.shards)) == len(TENANTS)
    assert count_tenants(app.broker) == len(TENANTS)


def series(web: flask.Flask, query: str = "") -> list[tuple[str, dict[str, str]]]:
    text = web.test_client().get(f"/metrics{query}").get_data(as_text=True)
    return [(s.name, s.labels) for f in text_string_to_metric_families(text) for s in f.samples]


def test_metrics_series_do_not_grow_with_tenants_beyond_the_bound(
    app: App, web: flask.Flask, monkeypatch: Any
) -> None:
    monkeypatch.setattr("redcron.store.metrics.TOP_TENANTS", 3)
    populate(app, jobs_per_tenant=1)
    series(web)  # the first scrape starts the deployment totals in the background
    assert web.extensions[TOTALS].wait() is not None
    few = series(web)
    assert ("redcron_deployment_tasks", {"place": "ready"}) in few
    shown = {labels["tenant"] for _n, labels in few if "tenant" in labels}
    assert len(shown) == 3, sorted({n for n, labels in few if "tenant" in labels})
    # three times the tenants: the same number of series
    for i in range(24):
        app.tasks["f.noop"].enqueue_many([()], _tenant=f"more{i:02d}")
    many = series(web)
    assert len(many) == len(few)
    assert len({labels["tenant"] for _n, labels in many if "tenant" in labels}) == 3
    gauge = dict((n, 0.0) for n, _l in many)  # the family names are all there
    assert "redcron_tenants" in gauge and "redcron_metrics_tenants_shown" in gauge
    # a tenant asked for by name gets its series besides the busiest
    asked = series(web, "?tenant=more17")
    assert any(labels.get("tenant") == "more17" for _n, labels in asked)
    assert web.test_client().get("/metrics?tenant=a%20b").status_code == 400


def test_lease_keeps_the_minutes_dispatch_total(app: App) -> None:
    """The Tenants page reads a page's shares with one HMGET: the lease script
    keeps each minute's total in field ``dispatched:*`` beside the tenants' counts."""
    for t in ("t00", "t01"):
        app.tasks["f.noop"].enqueue_many([(), (), ()], _tenant=t)
    client, keys = app.broker.client, app.broker.keys
    minute = app.broker.server_ms() // 60_000
    leased = 0
    for shard in {shard_of(t, app.broker.shards) for t in ("t00", "t01")}:
        leased += len(app.broker.leases.lease(shard, "w1", 4, 30_000, ["default"]))
    assert leased == 6
    per_tenant = total = 0
    for shard in range(app.broker.shards):
        for m in (minute, minute + 1):  # the lease may have crossed a minute
            raw = client.hgetall(keys.minute(shard, m))
            got = {
                k.decode().removeprefix("dispatched:"): int(v)
                for k, v in raw.items()
                if k.startswith(b"dispatched:")
            }
            total += got.pop("*", 0)
            per_tenant += sum(got.values())
    assert total == per_tenant == 6
    shares = {s.tenant: s.dispatched_last_minute for s in app.tenants.rows(["t00", "t01"])}
    assert shares == {"t00": 3, "t01": 3}


def test_overview_figures_read_the_sums_over_tenants(app: App) -> None:
    """activity() and trigger_lag() of every tenant read the ``*|`` fields the
    scripts keep, not the tenants' fields beside them."""
    client, keys = app.broker.client, app.broker.keys
    now = app.broker.server_ms()
    minute = now // 60_000
    client.hset(keys.minute(0, minute), mapping={
        "attempts:a|succeeded": 2, "attempts:b|succeeded": 3,
        "attempts:*|succeeded": 5, "attempts:*|failed": 0,
        "lag:a|0.05": 1, "lag:*|0.05": 1, "dispatched:a": 9, "dispatched:*": 9,
    })  # fmt: skip
    # a tenant's field without the sum is not read (the scripts write both)
    client.hset(keys.minute(1, minute - 1), mapping={
        "attempts:c|succeeded": 4, "attempts:*|succeeded": 4, "attempts:*|failed": 1,
        "lag:c|0.05": 2, "lag:*|0.05": 2, "lag:d|0.05": 7,
    })  # fmt: skip
    minutes = activity(app.broker, None, 2, now)
    assert [(m.succeeded, m.failed) for m in minutes] == [(4, 1), (5, 0)]
    assert trigger_lag(app.broker, None, 2, now).fires == 3
