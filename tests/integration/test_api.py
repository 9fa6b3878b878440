"""The REST API (/v1) through Flask's test client against the real Redis fixture:
each route's happy path and its error codes, and malformed bodies never a 500."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import flask
import pytest
from flask.testing import FlaskClient
from grants import grant_commands
from web_app import add_and_broken_app
from worker_procs import thread_workers, wait_for  # tests/helpers is on sys.path

from redcron import App
from redcron.dashboard import create_app
from redcron.dashboard.api.openapi import DOCUMENT
from redcron.engine.workers import Registration, WorkerRegistry
from redcron.worker import Worker

TENANT = "acme"
#: the admin token every test client sends (tests/integration/test_api_auth.py covers the rest)
ADMIN = "test-admin-token"


def admin_client(web: flask.Flask) -> FlaskClient:
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    return client


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    """``api.add`` and ``api.broken`` (prints, then fails permanently) of TENANT."""
    with add_and_broken_app(redis_url, key_prefix, "api", TENANT) as a:
        grant_commands(a, TENANT, "default")  # the jobs here have command tasks
        yield a


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


@pytest.fixture
def client(web: flask.Flask) -> FlaskClient:
    return admin_client(web)


@pytest.fixture
def start_worker(app: App) -> Iterator[Callable[..., Worker]]:
    with thread_workers(app, "api-worker") as start:
        yield start


def error_of(resp: Any, status: int, field: str | None = "?") -> dict[str, Any]:
    assert resp.status_code == status, resp.get_data(as_text=True)
    err: dict[str, Any] = resp.get_json()["error"]
    assert set(err) == {"code", "message", "field"}
    assert isinstance(err["code"], str) and isinstance(err["message"], str)
    if field != "?":
        assert err["field"] == field, err
    return err


JOB = {
    "name": "nightly",
    "tenant": TENANT,
    "cron": "0 2 * * *",
    "tasks": {
        "extract": {"ref": "api.add", "args": [1, 2]},
        "load": {"command": ["true"], "depends_on": ["extract"], "timeout_s": 30},
    },
}


def make_job(client: FlaskClient, **changes: Any) -> dict[str, Any]:
    resp = client.post("/v1/jobs", json={**JOB, **changes})
    assert resp.status_code == 201, resp.get_data(as_text=True)
    job: dict[str, Any] = resp.get_json()
    return job


# -- the description ------------------------------------------------------------------


# every /v1 route has its document and no more: tests/unit/test_openapi_routes.py


def test_openapi_json_is_served(client: FlaskClient) -> None:
    doc = client.get("/v1/openapi.json").get_json()
    assert doc["openapi"].startswith("3.1")
    assert "/v1/jobs/{job_id}/trigger" in doc["paths"]
    # the tasks POST /v1/tasks takes are the server app's (-A)
    assert doc["components"]["schemas"]["TaskBody"]["properties"]["name"]["enum"] == sorted(
        ["api.add", "api.broken"]
    )


def _operations(doc: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    return {
        op["operationId"]: (path, method, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method != "parameters"
    }


def test_openapi_declares_the_statuses_every_route_can_answer() -> None:
    for op_id, (path, _method, op) in _operations(DOCUMENT).items():
        codes = set(op["responses"])
        if op.get("security") == []:
            continue  # the document itself: no token, no Redis
        assert {"401", "403", "503"} <= codes, op_id
        if "requestBody" in op or "parameters" in op:
            assert "400" in codes, op_id
        if "{" in path and path != "/v1/tenants/{tenant}":
            assert "404" in codes, op_id
        for code, answer in op["responses"].items():
            if code >= "400":
                assert answer["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"
                }, (op_id, code)


def test_openapi_links_name_real_operations_and_parameters() -> None:
    ops = _operations(DOCUMENT)
    links = 0
    for op_id, (_path, _method, op) in ops.items():
        for answer in op["responses"].values():
            for name, link in answer.get("links", {}).items():
                links += 1
                target_path, _m, target = ops[link["operationId"]]
                names = {p["name"] for p in DOCUMENT["paths"][target_path].get("parameters", [])}
                names |= {p["name"] for p in target.get("parameters", [])}
                assert set(link.get("parameters", {})) <= names, (op_id, name)
                assert link.get("parameters") or link.get("requestBody"), (op_id, name)
    assert links >= 30


# -- jobs --------------------------------------------------------------------------------


def test_job_create_get_list_replace_delete(client: FlaskClient) -> None:
    job = make_job(client)
    assert job["name"] == "nightly" and job["tenant"] == TENANT
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", job["next_fire"])
    # the same spec again: unchanged, so 200 not 201
    assert client.post("/v1/jobs", json=JOB).status_code == 200

    assert client.get(f"/v1/jobs/{job['id']}").get_json()["id"] == job["id"]
    listed = client.get("/v1/jobs", query_string={"tenant": TENANT}).get_json()["jobs"]
    assert [j["id"] for j in listed] == [job["id"]]
    assert client.get("/v1/jobs", query_string={"tenant": "other"}).get_json() == {
        "jobs": [],
        "next_cursor": None,
    }
    error_of(client.get("/v1/jobs", query_string={"tenant": "a b"}), 400, "tenant")

    put = client.put(f"/v1/jobs/{job['id']}", json={**JOB, "cron": "0 3 * * *"})
    assert put.status_code == 200 and put.get_json()["cron"] == "0 3 * * *"
    # name and tenant come from the job when left out; changing them is refused
    assert (
        client.put(
            f"/v1/jobs/{job['id']}", json={"every": "60s", "tasks": JOB["tasks"]}
        ).status_code
        == 200
    )
    error_of(client.put(f"/v1/jobs/{job['id']}", json={**JOB, "name": "other"}), 400, "name")

    assert client.delete(f"/v1/jobs/{job['id']}").status_code == 204
    error_of(client.get(f"/v1/jobs/{job['id']}"), 404, None)
    error_of(client.delete(f"/v1/jobs/{job['id']}"), 404)
    error_of(client.put("/v1/jobs/0-nope", json=JOB), 404)
    error_of(client.get("/v1/jobs/not-an-id"), 404)


def test_job_short_forms(client: FlaskClient, app: App) -> None:
    resp = client.post(
        "/v1/jobs",
        json={"name": "one", "tenant": TENANT, "every": "30s", "retries": 2, "timeout_s": 5,
              "task": {"name": "api.add", "args": [1], "cpu": 0.5, "mem": "64M"}},
    )  # fmt: skip
    assert resp.status_code == 201, resp.get_json()
    spec = resp.get_json()["spec"]
    assert spec["tasks"]["one"]["ref"] == "api.add"
    # no live worker serves api.add in this test: the answer says so
    (warning,) = resp.get_json()["warnings"]
    assert f"no live worker serves task 'api.add' (job {TENANT}/one, task 'one')" in warning
    assert spec["tasks"]["one"]["retries"] == 2 and spec["tasks"]["one"]["timeout"] == 5
    cmd = client.post("/v1/jobs", json={"name": "cmd", "task": {"command": ["echo", "hi"]}})
    assert cmd.status_code == 201
    assert cmd.get_json()["spec"]["tasks"]["cmd"]["command"] == ["echo", "hi"]
    error_of(client.post("/v1/jobs", json={"name": "x", "task": {}}), 400, "task")
    error_of(
        client.post("/v1/jobs", json={"name": "x", "task": {"name": "a"}, "tasks": {}}), 400, "task"
    )


def test_pause_resume_trigger(client: FlaskClient) -> None:
    job = make_job(client)
    paused = client.post(f"/v1/jobs/{job['id']}/pause")
    assert paused.status_code == 200 and paused.get_json()["paused"] is True
    assert paused.get_json()["next_fire"] is None
    resumed = client.post(f"/v1/jobs/{job['id']}/resume").get_json()
    assert resumed["paused"] is False and resumed["next_fire"]
    trig = client.post(f"/v1/jobs/{job['id']}/trigger", json={"params": {"day": "mon"}})
    assert trig.status_code == 201
    run = client.get(f"/v1/runs/{trig.get_json()['run_id']}").get_json()
    assert run["params"] == {"day": "mon"} and run["trigger"] == "manual"
    for name in ("pause", "resume", "trigger"):
        error_of(client.post(f"/v1/jobs/0-nope/{name}"), 404)


# -- runs --------------------------------------------------------------------------------


def test_run_detail_and_paged_list(client: FlaskClient) -> None:
    job = make_job(client, overlap="allow")
    other = make_job(client, name="other", overlap="allow")
    run_ids = [client.post(f"/v1/jobs/{job['id']}/trigger").get_json()["run_id"] for _ in range(3)]
    client.post(f"/v1/jobs/{other['id']}/trigger")

    run = client.get(f"/v1/runs/{run_ids[0]}").get_json()
    assert run["state"] == "queued" and run["job_id"] == job["id"]
    assert [t["name"] for t in run["tasks"]] == ["extract", "load"]
    task = run["tasks"][0]
    assert set(task) == {"name", "id", "state", "attempts", "started_at", "ended_at",
                         "exit_code", "error", "mapped"}  # fmt: skip
    assert task["mapped"] is None  # not a mapped task (issue 32 §2)
    assert task["state"] == "ready" and task["attempts"] == 0
    assert client.get(f"/v1/tasks/{task['id']}").get_json()["run_id"] == run_ids[0]

    first = client.get("/v1/runs", query_string={"job": job["id"], "limit": 2}).get_json()
    assert len(first["runs"]) == 2 and first["next_cursor"]
    second = client.get(
        "/v1/runs", query_string={"job": job["id"], "limit": 2, "cursor": first["next_cursor"]}
    ).get_json()
    assert second["next_cursor"] is None
    paged = [r["id"] for r in first["runs"] + second["runs"]]
    assert sorted(paged) == sorted(run_ids) and len(set(paged)) == 3
    assert paged == sorted(paged, reverse=True)  # ids are ULIDs: newest first

    everything = client.get("/v1/runs", query_string={"tenant": TENANT}).get_json()["runs"]
    assert len(everything) == 4
    assert client.get("/v1/runs", query_string={"state": "succeeded"}).get_json()["runs"] == []
    error_of(client.get("/v1/runs", query_string={"state": "done"}), 400, "state")
    error_of(client.get("/v1/runs", query_string={"tenant": "{x}"}), 400, "tenant")
    error_of(client.get("/v1/runs", query_string={"limit": "x"}), 400, "limit")
    error_of(client.get("/v1/runs", query_string={"limit": 0}), 400, "limit")
    error_of(client.get("/v1/runs", query_string={"cursor": "!!"}), 400, "cursor")
    error_of(client.get("/v1/runs", query_string={"job": "0-nope"}), 404)
    error_of(client.get("/v1/runs/0-nope"), 404)


def test_cancel_run_and_task(client: FlaskClient) -> None:
    job = make_job(client, overlap="allow")
    rid = client.post(f"/v1/jobs/{job['id']}/trigger").get_json()["run_id"]
    cancelled = client.post(f"/v1/runs/{rid}/tasks/extract/cancel")
    assert cancelled.status_code == 200
    states = {t["name"]: t["state"] for t in cancelled.get_json()["tasks"]}
    assert states["extract"] == "cancelled"
    assert cancelled.get_json()["may_still_be_running"] is False  # it was only ready
    err = error_of(client.post(f"/v1/runs/{rid}/tasks/extract/cancel"), 409)
    assert err["code"] == "conflict" and "already ended cancelled" in err["message"]
    error_of(client.post(f"/v1/runs/{rid}/tasks/nope/cancel"), 404)

    rid2 = client.post(f"/v1/jobs/{job['id']}/trigger").get_json()["run_id"]
    done = client.post(f"/v1/runs/{rid2}/cancel")
    assert done.status_code == 200 and done.get_json()["state"] == "cancelled"
    assert (done.get_json()["may_still_be_running"], done.get_json()["still_running"]) == (
        False,
        [],
    )
    err = error_of(client.post(f"/v1/runs/{rid2}/cancel"), 409)
    assert "already ended cancelled" in err["message"]
    error_of(client.post("/v1/runs/0-nope/cancel"), 404)


def _run_a_task(app: App, task_id: str) -> tuple[str, str]:
    """Lease and start ``task_id`` as a worker would: its (worker, epoch)."""
    [lease] = app.broker.leases.lease(0, "api-w", 1, 60_000, ["default"])
    assert lease.iid == task_id
    app.broker.leases.start(0, "api-w", [(lease.iid, lease.epoch)])
    assert app.broker.inspection.task_info(task_id).state == "running"
    return "api-w", lease.epoch


def test_cancel_a_running_task_ends_it_cancelled_and_its_report_is_refused(
    client: FlaskClient, app: App
) -> None:
    # issue 16 item 8: the cancel answered 200, and the task then ended succeeded
    tid = client.post("/v1/tasks", json={"name": "api.add", "args": [1]}).get_json()["id"]
    worker, epoch = _run_a_task(app, tid)
    resp = client.post(f"/v1/tasks/{tid}/cancel")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.get_json() == {
        "id": tid,
        "state": "cancelled",
        "cancelled": True,
        "may_still_be_running": True,  # a Python thread cannot be killed
    }
    # the worker's report comes in: refused, the task stays cancelled
    assert app.broker.leases.complete(0, worker, [(tid, epoch, b"\x01")]) == [False]
    task = client.get(f"/v1/tasks/{tid}").get_json()
    assert task["state"] == "cancelled"
    assert [a["outcome"] for a in task["attempts"]] == ["cancelled"]
    err = error_of(client.post(f"/v1/tasks/{tid}/cancel"), 409, None)
    assert err["code"] == "conflict" and "already ended cancelled" in err["message"]
    error_of(client.post("/v1/tasks/0-nope/cancel"), 404)


def test_cancel_of_a_succeeded_task_is_409_naming_its_state(client: FlaskClient, app: App) -> None:
    tid = client.post("/v1/tasks", json={"name": "api.add", "args": [1]}).get_json()["id"]
    worker, epoch = _run_a_task(app, tid)
    assert app.broker.leases.complete(0, worker, [(tid, epoch, b"\x01")]) == [True]
    err = error_of(client.post(f"/v1/tasks/{tid}/cancel"), 409, None)
    assert err["code"] == "conflict"
    assert err["message"] == f"task {tid} already ended succeeded"
    assert client.get(f"/v1/tasks/{tid}").get_json()["state"] == "succeeded"


def test_cancel_a_run_with_a_running_task(client: FlaskClient, app: App) -> None:
    job = make_job(client, overlap="allow")
    rid = client.post(f"/v1/jobs/{job['id']}/trigger").get_json()["run_id"]
    worker, epoch = _run_a_task(app, f"{rid}/extract")
    resp = client.post(f"/v1/runs/{rid}/cancel")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    out = resp.get_json()
    assert out["state"] == "cancelled"  # at once: it does not wait for the worker
    assert (out["may_still_be_running"], out["still_running"]) == (True, ["extract"])
    assert {t["name"]: t["state"] for t in out["tasks"]} == {
        "extract": "cancelled",
        "load": "cancelled",
    }
    assert app.broker.leases.complete(0, worker, [(f"{rid}/extract", epoch, b"\x01")]) == [False]
    assert client.get(f"/v1/runs/{rid}").get_json()["state"] == "cancelled"


def test_retry_a_dead_task_of_a_run(
    client: FlaskClient, app: App, start_worker: Callable[..., Worker]
) -> None:
    job = make_job(client, tasks={"ok": {"ref": "api.add", "args": [1]},
                                  "bad": {"ref": "api.broken", "depends_on": ["ok"]}})  # fmt: skip
    start_worker(concurrency=2)
    rid = client.post(f"/v1/jobs/{job['id']}/trigger").get_json()["run_id"]
    wait_for(lambda: app.jobs.run(rid).state == "failed", "the run to fail")
    error_of(client.post(f"/v1/runs/{rid}/tasks/ok/retry"), 409)  # it succeeded
    retried = client.post(f"/v1/runs/{rid}/tasks/bad/retry")
    assert retried.status_code == 200, retried.get_json()
    bad = next(t for t in retried.get_json()["tasks"] if t["name"] == "bad")
    assert (bad["attempts"] >= 1 and bad["started_at"] is not None) or bad["state"] != "dead"
    error_of(client.post(f"/v1/runs/{rid}/tasks/nope/retry"), 404)


# -- one-off tasks and the DLQ ---------------------------------------------------------


def test_enqueue_and_read_a_task(client: FlaskClient) -> None:
    resp = client.post(
        "/v1/tasks",
        json={"name": "api.add", "args": [2], "kwargs": {"y": 3}, "tenant": "t2",
              "queue": "q", "priority": "high", "timeout_s": 9, "retries": 1},
    )  # fmt: skip
    assert resp.status_code == 201
    task = resp.get_json()
    assert (task["tenant"], task["queue"], task["priority"]) == ("t2", "q", "high")
    assert task["max_attempts"] == 2 and task["timeout_s"] == 9
    assert client.get(f"/v1/tasks/{task['id']}").get_json()["args"] == [[2], {"y": 3}]
    error_of(client.post("/v1/tasks", json={"name": "api.sub"}), 400, "name")
    error_of(client.get("/v1/tasks/0-nope"), 404)


def test_arguments_that_do_not_fit_the_task_are_400_naming_the_argument(
    client: FlaskClient, app: App
) -> None:
    # issue 16 item 9: an unknown keyword answered 201 and was retried into the DLQ;
    # the server runs with -A (the app registers api.add(x, y=0))
    before = app.broker.inspection.inspect()
    err = error_of(
        client.post("/v1/tasks", json={"name": "api.add", "args": [1], "kwargs": {"z": 3}}),
        400,
        "kwargs.z",
    )
    assert err["message"] == "add() got an unexpected keyword argument 'z'"
    err = error_of(client.post("/v1/tasks", json={"name": "api.add"}), 400, "args")
    assert err["message"] == "add() missing a required argument: 'x'"
    error_of(client.post("/v1/tasks", json={"name": "api.add", "args": [1, 2, 3]}), 400, "args")
    assert app.broker.inspection.inspect() == before  # nothing was written
    # a job's Python task the app registers is checked the same way
    bad = {**JOB, "tasks": {"extract": {"ref": "api.add", "args": [1], "kwargs": {"z": 1}}}}
    error_of(client.post("/v1/jobs", json=bad), 400, "tasks.extract.kwargs.z")
    assert client.get("/v1/jobs").get_json()["jobs"] == []
    ok = client.post("/v1/tasks", json={"name": "api.add", "args": [1], "kwargs": {"y": 3}})
    assert ok.status_code == 201


def test_dlq_list_and_replay(
    client: FlaskClient, app: App, start_worker: Callable[..., Worker]
) -> None:
    waiting = client.post("/v1/tasks", json={"name": "api.add", "args": [1]}).get_json()["id"]
    error_of(client.post(f"/v1/tenants/{TENANT}/dlq/{waiting}/replay"), 409)  # not dead
    tid = client.post("/v1/tasks", json={"name": "api.broken"}).get_json()["id"]
    worker = start_worker(concurrency=1)
    wait_for(lambda: app.broker.inspection.task_info(tid).state == "dead", "the task to die")
    # no worker from here: a replayed task it ran and killed again at once was
    # "dead" in the replay's own reply (a race under load)
    worker.stop()
    for thread in [t for t in threading.enumerate() if t.name == "api-worker"]:
        thread.join(15)
        assert not thread.is_alive(), "worker thread did not stop"
    entries = client.get(f"/v1/tenants/{TENANT}/dlq").get_json()["entries"]
    assert [e["task_id"] for e in entries] == [tid]
    assert entries[0]["error"] and entries[0]["dead_at"].endswith("Z")
    error_of(client.post(f"/v1/tenants/other/dlq/{tid}/replay"), 404)
    replayed = client.post(f"/v1/tenants/{TENANT}/dlq/{tid}/replay")
    assert replayed.status_code == 200 and replayed.get_json()["state"] != "dead"
    error_of(client.post(f"/v1/tenants/{TENANT}/dlq/0-nope/replay"), 404)
    error_of(client.get("/v1/tenants/a b/dlq"), 400, "tenant")


def test_dlq_discard(client: FlaskClient, app: App, start_worker: Callable[..., Worker]) -> None:
    waiting = client.post("/v1/tasks", json={"name": "api.add", "args": [1]}).get_json()["id"]
    error_of(client.post(f"/v1/tenants/{TENANT}/dlq/{waiting}/discard"), 409)  # not dead
    tid = client.post("/v1/tasks", json={"name": "api.broken"}).get_json()["id"]
    start_worker(concurrency=1)
    wait_for(lambda: app.broker.inspection.task_info(tid).state == "dead", "the task to die")
    error_of(client.post(f"/v1/tenants/other/dlq/{tid}/discard"), 404)
    error_of(client.post(f"/v1/tenants/{TENANT}/dlq/0-nope/discard"), 404)
    discarded = client.post(f"/v1/tenants/{TENANT}/dlq/{tid}/discard")
    assert discarded.status_code == 200, discarded.get_json()
    task = discarded.get_json()
    assert (task["state"], task["error"]) == ("cancelled", "discarded from the DLQ")
    assert client.get(f"/v1/tenants/{TENANT}/dlq").get_json()["entries"] == []
    error_of(client.post(f"/v1/tenants/{TENANT}/dlq/{tid}/discard"), 409)  # gone for good
    error_of(client.post(f"/v1/tenants/{TENANT}/dlq/{tid}/replay"), 409)
    error_of(client.get(f"/v1/tenants/{TENANT}/dlq", query_string={"limit": -1}), 400, "limit")


# -- tenants and admission ---------------------------------------------------------------


def test_tenant_get_and_put(client: FlaskClient) -> None:
    shown = client.get(f"/v1/tenants/{TENANT}").get_json()
    assert shown["settings"]["weight"] == 1.0 and shown["queued"] == 0
    changed = client.put(f"/v1/tenants/{TENANT}", json={"weight": 3, "rate": "20/s"})
    assert changed.status_code == 200
    assert changed.get_json()["settings"]["weight"] == 3
    assert changed.get_json()["settings"]["rate"] == 20
    error_of(client.get("/v1/tenants/a:b"), 400, "tenant")


def test_admission_refusal_is_429_with_retry_after(client: FlaskClient) -> None:
    client.put(f"/v1/tenants/{TENANT}", json={"max_queued": 1})
    assert client.post("/v1/tasks", json={"name": "api.add", "args": [1]}).status_code == 201
    resp = client.post("/v1/tasks", json={"name": "api.add", "args": [1]})
    error_of(resp, 429)
    assert int(resp.headers["Retry-After"]) > 0
    job = make_job(client)
    error_of(client.post(f"/v1/jobs/{job['id']}/trigger"), 429)


# -- bad input ------------------------------------------------------------------------


def test_unknown_route_and_method(client: FlaskClient) -> None:
    error_of(client.get("/v1/nope"), 404)
    resp = client.patch("/v1/jobs")
    error_of(resp, 405)
    assert "POST" in resp.headers["Allow"]


def test_body_over_the_limit_is_413(app: App) -> None:
    client = admin_client(create_app(app, admin_token=ADMIN, MAX_CONTENT_LENGTH=1000))
    error_of(client.post("/v1/jobs", data=b"{" + b" " * 2000 + b"}"), 413)
    big = admin_client(create_app(app, admin_token=ADMIN))
    error_of(big.post("/v1/tasks", data=b" " * (1024 * 1024 + 1)), 413)


MALFORMED = [b"{", b"[1]", b'"x"', b"null", b"\xff\xfe", b'{"a": 1, "a": 2}', b"NaN",
             b"[" * 100_000, b'{"name": 5}', b"{}"]  # fmt: skip


@pytest.fixture
def ids(client: FlaskClient) -> dict[str, str]:
    job = make_job(client, overlap="allow")
    rid = client.post(f"/v1/jobs/{job['id']}/trigger").get_json()["run_id"]
    return {"job": job["id"], "run": rid}


BODY_ROUTES = [
    ("post", "/v1/jobs"),
    ("put", "/v1/jobs/{job}"),
    ("post", "/v1/jobs/{job}/trigger"),
    ("post", "/v1/runs/{run}/cancel"),
    ("post", "/v1/runs/{run}/tasks/extract/cancel"),
    ("post", "/v1/runs/{run}/tasks/extract/retry"),
    ("post", "/v1/tasks"),
    ("post", "/v1/tasks/0-x/cancel"),
    ("put", f"/v1/tenants/{TENANT}"),
    ("post", f"/v1/tenants/{TENANT}/dlq/0-x/replay"),
    ("post", f"/v1/tenants/{TENANT}/dlq/0-x/discard"),
]


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_malformed_bodies_are_400(
    client: FlaskClient, ids: dict[str, str], method: str, path: str
) -> None:
    for data in MALFORMED:
        if data == b"{}" and path.endswith(
            ("cancel", "retry", "replay", "discard", "trigger", TENANT)
        ):
            continue  # an empty object is a valid body there
        resp = getattr(client, method)(path.format(**ids), data=data)
        error_of(resp, 400)


WRONG_JOBS: list[tuple[dict[str, Any], str | None]] = [
    ({"name": "j", "tasks": 5}, "tasks"),
    ({"name": "j", "cron": "bad", "tasks": {"a": "api.add"}}, "cron"),
    ({"name": "j", "task": {"name": 5}}, None),
    ({"name": "j", "task": 5}, "task"),
    # a string is the task's name (issue 29): api.add then misses its arguments
    ({"name": "j", "task": "api.add"}, "tasks.j.args"),
    ({"name": ["x"], "tasks": {"a": "api.add"}}, "name"),
    ({"name": "j", "tasks": {"a": {"ref": "x", "depends_on": [5]}}}, "tasks.a.depends_on"),
    ({"name": "j", "tasks": {"a": {"ref": "x", "args": "s"}}}, "tasks.a.args"),
    ({"name": "j", "tasks": {"a": {"ref": "x", "timeout_s": "long"}}}, "tasks.a.timeout"),
    ({"name": "j", "tasks": {"a": {"ref": "x", "mem": []}}}, "tasks.a.mem"),
    ({"name": "j", "tasks": {"a": {"ref": "x", "bogus": 1}}}, "tasks.a.bogus"),
    ({"name": "j", "tasks": {"a": "x"}, "catchup_limit": "x"}, "catchup_limit"),
    ({"name": "j", "tasks": {"a": "x"}, "at": 5}, "at"),
    ({"name": "j", "tasks": {"a": "x"}, "tz": "Mars/Base"}, "tz"),
    ({"name": "j", "tasks": {"a": "x"}, "paused": "no"}, "paused"),
    ({"name": "j", "tasks": {"a": "x"}, "retries": 2}, "retries"),
    ({"name": "j", "tasks": {"a": "x"}, "jobs": []}, "jobs"),
    ({"name": "j", "tasks": {"a": {"ref": "x", "args": [2**80]}}}, None),
    ({"tasks": {"a": "x"}}, "name"),
]


def test_job_create_warns_only_of_unserved_python_tasks(client: FlaskClient, app: App) -> None:
    WorkerRegistry(app.broker).publish(
        Registration("w1", "h", 1, ("default",), (), 1, 0, ("api.add",)), 60_000
    )
    served = {
        "name": "served",
        "tenant": TENANT,
        "every": "30s",
        "task": {"name": "api.add", "args": [1]},
    }
    assert client.post("/v1/jobs", json=served).get_json()["warnings"] == []
    shell = {"name": "sh", "tenant": TENANT, "every": "30s", "task": {"command": ["true"]}}
    assert client.post("/v1/jobs", json=shell).get_json()["warnings"] == []
    unserved = {**served, "name": "unserved", "task": {"name": "api.broken"}}
    (warning,) = client.post("/v1/jobs", json=unserved).get_json()["warnings"]
    assert "'api.broken'" in warning


@pytest.mark.parametrize(("data", "field"), WRONG_JOBS)
def test_wrong_job_fields_are_400_naming_the_field(
    client: FlaskClient, data: dict[str, Any], field: str | None
) -> None:
    err = error_of(client.post("/v1/jobs", json=data), 400)
    if field is not None:
        assert err["field"] == field, err


WRONG_TASKS: list[tuple[dict[str, Any], str]] = [
    ({"name": 5}, "name"),
    ({"name": "api.add", "args": {}}, "args"),
    ({"name": "api.add", "kwargs": []}, "kwargs"),
    ({"name": "api.add", "kwargs": {"_x": 1}}, "kwargs._x"),
    ({"name": "api.add", "retries": -1}, "retries"),
    ({"name": "api.add", "timeout_s": "x"}, "timeout_s"),
    ({"name": "api.add", "countdown_s": -1}, "countdown_s"),
    ({"name": "api.add", "priority": "urgent"}, "priority"),
    ({"name": "api.add", "tenant": "a b"}, "tenant"),
    ({"name": "api.add", "args": [2**80]}, "args"),
    ({"name": "api.add", "bogus": 1}, "bogus"),
]


@pytest.mark.parametrize(("data", "field"), WRONG_TASKS)
def test_wrong_task_fields_are_400(client: FlaskClient, data: dict[str, Any], field: str) -> None:
    err = error_of(client.post("/v1/tasks", json=data), 400)
    assert err["field"] is not None and err["field"].lstrip("_").startswith(field), err
    if field in ("timeout_s", "countdown_s"):  # the body's name, not the Python API's
        assert err["field"] == field, err


@pytest.mark.parametrize(
    ("data", "field"),
    [({"weight": "heavy"}, "weight"), ({"max_queued": -1}, "max_queued"),
     ({"rate": "fast"}, "rate"), ({"max_priority": 5}, "max_priority"),
     ({"nope": 1}, "nope"), ({"weight": None}, "weight"), ({"burst": 1.5}, "burst")],
)  # fmt: skip
def test_wrong_tenant_settings_are_400(
    client: FlaskClient, data: dict[str, Any], field: str
) -> None:
    error_of(client.put(f"/v1/tenants/{TENANT}", json=data), 400, field)


def test_trigger_params_must_be_an_object(client: FlaskClient, ids: dict[str, str]) -> None:
    error_of(client.post(f"/v1/jobs/{ids['job']}/trigger", json={"params": 5}), 400, "params")
    error_of(client.post(f"/v1/jobs/{ids['job']}/trigger", json={"x": 1}), 400, "x")


def test_authentication_runs_before_every_api_request(app: App) -> None:
    client = create_app(app, admin_token="ok").test_client()
    assert client.get("/v1/jobs").status_code == 401
    assert client.get("/v1/jobs", headers={"Authorization": "Bearer ok"}).status_code == 200
