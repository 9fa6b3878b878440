"""Token roles and the action record (issue 21 §5), on the real Redis fixture:
a viewer token (admin or tenant) gets 403 on every route that changes state
(walked from the URL map) and sees no action button on any page; a token
without a role is an operator; every state-changing request is recorded with
its outcome; a tenant never reads another tenant's actions; no entry holds a
token's secret; the streams are trimmed."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import flask
import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from web_app import add_and_broken_app  # tests/helpers
from worker_procs import thread_workers, wait_for

from redcron import App
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.dashboard.api.actions import NAMES
from redcron.errors import ValidationError
from redcron.keys import shard_of
from redcron.model.jobs import Task, job_spec
from redcron.store import ActionLog, Actor, record_action
from redcron.store.tokens import TokenStore
from redcron.worker import Worker

ADMIN = "roles-admin-token"
MINE, FOREIGN = "acme", "globex"
READS = {"GET", "HEAD", "OPTIONS"}
#: the one page POST a viewer may send: ending its own session
SESSION_POSTS = {"/login", "/logout"}


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    with add_and_broken_app(redis_url, key_prefix, "roles", MINE) as a:
        yield a


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


@pytest.fixture
def tokens(app: App) -> TokenStore:
    return TokenStore(app.broker)


def api(web: flask.Flask, token: str) -> FlaskClient:
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


def csrf_of(client: FlaskClient) -> str:
    with client.session_transaction() as session:
        token: str = session["csrf_token"]
    return token


def page_login(web: flask.Flask, token: str) -> FlaskClient:
    client = web.test_client()
    assert client.get("/login").status_code == 200
    resp = client.post("/login", data={"token": token, "csrf_token": csrf_of(client)})
    assert resp.status_code == 303, resp.get_data(as_text=True)
    return client


def post(client: FlaskClient, path: str, **data: Any) -> Any:
    return client.post(path, data={"csrf_token": csrf_of(client), **data})


#: a queue no worker of these tests serves: its tasks stay live (cancel buttons shown)
IDLE = "idle"


def job_of(app: App, tenant: str, name: str = "nightly") -> str:
    spec = job_spec(name, tenant=tenant, cron="0 2 * * *",
                    tasks={"work": Task(ref="roles.add", args=[1], queue=IDLE)})  # fmt: skip
    return app.jobs.put(spec).id


def objects(app: App, tenant: str) -> dict[str, str]:
    """A job, a run, a run task and a one-off task of ``tenant``: every path parameter."""
    job_id = job_of(app, tenant)
    run_id = app.jobs.trigger("nightly", tenant=tenant)
    task = app.tasks["roles.add"].enqueue(1, _tenant=tenant, _queue=IDLE)
    # a channel id and a token id that name none: a viewer is refused before any
    # route runs
    return {"job_id": job_id, "run_id": run_id, "name": "work", "task_id": task.id,
            "tenant": tenant, "channel_id": "c-none", "token_id": "0" * 12}  # fmt: skip


def fill(rule: str, values: dict[str, str]) -> str:
    return re.sub(r"<(?:[^:>]+:)?([^>]+)>", lambda m: values[m.group(1)], rule)


def mutating_api_routes(web: flask.Flask) -> list[tuple[str, str]]:
    return [
        (method, rule.rule)
        for rule in web.url_map.iter_rules()
        if rule.rule.startswith("/v1/")
        for method in sorted((rule.methods or set()) - READS)
    ]


def everything(app: App) -> list[dict[str, str]]:
    """Every field of every entry of every action stream under the test's prefix."""
    client = app.broker.client
    out = []
    for key in client.scan_iter(match=f"{app.broker.keys.prefix}:*actions*"):
        for _eid, raw in client.xrange(key):
            out.append({k.decode(): v.decode() for k, v in raw.items()})
    return out


# -- viewers: 403 on every route that changes state ------------------------------------


@pytest.mark.parametrize("kind", ["admin", "tenant"])
def test_a_viewer_gets_403_on_every_mutating_route_and_changes_nothing(
    app: App, web: flask.Flask, tokens: TokenStore, kind: str
) -> None:
    own = objects(app, MINE)
    info, token = (
        tokens.create_admin("viewer") if kind == "admin" else tokens.create_tenant(MINE, "viewer")
    )
    viewer = api(web, token)
    before = (app.jobs.get_by_id(own["job_id"]), app.jobs.run(own["run_id"]).state)
    routes = mutating_api_routes(web)
    assert len(routes) >= 17  # every POST/PUT/DELETE of /v1, worker protocol included
    for method, rule in routes:
        resp = viewer.open(fill(rule, own), method=method, json={})
        assert resp.status_code == 403, (method, rule, resp.get_data(as_text=True))
        error = resp.get_json()["error"]
        assert error["code"] == "forbidden", (method, rule)
        # a tenant token is refused the worker protocol whatever its role
        if not (kind == "tenant" and rule.startswith("/v1/worker/")):
            assert "viewer" in error["message"], (method, rule)
    # it changed nothing, and reads still work
    assert (app.jobs.get_by_id(own["job_id"]), app.jobs.run(own["run_id"]).state) == before
    assert app.tenants.show(MINE).settings.weight == 1
    for path in ("/v1/jobs", f"/v1/jobs/{own['job_id']}", f"/v1/runs/{own['run_id']}",
                 f"/v1/tenants/{MINE}", f"/v1/tenants/{MINE}/dlq", "/v1/audit"):  # fmt: skip
        assert viewer.get(path).status_code == 200, path
    # each refusal is on the record, as refused, under the viewer's token id
    refused = [a for a in ActionLog(app.broker).page(limit=500).actions if a.who == info.id]
    assert {a.outcome for a in refused} == {"refused"}
    assert {a.status for a in refused} == {403} and {a.role for a in refused} == {"viewer"}
    api_refusals = [r for r in routes if not r[1].startswith("/v1/worker/")]
    assert len(refused) == len(api_refusals)  # the worker protocol is not people's actions


def test_every_mutating_route_has_an_action_name(web: flask.Flask) -> None:
    """A new state-changing route (API or page) fails here until NAMES calls it something."""
    for rule in web.url_map.iter_rules():
        unsafe = (rule.methods or set()) - READS
        if not unsafe or rule.rule.startswith("/v1/worker/") or rule.rule in SESSION_POSTS:
            continue
        assert rule.endpoint in NAMES, f"{sorted(unsafe)} {rule.rule}: name it in NAMES"


def test_a_token_stored_without_a_role_is_an_operator(
    app: App, web: flask.Flask, tokens: TokenStore
) -> None:
    info, token = tokens.create_tenant(MINE)
    app.broker.client.hdel(app.broker.keys.token(info.id), "role")  # as before roles existed
    assert tokens.get(info.id).role == "operator"
    job_id = job_of(app, MINE)
    resp = api(web, token).post(f"/v1/jobs/{job_id}/pause")
    assert resp.status_code == 200 and app.jobs.get_by_id(job_id).paused
    # an operator admin token may do what the admin token does
    _info, admin_op = tokens.create_admin("operator")
    assert api(web, admin_op).put(f"/v1/tenants/{FOREIGN}", json={"weight": 3}).status_code == 200
    # a garbled role reads as a viewer, never as more
    app.broker.client.hset(app.broker.keys.token(info.id), "role", "root")
    assert api(web, token).post(f"/v1/jobs/{job_id}/resume").status_code == 403


# -- viewers on the pages -------------------------------------------------------------------


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "roles-worker") as start:
        yield start


def _post_forms(page: str) -> list[str]:
    return re.findall(r'<form[^>]*method="post"[^>]*action="([^"]*)"', page)


@pytest.mark.parametrize("kind", ["admin", "tenant"])
def test_a_viewer_sees_no_action_button_and_its_posts_are_refused(
    app: App,
    web: flask.Flask,
    tokens: TokenStore,
    start_worker: Callable[..., Worker],
    kind: str,
) -> None:
    dead = app.tasks["roles.broken"].enqueue()
    start_worker()
    wait_for(lambda: dead.state == "dead", 20)
    own = objects(app, MINE)
    _info, token = (
        tokens.create_admin("viewer") if kind == "admin" else tokens.create_tenant(MINE, "viewer")
    )
    viewer = page_login(web, token)
    operator = page_login(web, tokens.create_tenant(MINE)[1])
    pages = [f"/jobs/{own['job_id']}", f"/runs/{own['run_id']}?task=work",
             f"/tasks/{own['task_id']}", f"/tasks/{dead.id}", f"/tenants/{MINE}",
             f"/dlq?tenant={MINE}", "/", "/jobs", "/audit", "/channels"]  # fmt: skip
    for path in pages:
        page = viewer.get(path).get_data(as_text=True)
        assert _post_forms(page) == ["/logout"], (path, _post_forms(page))
        assert "Replay" not in page and 'name="ids"' not in page, path
    # the same pages give an operator its buttons (the test would pass on a blank page)
    seen = {a for path in pages for a in _post_forms(operator.get(path).get_data(as_text=True))}
    assert {f"/jobs/{own['job_id']}/pause", f"/runs/{own['run_id']}/cancel",
            f"/tasks/{own['task_id']}/cancel", "/dlq/replay"} <= seen  # fmt: skip
    assert 'name="ids"' in operator.get(f"/dlq?tenant={MINE}").get_data(as_text=True)
    # a viewer's POSTs (with a valid CSRF token) are refused and change nothing
    posts = [r.rule for r in web.url_map.iter_rules()
             if "POST" in (r.methods or ()) and not r.rule.startswith("/v1/")
             and r.rule not in SESSION_POSTS]  # fmt: skip
    assert len(posts) >= 9
    for rule in posts:
        resp = post(viewer, fill(rule, own), one=dead.id, ids=dead.id, weight="5")
        assert resp.status_code == 403, (rule, resp.get_data(as_text=True))
        assert "viewer" in resp.get_data(as_text=True)
    assert not app.jobs.get_by_id(own["job_id"]).paused
    assert app.jobs.run(own["run_id"]).state == "queued" and dead.state == "dead"
    assert app.tenants.show(MINE).settings.weight == 1
    assert "(viewer: read only)" in viewer.get("/").get_data(as_text=True)
    assert post(viewer, "/logout").status_code == 303  # its own session it may end


# -- the record ------------------------------------------------------------------------------


def test_actions_are_recorded_with_who_what_ids_and_outcome(
    app: App, web: flask.Flask, tokens: TokenStore
) -> None:
    info, token = tokens.create_tenant(MINE)
    mine = api(web, token)
    job_id = job_of(app, MINE)
    assert mine.post(f"/v1/jobs/{job_id}/pause").status_code == 200
    run_id = mine.post(f"/v1/jobs/{job_id}/trigger").get_json()["run_id"]
    assert mine.put(f"/v1/tenants/{MINE}", json={"weight": 9}).status_code == 403
    assert mine.post(f"/v1/runs/{run_id}/tasks/nope/cancel").status_code == 404
    admin = api(web, ADMIN)
    assert admin.put(f"/v1/tenants/{MINE}", json={"weight": 2}).status_code == 200
    pages = page_login(web, ADMIN)
    assert post(pages, f"/jobs/{job_id}/resume").status_code == 303

    found = ActionLog(app.broker).page(MINE).actions  # newest first
    seen = [(a.who, a.via, a.action, a.ids, a.outcome, a.status) for a in reversed(found)]
    assert seen == [
        (info.id, "api", "job.pause", (job_id,), "ok", 200),
        (info.id, "api", "job.trigger", (job_id, run_id), "ok", 201),
        (info.id, "api", "tenant.settings", (), "refused", 403),
        (info.id, "api", "task.cancel", (f"{run_id}/nope",), "error", 404),
        ("admin", "api", "tenant.settings", (), "ok", 200),
        ("admin", "page", "job.resume", (job_id,), "ok", 303),
    ]
    assert found[1].detail == "weight=2"
    assert "admin token" in found[3].detail  # why it was refused
    assert all(a.tenant == MINE and a.at.year >= 2024 for a in found)
    # the admin's stream holds them too, and the web API pages through it
    listed = admin.get("/v1/audit", query_string={"limit": 4}).get_json()
    assert [a["id"] for a in listed["actions"]] == [a.id for a in found[:4]]
    rest = admin.get("/v1/audit", query_string={"cursor": listed["next_cursor"]}).get_json()
    assert [a["id"] for a in rest["actions"]] == [a.id for a in found[4:]]
    assert rest["next_cursor"] is None
    assert admin.get("/v1/audit", query_string={"cursor": "bm9wZQ"}).status_code == 400


def test_an_enqueue_is_recorded_only_when_refused(
    app: App, web: flask.Flask, tokens: TokenStore
) -> None:
    """Submitting work is the data plane: a producer's thousands of enqueues would
    push people's actions out of the bounded streams."""
    operator = api(web, tokens.create_tenant(MINE)[1])
    viewer_info, viewer = tokens.create_tenant(MINE, "viewer")
    for _ in range(3):
        assert (
            operator.post("/v1/tasks", json={"name": "roles.add", "args": [1]}).status_code == 201
        )
    assert api(web, viewer).post("/v1/tasks", json={"name": "roles.add"}).status_code == 403
    found = ActionLog(app.broker).page(MINE).actions
    assert [(a.who, a.action, a.outcome) for a in found] == [
        (viewer_info.id, "task.enqueue", "refused")
    ]


def test_a_tenant_never_reads_another_tenants_actions(
    app: App, web: flask.Flask, tokens: TokenStore, start_worker: Callable[..., Worker]
) -> None:
    foreign_job = job_of(app, FOREIGN, "secret-job")
    own_job = job_of(app, MINE)
    admin = api(web, ADMIN)
    foreign_run = admin.post(f"/v1/jobs/{foreign_job}/trigger").get_json()["run_id"]
    admin.post(f"/v1/jobs/{foreign_job}/pause")
    mine_token = tokens.create_tenant(MINE)[1]
    api(web, mine_token).post(f"/v1/jobs/{own_job}/pause")
    # one click of the admin on dead tasks of both tenants: each tenant's stream gets
    # its own ids only
    dead = [app.tasks["roles.broken"].enqueue(_tenant=t) for t in (MINE, FOREIGN)]
    start_worker()
    wait_for(lambda: all(d.state == "dead" for d in dead), 20)
    pages = page_login(web, ADMIN)
    assert post(pages, "/dlq/replay", ids=[d.id for d in dead]).status_code == 303

    secrets = [foreign_job, foreign_run, dead[1].id, FOREIGN]
    mine = api(web, mine_token)
    own = mine.get("/v1/audit").get_json()["actions"]
    assert {a["tenant"] for a in own} == {MINE} and len(own) == 2
    assert mine.get("/v1/audit", query_string={"tenant": FOREIGN}).get_json()["actions"] == []
    assert not any(s in str(own) for s in secrets)
    for query in ({}, {"tenant": FOREIGN}):
        shown = page_login(web, mine_token).get("/audit", query_string=query)
        page = shown.get_data(as_text=True)
        assert shown.status_code == 200 and dead[0].id in page
        assert not any(s in page for s in secrets), query
    # the admin reads all, or one tenant
    every = {a["tenant"] for a in admin.get("/v1/audit").get_json()["actions"]}
    assert every == {MINE, FOREIGN}
    theirs = admin.get("/v1/audit", query_string={"tenant": FOREIGN}).get_json()["actions"]
    assert all(a["tenant"] == FOREIGN for a in theirs) and dead[0].id not in str(theirs)
    assert dead[1].id in str(theirs) and FOREIGN in page_login(web, ADMIN).get("/audit").get_data(
        as_text=True
    )
    # the per-tenant stream lives under its tenant's shard hash tag
    key = app.broker.keys.actions(shard_of(FOREIGN, app.broker.shards), FOREIGN)
    assert "{s" in key and app.broker.client.xlen(key) == len(theirs)


def test_no_entry_holds_a_token_secret(
    app: App, web: flask.Flask, tokens: TokenStore, redis_url: str, key_prefix: str
) -> None:
    info, token = tokens.create_tenant(MINE)
    _v, viewer = tokens.create_admin("viewer")
    job_id = job_of(app, MINE)
    api(web, token).post(f"/v1/jobs/{job_id}/pause")
    api(web, viewer).post(f"/v1/jobs/{job_id}/resume")  # refused
    # a secret pasted into a request: an error message that echoes it is masked
    bad = api(web, ADMIN).post(
        "/v1/jobs",
        json={
            "name": "x",
            "tenant": token + " ",
            "cron": "* * * * *",
            "task": {"name": "roles.add", "args": [1]},
        },
    )
    assert bad.status_code == 400 and token in bad.get_data(as_text=True)
    api(web, ADMIN).post(f"/v1/jobs/{job_id}/trigger", json={"params": {"key": viewer}})
    page_login(web, token)
    env = {"REDCRON_PREFIX": key_prefix.rstrip(":"), "REDCRON_REDIS_URL": redis_url}
    out = CliRunner().invoke(
        main, ["tenants", "token", "create", MINE, "--role", "viewer"], env=env
    )
    assert out.exit_code == 0, out.output
    cli_token = out.output.strip().split()[-1]
    entries = everything(app)
    assert len(entries) >= 8  # both streams: the pause, resume, bad create, trigger, CLI
    text = repr(entries)
    assert ADMIN not in text
    for secret in (token, viewer, cli_token):
        assert secret not in text and secret.partition(".")[2] not in text
    assert info.id in text and f"{token[:12]}.***" in text


# -- retention ----------------------------------------------------------------------------


def test_the_streams_are_trimmed_by_length_and_by_age(app: App) -> None:
    log = ActionLog(app.broker, tenant_maxlen=5, all_maxlen=7, max_age_s=3600)
    keys = app.broker.keys
    own = keys.actions(shard_of(MINE, app.broker.shards), MINE)
    # an entry from long ago (ids are server ms): trimmed by age at the next append
    app.broker.client.xadd(own, {"action": "ancient"}, id="1-0")
    who = Actor("cli:test", "cli", "operator", "cli")
    for n in range(20):
        log.record(who, "job.pause", MINE, [f"job-{n}"])
    assert app.broker.client.xlen(own) == 5
    assert app.broker.client.xlen(keys.actions_all()) == 7
    newest = log.page(MINE, limit=10).actions
    assert [a.ids for a in newest] == [(f"job-{n}",) for n in range(19, 14, -1)]
    # by age alone: a stream far below its length bound
    theirs = keys.actions(shard_of(FOREIGN, app.broker.shards), FOREIGN)
    app.broker.client.xadd(theirs, {"action": "ancient"}, id="1-0")
    log.record(who, "job.pause", FOREIGN)
    assert [a.action for a in log.page(FOREIGN).actions] == ["job.pause"]
    # record_action with the defaults, as another face calls it
    eid = record_action(app.broker, who, "channel.create", None, ["ch-1"])
    assert log.page(None, limit=1).actions[0].id == eid
    assert app.broker.client.xlen(own) == 5  # on no tenant: the admin's stream only
    with pytest.raises(ValueError, match="outcome"):
        log.record(who, "job.pause", MINE, outcome="maybe")
    with pytest.raises(ValidationError, match="tenant"):
        log.record(who, "job.pause", "a:b")  # it would name a key of another layout


def test_a_request_naming_no_valid_tenant_is_recorded_in_the_admins_stream(
    app: App, web: flask.Flask
) -> None:
    admin = api(web, ADMIN)
    for name in ("a:b", "{s1}x"):
        path = f"/v1/tenants/{quote(name, safe='')}"
        assert admin.put(path, json={"weight": 2}).status_code == 400
    pattern = f"{app.broker.keys.prefix}:*actions*"
    keys = {k.decode() for k in app.broker.client.scan_iter(match=pattern)}
    assert keys == {app.broker.keys.actions_all()}
    recorded = ActionLog(app.broker).page().actions
    assert [(a.tenant, a.outcome, a.status) for a in recorded] == [(None, "error", 400)] * 2


# -- the CLI -------------------------------------------------------------------------------


def test_the_cli_records_its_actions_and_lists_them(
    app: App, redis_url: str, key_prefix: str
) -> None:
    env = {"REDCRON_PREFIX": key_prefix.rstrip(":"), "REDCRON_REDIS_URL": redis_url}
    runner = CliRunner()

    def cli(*args: str) -> str:
        result = runner.invoke(main, list(args), env=env)
        assert result.exit_code == 0, result.output
        return result.output

    job_of(app, MINE)
    cli("jobs", "pause", "nightly", "--tenant", MINE)
    cli("tenants", "set", MINE, "--weight", "4")
    created = cli("admin", "token", "create")
    token_id = created.split()[-1].partition(".")[0]
    assert "viewer admin token" in created
    assert token_id in cli("admin", "token", "list") and "viewer" in cli("admin", "token", "list")
    cli("admin", "token", "revoke", token_id)
    listed = cli("audit", "list")
    for word in ("job.pause", "tenant.settings", "token.create", "token.revoke", "cli:"):
        assert word in listed, listed
    mine = json.loads(cli("audit", "list", "--tenant", MINE, "--json"))
    assert [a["action"] for a in mine] == ["tenant.settings", "job.pause"]
    assert mine[0]["detail"] == "weight=4.0" and mine[0]["who"].startswith("cli:")
    assert len(json.loads(cli("audit", "list", "--limit", "1", "--json"))) == 1
    bad = runner.invoke(main, ["audit", "list", "--tenant", "no spaces"], env=env)
    assert bad.exit_code != 0 and "tenant" in bad.output
