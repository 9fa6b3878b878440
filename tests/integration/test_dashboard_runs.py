"""The Runs page (``/runs``) through Flask's test client against the real Redis
fixture: runs of every job newest first, the tenant, job, state and late
filters, keyed pages, a 400 naming the field of a bad filter, the same runs as
``GET /v1/runs``, and a tenant token that never lists another tenant's runs."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import flask
import pytest
from flask.testing import FlaskClient

from redcron import App
from redcron.beat.beat import Beat
from redcron.dashboard import create_app
from redcron.model.jobs import Task
from redcron.store.tokens import TokenStore

MINE = "acme"
FOREIGN = "globex"
ADMIN = "runs-admin-token"
TASKS = {"a": Task("t")}


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    yield a
    a.close()


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def login(web: flask.Flask, token: str) -> FlaskClient:
    client = web.test_client()
    assert client.get("/login").status_code == 200
    with client.session_transaction() as session:
        csrf = session["csrf_token"]
    assert client.post("/login", data={"token": token, "csrf_token": csrf}).status_code == 303
    return client


def text(resp: Any) -> str:
    body: str = resp.get_data(as_text=True)
    return body


def run_ids(page: str) -> list[str]:
    return re.findall(r'<tr data-run-id="([^"]+)"', page)


def api_ids(web: flask.Flask, token: str, **query: str) -> list[str]:
    resp = web.test_client().get(
        "/v1/runs", query_string=query, headers={"Authorization": f"Bearer {token}"}
    )
    assert resp.status_code == 200, text(resp)
    return [r["id"] for r in resp.get_json()["runs"]]


def workload(app: App) -> dict[str, str]:
    """Runs of three jobs of two tenants: a late one, a cancelled one and queued
    ones; name -> run id."""
    jobs = app.jobs
    jobs.put(
        "nightly", tasks=TASKS, tenant=MINE, deadline_s=60, overlap="allow", allow_unregistered=True
    )
    jobs.put("hourly", tasks=TASKS, tenant=MINE, overlap="allow", allow_unregistered=True)
    jobs.put("secret-job", tasks=TASKS, tenant=FOREIGN, overlap="allow", allow_unregistered=True)
    # triggered twice its deadline ago: late at the beat's next sweep
    late = jobs.trigger("nightly", tenant=MINE, now=app.broker.server_ms() - 120_000)
    runs = {
        "late": late,
        "nightly": jobs.trigger("nightly", tenant=MINE),
        "hourly": jobs.trigger("hourly", tenant=MINE),
        "cancelled": jobs.trigger("hourly", tenant=MINE),
        "foreign": jobs.trigger("secret-job", tenant=FOREIGN),
    }
    jobs.cancel_run(runs["cancelled"])
    beat = Beat(app, name="runs-beat", apply_declared=False)
    beat.tick()
    beat.close()
    assert jobs.run(late).late and not jobs.run(runs["nightly"]).late
    return runs


def test_the_runs_page_lists_every_jobs_runs_and_filters_them(app: App, web: flask.Flask) -> None:
    runs = workload(app)
    admin = login(web, ADMIN)
    page = text(admin.get("/runs"))
    assert '<a href="/runs"' in page  # in the nav
    shown = run_ids(page)
    assert set(shown) == set(runs.values())
    # newest first, as GET /v1/runs lists them: the page uses the same listing
    assert shown == api_ids(web, ADMIN)
    created = {rid: app.jobs.run(rid).created_at for rid in shown}
    assert shown == sorted(shown, key=lambda rid: (created[rid], rid), reverse=True)

    def ids(**query: str) -> set[str]:
        resp = admin.get("/runs", query_string=query)
        assert resp.status_code == 200, text(resp)
        return set(run_ids(text(resp)))

    mine = {runs[n] for n in ("late", "nightly", "hourly", "cancelled")}
    assert ids(tenant=MINE) == mine
    assert ids(tenant=MINE, job="hourly") == {runs["hourly"], runs["cancelled"]}
    assert ids(state="cancelled") == {runs["cancelled"]}
    assert ids(late="true") == {runs["late"]}
    assert ids(late="false") == set(runs.values()) - {runs["late"]}
    assert ids(tenant=MINE, job="nightly", state="queued", late="true") == {runs["late"]}
    assert admin.get("/runs", query_string={"tenant": FOREIGN, "job": "nightly"}).status_code == 400
    assert set(api_ids(web, ADMIN, late="true")) == {runs["late"]}
    assert set(api_ids(web, ADMIN, late="false", state="queued")) == {
        runs["nightly"], runs["hourly"], runs["foreign"],
    }  # fmt: skip
    # a late run says so; each row links its run and its job
    row = re.search(rf'<tr data-run-id="{re.escape(runs["late"])}".*?</tr>', page, re.S)
    assert row is not None and 'class="badge state-late"' in row.group(0)
    assert f'href="/runs/{runs["late"]}"' in row.group(0)
    assert f'href="/jobs/{app.jobs.job_id("nightly", tenant=MINE)}"' in row.group(0)
    assert "No run matches this filter" in text(admin.get("/runs?state=failed"))
    # a job's page links to its runs, filtered
    job_page = text(admin.get(f"/jobs/{app.jobs.job_id('nightly', tenant=MINE)}"))
    assert 'href="/runs?tenant=acme&amp;job=nightly"' in job_page


def test_a_bad_filter_is_a_400_naming_its_field(app: App, web: flask.Flask) -> None:
    workload(app)
    admin = login(web, ADMIN)
    for query, field in (
        ("state=nope", "state"),
        ("late=maybe", "late"),
        ("tenant=a%20b", "tenant"),
        ("job=nightly", "job"),  # which tenant's?
        ("tenant=acme&job=no-such-job", "job"),
        ("tenant=acme&job=a%20b", "job"),
        ("after=garbage", "after"),
        ("after=12%20a%20b", "after"),
    ):
        resp = admin.get(f"/runs?{query}")
        assert resp.status_code == 400, query
        assert f"{field}: " in html.unescape(text(resp)), (query, text(resp))
    for query, field in (("late=maybe", "late"), ("state=nope", "state")):
        resp = web.test_client().get(
            f"/v1/runs?{query}", headers={"Authorization": f"Bearer {ADMIN}"}
        )
        assert resp.status_code == 400 and resp.get_json()["error"]["field"] == field


def test_the_runs_page_pages_with_a_cursor(
    app: App, web: flask.Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = workload(app)
    monkeypatch.setattr("redcron.dashboard.ui.render.PER_PAGE", 2)
    admin = login(web, ADMIN)

    def walk(path: str) -> list[list[str]]:
        pages = []
        while True:
            page = text(admin.get(path))
            pages.append(run_ids(page))
            nxt = re.search(r'rel="next" href="([^"]+)"', page)
            if nxt is None:
                return pages
            assert "after=" in nxt.group(1)
            path = html.unescape(nxt.group(1))

    pages = walk("/runs")
    assert [len(p) for p in pages] == [2, 2, 1]
    # every run once, in the order of the whole list
    assert [rid for p in pages for rid in p] == api_ids(web, ADMIN)
    assert sorted(rid for p in pages for rid in p) == sorted(runs.values())
    # a filter keeps to its pages' cursor too
    mine = [rid for p in walk(f"/runs?tenant={MINE}&state=queued") for rid in p]
    assert sorted(mine) == sorted([runs["late"], runs["nightly"], runs["hourly"]])


def test_a_tenant_token_never_lists_another_tenants_runs(
    app: App, web: flask.Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = workload(app)
    more = [app.jobs.trigger("secret-job", tenant=FOREIGN) for _ in range(3)]
    foreign = {runs["foreign"], *more}
    secrets = [*foreign, "secret-job", app.jobs.job_id("secret-job", tenant=FOREIGN)]
    _info, token = TokenStore(app.broker).create_tenant(MINE)
    mine = login(web, token)
    own = {runs[n] for n in ("late", "nightly", "hourly", "cancelled")}

    def page_of(**query: str) -> str:
        resp = mine.get("/runs", query_string=query)
        assert resp.status_code == 200, (query, text(resp))
        return text(resp)

    assert set(run_ids(page_of())) == own
    # asking for the other tenant, its job, its late runs: nothing of it
    for query in (
        {"tenant": FOREIGN},
        {"tenant": FOREIGN, "job": "secret-job"},
        {"tenant": FOREIGN, "late": "false"},
        {"tenant": FOREIGN, "state": "queued"},
    ):
        # what the form echoes back is the asker's own text, not a finding
        shown = page_of(**query).replace(f'value="{FOREIGN}"', "").replace('value="secret-job"', "")
        assert run_ids(shown) == [] and not any(s in shown for s in secrets), query
    # its job name is looked up in the token's own tenant only
    resp = mine.get("/runs", query_string={"job": "secret-job"})
    assert resp.status_code == 400 and "tenant acme has no job" in html.unescape(text(resp))
    # a cursor made from another tenant's run pages on in its own tenant's runs
    newest = app.jobs.run(more[-1])
    assert newest.created_at is not None
    cursor = f"{int(newest.created_at.timestamp() * 1000) + 1} {more[-1]}"
    assert set(run_ids(page_of(after=cursor))) <= own
    # every page of the walk: its own runs only
    monkeypatch.setattr("redcron.dashboard.ui.render.PER_PAGE", 1)
    path, seen = "/runs", []
    while path:
        page = text(mine.get(path))
        seen += run_ids(page)
        nxt = re.search(r'rel="next" href="([^"]+)"', page)
        path = html.unescape(nxt.group(1)) if nxt else ""
    assert sorted(seen) == sorted(own)
    # the API with the same token: the same refusal
    assert set(api_ids(web, token)) == own
    assert api_ids(web, token, tenant=FOREIGN) == []
    assert api_ids(web, token, tenant=FOREIGN, late="false") == []
    resp = web.test_client().get(
        "/v1/runs",
        query_string={"job": app.jobs.job_id("secret-job", tenant=FOREIGN)},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert resp.status_code == 404
    # the admin sees both tenants
    assert foreign <= set(api_ids(web, ADMIN))
