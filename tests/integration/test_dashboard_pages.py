"""The HTML dashboard through Flask's test client against the real Redis
fixture: logging in (token, one-time link), the session cookie, every page's
status and key content, empty states, paging, the actions, CSRF refusal on
every form, and tenant isolation on every page."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import flask
import pytest
from beats import tick_until  # tests/helpers is on sys.path
from click.testing import CliRunner
from flask.testing import FlaskClient
from followups import follow  # tests/helpers
from web_app import add_and_broken_app
from worker_procs import thread_workers, wait_for

from redcron import App
from redcron.beat.beat import Beat
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.engine.workers import Registration, WorkerRegistry
from redcron.keys import shard_of
from redcron.model.jobs import Task, job_spec
from redcron.store.logins import LoginLinks
from redcron.store.tokens import TokenStore
from redcron.worker import Worker

MINE = "acme"
FOREIGN = "globex"
ADMIN = "ui-admin-token"


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    """``ui.add`` and ``ui.broken`` (prints, then fails permanently) of MINE."""
    with add_and_broken_app(redis_url, key_prefix, "ui", MINE) as a:
        yield a


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "ui-worker") as start:
        yield start


def csrf_of(client: FlaskClient) -> str:
    with client.session_transaction() as session:
        token: str = session["csrf_token"]
    return token


def login(client: FlaskClient, token: str) -> Any:
    assert client.get("/login").status_code == 200
    return client.post("/login", data={"token": token, "csrf_token": csrf_of(client)})


def post(client: FlaskClient, path: str, **data: Any) -> Any:
    return client.post(path, data={"csrf_token": csrf_of(client), **data})


@pytest.fixture
def admin(web: flask.Flask) -> FlaskClient:
    client = web.test_client()
    assert login(client, ADMIN).status_code == 303
    return client


@pytest.fixture
def mine(web: flask.Flask, app: App) -> FlaskClient:
    _info, token = TokenStore(app.broker).create_tenant(MINE)
    client = web.test_client()
    assert login(client, token).status_code == 303
    return client


def dag_job(app: App, tenant: str, name: str = "etl") -> str:
    """A cron job a -> (b, c) -> d of registered tasks; its id."""
    spec = job_spec(
        name,
        tenant=tenant,
        cron="0 2 * * *",
        tz="Europe/Berlin",
        tasks={
            "a": Task(ref="ui.add", args=[1]),
            "b": Task(ref="ui.add", args=[2], depends_on=["a"]),
            "c": Task(ref="ui.add", args=[3], depends_on=["a"]),
            "d": Task(ref="ui.add", args=[4], depends_on=["b", "c"]),
        },
    )
    return app.jobs.put(spec).id


def text(resp: Any) -> str:
    body: str = resp.get_data(as_text=True)
    return body


# -- logging in ----------------------------------------------------------------------


def test_pages_send_a_visitor_without_a_session_to_the_login_page(web: flask.Flask) -> None:
    client = web.test_client()
    resp = client.get("/jobs?tenant=acme")
    assert resp.status_code == 303
    assert resp.headers["Location"] == "/login?next=/jobs?tenant%3Dacme"
    # a live refresh gets a 401 (app.js reloads into the login page)
    assert client.get("/jobs", headers={"X-Redcron-Live": "1"}).status_code == 401
    page = text(client.get("/login"))
    assert 'id="login-form"' in page and 'name="csrf_token"' in page and 'id="token"' in page


def test_login_with_the_admin_token_sets_an_httponly_lax_cookie(web: flask.Flask) -> None:
    client = web.test_client()
    client.get("/login")
    resp = client.post(
        "/login", data={"token": ADMIN, "csrf_token": csrf_of(client), "next": "/tenants"}
    )
    assert resp.status_code == 303 and resp.headers["Location"] == "/tenants"
    cookie = resp.headers["Set-Cookie"]
    assert cookie.startswith("redcron_session=")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert ADMIN not in cookie  # the session holds no token
    page = text(client.get("/"))
    assert "<h1>Overview</h1>" in page and 'id="nav"' in page and "admin" in page


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "/\\evil"])
def test_login_never_redirects_off_site(web: flask.Flask, target: str) -> None:
    client = web.test_client()
    client.get("/login")
    data = {"token": ADMIN, "csrf_token": csrf_of(client), "next": target}
    assert client.post("/login", data=data).headers["Location"] == "/"


def test_bad_tokens_are_refused_with_a_reason(web: flask.Flask, app: App) -> None:
    client = web.test_client()
    resp = login(client, "nope")
    assert resp.status_code == 401 and "not valid" in text(resp)
    _info, worker_token = TokenStore(app.broker).create_worker(["default"])
    resp = login(client, worker_token)
    assert resp.status_code == 401 and "worker tokens are for the worker protocol" in text(resp)
    assert client.get("/").status_code == 303


def test_login_without_the_csrf_token_is_refused(web: flask.Flask) -> None:
    client = web.test_client()
    client.get("/login")
    resp = client.post("/login", data={"token": ADMIN})
    assert resp.status_code == 400 and "CSRF" in text(resp)
    assert client.get("/").status_code == 303  # not logged in


def test_a_one_time_link_logs_in_once(web: flask.Flask, app: App) -> None:
    code = LoginLinks(app.broker).create()
    client = web.test_client()
    resp = client.get(f"/login/once/{code}")
    assert resp.status_code == 303 and resp.headers["Location"] == "/"
    assert client.get("/").status_code == 200
    again = web.test_client().get(f"/login/once/{code}")
    assert again.status_code == 401 and "already used or has expired" in text(again)
    assert web.test_client().get("/login/once/made-up").status_code == 401


def test_a_new_admin_token_ends_old_admin_sessions(app: App, admin: FlaskClient) -> None:
    assert admin.get("/").status_code == 200
    other = create_app(app, admin_token="another-admin-token")
    client = other.test_client()
    # the same cookie (same secret in Redis), but the admin token changed
    cookie = admin.get_cookie("redcron_session")
    assert cookie is not None
    client.set_cookie("redcron_session", cookie.value)
    assert client.get("/").status_code == 303


def test_revoking_a_tenant_token_ends_its_sessions(web: flask.Flask, app: App) -> None:
    tokens = TokenStore(app.broker)
    info, token = tokens.create_tenant(MINE)
    client = web.test_client()
    login(client, token)
    assert client.get("/jobs").status_code == 200
    tokens.revoke(info.id)
    assert client.get("/jobs").status_code == 303


def test_logout_ends_the_session(admin: FlaskClient) -> None:
    assert post(admin, "/logout").status_code == 303
    assert admin.get("/").status_code == 303


def test_an_unknown_path_is_a_page_for_a_browser_and_json_for_the_api(
    web: flask.Flask, admin: FlaskClient
) -> None:
    html = {"Accept": "text/html,application/xhtml+xml"}
    resp = admin.get("/no-such-page", headers=html)
    assert resp.status_code == 404 and "There is no page /no-such-page" in text(resp)
    assert 'id="nav"' in text(resp)
    # not logged in: the same page, without the menu's links
    anon = web.test_client().get("/no-such-page", headers=html)
    assert anon.status_code == 404 and 'id="nav"' not in text(anon)
    for path, headers in (("/v1/no-such-route", html), ("/no-such-page", {})):
        resp = admin.get(path, headers=headers)
        assert resp.status_code == 404 and resp.get_json()["error"]["code"] == "not_found"


def test_pages_carry_security_headers_and_static_files_are_served(admin: FlaskClient) -> None:
    resp = admin.get("/")
    assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
    assert resp.headers["X-Frame-Options"] == "DENY"
    assert resp.headers["Cache-Control"] == "no-store"
    for name in ("app.js", "style.css", "charts.css"):
        static = admin.get(f"/static/{name}")
        assert static.status_code == 200 and static.data, name
        static.close()
    # no inline script or style: the CSP forbids them
    page = text(resp)
    assert "<script>" not in page and "style=" not in page


# -- every page ---------------------------------------------------------------------------


def test_empty_states_say_what_to_do(admin: FlaskClient) -> None:
    expected = {
        "/": "No work yet",
        "/jobs": "redcron jobs apply -f jobs.yaml",
        "/runs": "No runs yet",
        "/dlq": "The DLQ is empty",
        "/tenants": "No tenants yet",
        "/workers": "No live worker",
        "/tasks": "No tasks yet",
    }
    for path, words in expected.items():
        resp = admin.get(path)
        assert resp.status_code == 200, path
        assert words in text(resp), path


def test_overview_shows_work_per_tenant_and_class_and_live_workers(
    app: App, admin: FlaskClient
) -> None:
    app.tasks["ui.add"].enqueue(1, _priority="high")
    app.tasks["ui.add"].enqueue(2)
    app.tasks["ui.add"].enqueue(3, _tenant=FOREIGN)
    WorkerRegistry(app.broker).publish(
        Registration("w-1", "box-1", 4242, ("default",), (), 8, 0, ("ui.add",), "test"),
        ttl_ms=60_000,
    )
    page = text(admin.get("/"))
    row = re.search(r'<tr data-tenant="acme">(.*?)</tr>', page, re.S)
    assert row is not None
    cells = re.findall(r'<td class="num">(\d+)</td>', row.group(1))
    assert cells[:3] == ["1", "1", "0"]  # ready high, normal, low
    assert 'data-tenant="globex"' in page
    assert "<code>w-1</code>" in page and "0 / 8" in page  # the worker's id: its one name
    assert "None: every job" in page


def test_overview_shows_trigger_lag_and_tasks_per_minute(
    app: App, admin: FlaskClient, start_worker: Callable[..., Worker]
) -> None:
    page = text(admin.get("/"))
    assert "no scheduled fires in the last hour" in page
    assert "no tasks in the last hour" in page
    app.jobs.put(job_spec("tick", tenant=MINE, every="1s", tasks={"t": Task(ref="ui.add")}))
    beat = Beat(app, name="ui-beat")
    handles = [app.tasks["ui.add"].enqueue(i) for i in range(3)]
    handles.append(app.tasks["ui.broken"].enqueue())
    start_worker()
    tick_until(beat, lambda: all(h.state in ("succeeded", "dead") for h in handles), "tasks")
    tick_until(beat, lambda: app.jobs.runs(app.jobs.job_id("tick", tenant=MINE), 1), "a fire")
    follow(app)  # the figures are follow-ups: applied within the maintenance interval
    page = text(admin.get("/"))
    card = re.search(r'<div class="card" id="trigger-lag">(.*?)</div>', page, re.S)
    assert card is not None and "trigger lag p50 / p99, last hour (" in card.group(1)
    assert "≤" in card.group(1)
    assert 'class="chart activity"' in page and "no tasks in the last hour" not in page


def test_live_refresh_answers_only_the_live_part(admin: FlaskClient) -> None:
    whole = text(admin.get("/"))
    assert '<div id="live"' in whole and "<html" in whole
    part = text(admin.get("/", headers={"X-Redcron-Live": "1"}))
    assert "<html" not in part and "<nav" not in part and "Work per tenant" in part


def test_jobs_page_says_the_schedule_in_words(app: App, admin: FlaskClient) -> None:
    job_id = dag_job(app, MINE)
    page = text(admin.get("/jobs"))
    assert f'data-job-id="{job_id}"' in page
    assert "at 02:00 every day, Europe/Berlin" in page
    assert "no runs yet" in page
    detail = text(admin.get(f"/jobs/{job_id}"))
    # the next five fires, in the job's zone and in UTC
    fires = re.search(r'<table id="next-fires">(.*?)</table>', detail, re.S)
    assert fires is not None
    assert fires.group(1).count("02:00:00 CET") == 5
    assert fires.group(1).count("01:00:00 UTC</td>") == 5
    assert 'class="inline trigger"' in detail and "No runs yet" in detail


def test_a_chained_jobs_schedule_says_after_which_jobs_it_runs(
    app: App, admin: FlaskClient
) -> None:
    task = {"t": Task(ref="ui.add")}
    app.jobs.put(job_spec("nightly-report", tenant=MINE, cron="0 2 * * *", tasks=task))
    send = app.jobs.put(job_spec("send", tenant=MINE, tasks=task, depends_on=["nightly-report"]))
    digest = app.jobs.put(job_spec("digest", tenant=MINE, cron="0 3 * * *", tasks=task,
                                   depends_on=["nightly-report"]))  # fmt: skip
    page = text(admin.get("/jobs"))

    def cell(job_id: str) -> str:
        row = re.search(rf'<tr data-job-id="{job_id}">(.*?)</tr>', page, re.S)
        assert row is not None
        return re.sub(r"<[^>]+>", "", re.findall(r"<td>(.*?)</td>", row.group(1), re.S)[1])

    # started by its upstream's success: not "manual only (trigger it) after ..."
    assert cell(send.id) == "after nightly-report (chained) waiting for nightly-report"
    assert cell(digest.id) == (
        "at 03:00 every day, after nightly-report (chained) waiting for nightly-report"
    )
    assert "manual only" not in page
    detail = text(admin.get(f"/jobs/{send.id}"))
    assert '<dd id="schedule-words">after nightly-report (chained)</dd>' in detail


def test_trigger_pause_and_resume_from_the_job_page(app: App, admin: FlaskClient) -> None:
    job_id = dag_job(app, MINE)
    resp = post(admin, f"/jobs/{job_id}/trigger")
    assert resp.status_code == 303
    run_id = resp.headers["Location"].removeprefix("/runs/")
    assert app.jobs.run(run_id).job_id == job_id
    assert post(admin, f"/jobs/{job_id}/pause").status_code == 303
    assert app.jobs.get_by_id(job_id).paused
    page = text(admin.get(f"/jobs/{job_id}"))
    assert "paused" in page and "Resume" in page
    post(admin, f"/jobs/{job_id}/resume")
    assert not app.jobs.get_by_id(job_id).paused


def test_run_page_draws_the_dag_and_shows_attempts_and_logs(
    app: App, admin: FlaskClient, start_worker: Callable[..., Worker]
) -> None:
    job_id = dag_job(app, MINE)
    run_id = app.jobs.trigger("etl", tenant=MINE)
    page = text(admin.get(f"/runs/{run_id}"))
    assert page.count('<g class="node state-') == 4
    assert re.search(r'data-task="a" data-state="ready"', page)
    assert re.search(r'data-task="d" data-state="pending"', page)
    worker = start_worker()
    wait_for(lambda: app.jobs.run(run_id).state == "succeeded", 20)
    page = text(admin.get(f"/runs/{run_id}?task=b"))
    assert page.count('data-state="succeeded"') >= 4
    assert 'id="task"' in page and "Log of attempt 1" in page
    assert f"<td>{worker.id}</td>" in page  # the attempt's worker
    assert f"/jobs/{job_id}" in page
    history = text(admin.get(f"/jobs/{job_id}"))
    assert f'data-run-id="{run_id}"' in history and 'class="chart durations"' in history


def test_cancel_a_run_and_retry_a_task_from_the_run_page(
    app: App, admin: FlaskClient, start_worker: Callable[..., Worker]
) -> None:
    dag_job(app, MINE)
    run_id = app.jobs.trigger("etl", tenant=MINE)
    assert post(admin, f"/runs/{run_id}/tasks/d/cancel").status_code == 303
    start_worker()
    wait_for(lambda: app.jobs.run(run_id).state not in ("queued", "running"), 20)
    assert app.broker.inspection.task_info(f"{run_id}/d").state == "cancelled"
    resp = post(admin, f"/runs/{run_id}/tasks/d/retry")
    assert resp.status_code == 303 and resp.headers["Location"].endswith("task=d#task")
    wait_for(lambda: app.broker.inspection.task_info(f"{run_id}/d").state == "succeeded", 20)
    # an ended run cannot be cancelled: 409 with the reason
    resp = post(admin, f"/runs/{run_id}/cancel")
    assert resp.status_code == 409 and "already ended" in text(resp)


def test_dlq_page_replays_one_selected_or_all_and_discards(
    app: App, admin: FlaskClient, start_worker: Callable[..., Worker]
) -> None:
    handles = [app.tasks["ui.broken"].enqueue() for _ in range(4)]
    start_worker()
    wait_for(lambda: all(h.state == "dead" for h in handles), 20)
    page = text(admin.get("/dlq?tenant=acme&name=ui.broken"))
    assert page.count('class="dlq-entry"') == 4
    assert "cannot work" in page and "about to fail" in page  # error and log tail

    resp = post(admin, "/dlq/replay", one=handles[0].id, tenant=MINE)
    assert resp.status_code == 303 and resp.headers["Location"] == "/dlq?tenant=acme"
    flashed = text(admin.get("/dlq?tenant=acme"))
    assert "replayed 1 task " in flashed
    resp = admin.post(
        "/dlq/discard", data={"csrf_token": csrf_of(admin), "ids": [h.id for h in handles[1:3]]}
    )
    assert resp.status_code == 303
    assert handles[1].state == "cancelled" and handles[2].state == "cancelled"
    wait_for(lambda: handles[0].state == "dead", 20)  # replayed, failed again
    post(admin, "/dlq/replay", all="1", tenant=MINE, name="ui.broken")
    page = text(admin.get("/dlq?tenant=acme"))
    assert "replayed 2 tasks" in page
    post(admin, "/dlq/replay")
    assert "nothing selected" in text(admin.get("/dlq"))


def test_tenants_pages_and_the_settings_form(app: App, admin: FlaskClient) -> None:
    app.tenants.set(MINE, weight=3, max_in_flight=5)
    page = text(admin.get("/tenants"))
    assert 'data-tenant="acme"' in page
    detail = text(admin.get(f"/tenants/{MINE}"))
    assert 'id="tenant-settings"' in detail and 'value="3.0"' in detail
    resp = post(admin, f"/tenants/{MINE}", weight="4", rate="10/s", max_in_flight="")
    assert resp.status_code == 303
    settings = app.tenants.get(MINE)
    assert (settings.weight, settings.rate, settings.max_in_flight) == (4.0, 10.0, 5)
    bad = post(admin, f"/tenants/{MINE}", max_in_flight="lots")
    assert bad.status_code == 400 and "max_in_flight" in text(bad)
    assert app.tenants.get(MINE).max_in_flight == 5
    # the grant of command tasks: a yes/no choice, shown on the list
    assert 'name="allow_commands"' in detail
    assert post(admin, f"/tenants/{MINE}", allow_commands="1").status_code == 303
    assert app.tenants.get(MINE).allow_commands is True
    assert "granted" in text(admin.get("/tenants"))
    assert post(admin, f"/tenants/{MINE}", allow_commands="0").status_code == 303
    assert app.tenants.get(MINE).allow_commands is False
    bad = post(admin, f"/tenants/{MINE}", allow_commands="maybe")
    assert bad.status_code == 400 and "allow_commands" in text(bad)


def test_workers_page_lists_what_each_worker_runs(
    app: App, admin: FlaskClient, start_worker: Callable[..., Worker]
) -> None:
    @app.task(name="ui.slow", tenant=MINE)
    def slow() -> None:
        time.sleep(3)

    handle = slow.enqueue()
    worker = start_worker()
    wait_for(lambda: handle.state == "running", 20)

    def row() -> str:
        page = text(admin.get("/workers"))
        found = re.search(rf'<tr data-worker-id="{re.escape(worker.id)}">(.*?)</tr>', page, re.S)
        return found.group(1) if found else ""

    # the worker publishes what it holds when that changes (at most every 5 s)
    wait_for(lambda: f'/tasks/{handle.id}"' in row(), 30)
    assert "ui.slow" in row()


def test_workers_page_lists_the_registry(app: App, admin: FlaskClient) -> None:
    WorkerRegistry(app.broker).publish(
        Registration("w-9", "host-9", 99, ("default", "io"), (), 4, 1, ("ui.add",), "0.1.0"),
        ttl_ms=60_000,
    )
    page = text(admin.get("/workers"))
    assert 'data-worker-id="w-9"' in page and "host-9" in page and "default, io" in page


def test_a_worker_has_one_name_on_every_page_and_in_the_cli(
    app: App, admin: FlaskClient, redis_url: str
) -> None:
    """The worker id (``host:pid:suffix``, or ``--name``) names a worker on the
    overview, the Workers page, a task's attempts and ``redcron workers list``:
    never ``host:pid`` on one and host and pid apart on another."""
    wid = "box-1:4242:AB12CD"
    WorkerRegistry(app.broker).publish(
        Registration(wid, "box-1", 4242, ("default",), (), 8, 0, ("ui.add",), "test"),
        ttl_ms=60_000,
    )
    handle = app.tasks["ui.add"].enqueue(1)
    shard = shard_of(MINE, app.broker.shards)
    assert app.broker.leases.lease(shard, wid, 1, 60_000, ["default"], tenants=[MINE])
    cli = CliRunner().invoke(
        main, ["workers", "list", "--redis", redis_url], env={"REDCRON_PREFIX": app.settings.prefix}
    )
    assert cli.exit_code == 0, cli.output
    shown = {
        "overview": text(admin.get("/")),
        "workers page": text(admin.get("/workers")),
        "task page": text(admin.get(f"/tasks/{handle.id}")),
        "redcron workers list": cli.output,
    }
    for where, out in shown.items():
        assert re.search(rf"(?<![\w:]){re.escape(wid)}(?![\w:])", out), where
        # host and pid only ever as part of the id
        assert not re.search(r"box-1:4242(?!:AB12CD)", out), where
    # shown in a cell of its own, not only in the row's attribute
    assert f'<tr data-worker-id="{wid}"><td><code>{wid}</code></td>' in shown["overview"]
    assert f"<td><code>{wid}</code></td>" in shown["workers page"]


def test_workers_page_and_api_group_the_processes_of_a_supervisor(
    app: App, web: flask.Flask, admin: FlaskClient
) -> None:
    registry = WorkerRegistry(app.broker)
    for wid, sup in (("s:1:AB.1", "s:1:AB"), ("s:1:AB.2", "s:1:AB"), ("solo", "")):
        registry.publish(
            Registration(wid, "h", 1, ("default",), (), 4, 0, ("ui.add",), supervisor=sup),
            ttl_ms=60_000,
        )
    page = text(admin.get("/workers"))
    assert page.count('<tr class="group" data-supervisor="s:1:AB">') == 1
    head = page.index('data-supervisor="s:1:AB"><th')
    assert head < page.index('data-worker-id="s:1:AB.1"') < page.index('data-worker-id="s:1:AB.2"')
    api = web.test_client()
    resp = api.get("/v1/workers", headers={"Authorization": f"Bearer {ADMIN}"})
    rows = resp.get_json()["workers"]
    assert [(w["id"], w["supervisor"]) for w in rows] == [
        ("s:1:AB.1", "s:1:AB"), ("s:1:AB.2", "s:1:AB"), ("solo", ""),
    ]  # fmt: skip


def test_tasks_search_by_id_name_and_state(app: App, admin: FlaskClient) -> None:
    handle = app.tasks["ui.add"].enqueue(5)
    app.tasks["ui.broken"].enqueue()
    resp = admin.get("/tasks", query_string={"id": handle.id})
    assert resp.status_code == 303 and resp.headers["Location"] == f"/tasks/{handle.id}"
    detail = text(admin.get(f"/tasks/{handle.id}"))
    assert handle.id in detail and "Not attempted yet" in detail
    page = text(admin.get("/tasks?name=ui.add&state=ready"))
    assert f'data-task-id="{handle.id}"' in page and "ui.broken" not in page
    assert admin.get("/tasks?state=nonsense").status_code == 400
    assert admin.get("/tasks?id=no-such-task").status_code == 404
    assert post(admin, f"/tasks/{handle.id}/cancel").status_code == 303
    assert handle.state == "cancelled"


def test_lists_are_paginated(app: App, admin: FlaskClient) -> None:
    specs = [
        job_spec(f"job-{i:02d}", tenant=MINE, every="1h", tasks={"t": Task(ref="ui.add")})
        for i in range(55)
    ]
    app.jobs.put_many(specs)
    first = text(admin.get("/jobs"))
    assert first.count("data-job-id=") == 50 and "1\u201350 of 55" in first
    # keyed, not counted: the next page starts after the last job shown
    nxt = re.search(r'rel="next" href="([^"]+)"', first)
    assert nxt is not None and "after=" in nxt.group(1) and 'rel="prev"' not in first
    second = text(admin.get(html.unescape(nxt.group(1))))
    assert second.count("data-job-id=") == 5 and "51\u201355 of 55" in second
    assert 'rel="next"' not in second
    prev = re.search(r'rel="prev" href="([^"]+)"', second)
    assert prev is not None and "before=" in prev.group(1)
    back = text(admin.get(html.unescape(prev.group(1))))
    assert back.count("data-job-id=") == 50 and "1\u201350 of 55" in back
    ids = set(re.findall(r'data-job-id="([^"]+)"', first))
    assert ids == set(re.findall(r'data-job-id="([^"]+)"', back))
    assert not ids & set(re.findall(r'data-job-id="([^"]+)"', second))


# -- safety ---------------------------------------------------------------------------------


def _forms(page: str) -> list[str]:
    return re.findall(r'<form[^>]*method="post"[^>]*action="([^"]+)"', page)


def test_every_form_carries_a_csrf_token_and_is_refused_without_it(
    app: App, admin: FlaskClient, web: flask.Flask
) -> None:
    job_id = dag_job(app, MINE)
    run_id = app.jobs.trigger("etl", tenant=MINE)
    handle = app.tasks["ui.add"].enqueue(1)
    pages = ["/", f"/jobs/{job_id}", f"/runs/{run_id}?task=a", f"/tenants/{MINE}",
             f"/tasks/{handle.id}", "/dlq", "/channels"]  # fmt: skip
    seen: set[str] = set()
    for path in pages:
        page = text(admin.get(path))
        forms = re.findall(r'<form[^>]*method="post".*?</form>', page, re.S)
        for form in forms:
            assert 'name="csrf_token"' in form, (path, form)
        seen.update(_forms(page))
    assert {f"/jobs/{job_id}/trigger", f"/jobs/{job_id}/pause", f"/runs/{run_id}/cancel",
            f"/runs/{run_id}/tasks/a/cancel", f"/tenants/{MINE}", "/logout"} <= seen  # fmt: skip
    posts = [r.rule for r in web.url_map.iter_rules()
             if "POST" in (r.methods or ()) and not r.rule.startswith("/v1/")]  # fmt: skip
    values = {"job_id": job_id, "run_id": run_id, "name": "a", "tenant": MINE,
              "task_id": handle.id, "channel_id": "0123456789ab"}  # fmt: skip
    for rule in posts:
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", lambda m: values[m.group(1)], rule)
        for data in ({}, {"csrf_token": "forged"}):
            resp = admin.post(path, data={**data, "one": handle.id, "ids": handle.id})
            assert resp.status_code == 400, (rule, data)
    # and nothing happened
    assert not app.jobs.get_by_id(job_id).paused
    assert app.jobs.run(run_id).state == "queued"
    assert handle.state == "ready"
    assert admin.get("/").status_code == 200  # still logged in


def _ui_get_routes(web: flask.Flask) -> list[str]:
    return [
        r.rule
        for r in web.url_map.iter_rules()
        if "GET" in (r.methods or ())
        and r.endpoint.startswith("ui.")
        and r.endpoint not in ("ui.static",)
        and not r.rule.startswith("/login")
    ]


def test_a_tenant_sees_only_its_tenant_on_every_page(
    app: App, web: flask.Flask, admin: FlaskClient, mine: FlaskClient
) -> None:
    own_job = dag_job(app, MINE, "own-job")
    foreign_job = dag_job(app, FOREIGN, "secret-job")
    foreign_run = app.jobs.trigger("secret-job", tenant=FOREIGN)
    foreign_task = app.tasks["ui.add"].enqueue(7, _tenant=FOREIGN)
    app.tasks["ui.add"].enqueue(8)
    foreign = {"job_id": foreign_job, "run_id": foreign_run, "task_id": foreign_task.id,
               "tenant": FOREIGN}  # fmt: skip
    secrets = [foreign_job, foreign_run, foreign_task.id, "secret-job", FOREIGN]
    walked = 0
    for rule in _ui_get_routes(web):
        if "<" in rule:
            path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", lambda m: foreign[m.group(1)], rule)
            resp = mine.get(path)
            assert resp.status_code == 404, (rule, text(resp))
        else:
            for query in ({}, {"tenant": FOREIGN}):
                resp = mine.get(rule, query_string=query)
                assert resp.status_code == 200, (rule, query)
                shown = text(resp).replace(f'value="{FOREIGN}"', "")
                assert not any(s in shown for s in secrets), (rule, query)
        walked += 1
    assert walked >= 10
    assert "own-job" in text(mine.get("/jobs")) and own_job
    # the tenant's own pages work, and admin sees both tenants
    assert 'data-tenant="acme"' in text(mine.get("/"))
    assert "secret-job" in text(admin.get("/jobs"))
    # actions on another tenant's records are 404 and change nothing
    for path in (f"/jobs/{foreign_job}/pause", f"/jobs/{foreign_job}/trigger",
                 f"/runs/{foreign_run}/cancel", f"/tasks/{foreign_task.id}/cancel"):  # fmt: skip
        assert post(mine, path).status_code == 404, path
    post(mine, "/dlq/replay", one=foreign_task.id)
    post(mine, "/dlq/discard", all="1", tenant=FOREIGN)
    assert not app.jobs.get_by_id(foreign_job).paused
    assert app.jobs.run(foreign_run).state == "queued"
    assert foreign_task.state == "ready"
    # settings are the admin's to change
    resp = post(mine, f"/tenants/{MINE}", weight="50")
    assert resp.status_code == 403 and app.tenants.get(MINE).weight == 1
    assert 'id="tenant-settings"' not in text(mine.get(f"/tenants/{MINE}"))
