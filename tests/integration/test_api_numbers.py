"""Numbers that are not numbers (issue 16, item 7).

Python's json reads ``1e400`` as infinity (``parse_constant`` sees only the
words ``NaN``/``Infinity``): a completion stored it as a result, and
``GET /v1/tasks/<id>`` then answered ``"result": Infinity``, which is no JSON.
Every request body refuses a number that is not finite with a 400 naming its
field, and every response is strict JSON even where the store holds such a
number (msgpack keeps what the Python API was given): it is spelled as the
string ``"Infinity"``, ``"-Infinity"`` or ``"NaN"``.  The walk below calls
every /v1 route and parses each answer with a strict parser.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import flask
import pytest
import redis
from click.testing import CliRunner
from flask.testing import FlaskClient
from redis_dump import diff, dump  # tests/helpers
from worker_procs import thread_workers, wait_for

from redcron import App, Permanent
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.dashboard.api.common import non_finite_path
from redcron.model.jobs import Task, job_spec
from redcron.model.states import TaskState

ADMIN = "numbers-admin-token"
TENANT = "acme"
INF, NAN = float("inf"), float("nan")


def _refuse(word: str) -> Any:
    raise AssertionError(f"{word} in a response: not JSON")


def strict(resp: Any) -> Any:
    """The response parsed by a strict JSON parser (no NaN/Infinity words)."""
    if resp.status_code == 204:
        assert not resp.get_data()
        return None
    assert resp.mimetype == "application/json", (resp.status_code, resp.mimetype)
    return json.loads(resp.get_data(as_text=True), parse_constant=_refuse)


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(
        redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5, notify_allow_hosts="127.0.0.1"
    )

    @a.task(name="num.echo", tenant=TENANT)
    def echo(x: Any = None) -> Any:
        return x

    @a.task(name="num.odd", tenant=TENANT)
    def odd() -> dict[str, float]:
        return {"big": INF, "small": -INF, "nan": NAN, "fine": 1.5}

    @a.task(name="num.broken", tenant=TENANT, retries=0)
    def broken(x: Any = None) -> None:
        raise Permanent("cannot work")

    try:
        yield a
    finally:
        a.close()


@pytest.fixture
def client(app: App) -> FlaskClient:
    web: flask.Flask = create_app(app, admin_token=ADMIN)
    c = web.test_client()
    c.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    assert c.get("/v1/jobs").status_code == 200  # the session secret: not a write under test
    return c


def error_field(resp: Any) -> str | None:
    assert resp.status_code == 400, resp.get_data(as_text=True)
    err = strict(resp)["error"]
    assert err["code"] == "invalid"
    assert "finite" in err["message"], err
    field: str | None = err["field"]
    return field


# -- request bodies -------------------------------------------------------------------


def test_a_completion_of_1e400_is_refused_naming_the_result(
    app: App, client: FlaskClient, r: redis.Redis, key_prefix: str
) -> None:
    """The issue's sequence: lease over HTTP, complete with 1e400."""
    handle = app.enqueue("num.echo", 1)
    (leased,) = strict(client.post("/v1/worker/lease", json={"worker_id": "hw1"}))
    before = dump(r, key_prefix)
    resp = client.post(
        "/v1/worker/complete",
        data=b'{"lease_id": "%s", "result": 1e400}' % leased["lease_id"].encode(),
    )
    assert error_field(resp) == "result"
    assert not diff(before, dump(r, key_prefix)), "a refused completion wrote"
    assert handle.info().state == TaskState.RUNNING
    done = client.post("/v1/worker/complete", json={"lease_id": leased["lease_id"], "result": 2})
    assert done.status_code == 200, done.get_data(as_text=True)
    assert strict(client.get(f"/v1/tasks/{handle.id}"))["result"] == 2


def _task(fields: bytes) -> bytes:
    return b'{"name": "num.echo", ' + fields + b"}"


@pytest.mark.parametrize(
    ("method", "path", "raw", "field"),
    [
        ("post", "/v1/tasks", _task(b'"args": [1e400]'), "args[0]"),
        ("post", "/v1/tasks", _task(b'"kwargs": {"x": -1e400}'), "kwargs.x"),
        ("post", "/v1/tasks", _task(b'"args": [[1, {"y": [NaN]}]]'), "args[0][1].y[0]"),
        ("post", "/v1/tasks", _task(b'"countdown_s": Infinity'), "countdown_s"),
        ("post", "/v1/tasks", _task(b'"timeout_s": 1e400, "args": [-1e999]'), "timeout_s"),
        ("put", f"/v1/tenants/{TENANT}", b'{"weight": 1E+400}', "weight"),
        ("post", "/v1/worker/lease", b'{"capacity": {"cpu": 1e400}}', "capacity.cpu"),
        ("post", "/v1/worker/lease", b'{"worker_id": "w", "wait_s": -Infinity}', "wait_s"),
        ("post", "/v1/jobs", b'{"name": "j", "tenant": "acme", "cron": "0 2 * * *", "tasks": '
                             b'{"a": {"ref": "num.echo", "args": [1, 2e308]}}}', "tasks.a.args[1]"),
    ],
)  # fmt: skip
def test_non_finite_numbers_in_a_body_are_400_naming_the_field(
    client: FlaskClient,
    r: redis.Redis,
    key_prefix: str,
    method: str,
    path: str,
    raw: bytes,
    field: str,
) -> None:
    before = dump(r, key_prefix)
    resp = client.open(path, method=method.upper(), data=raw)
    assert error_field(resp) == field
    assert not diff(before, dump(r, key_prefix))


def test_trigger_params_and_the_worker_routes_refuse_them_too(
    app: App, client: FlaskClient
) -> None:
    job = strict(client.post("/v1/jobs", json=_job("t")))
    resp = client.post(f"/v1/jobs/{job['id']}/trigger", data=b'{"params": {"n": 1e400}}')
    assert error_field(resp) == "params.n"
    resp = client.post("/v1/worker/fail", data=b'{"lease_id": "x", "retry_in_s": 1e400}')
    assert error_field(resp) == "retry_in_s"


def test_an_integer_of_too_many_digits_is_a_400_not_a_500(client: FlaskClient) -> None:
    resp = client.post("/v1/tasks", data=b'{"name": "num.echo", "args": [' + b"1" * 5000 + b"]}")
    assert resp.status_code == 400, resp.get_data(as_text=True)
    assert strict(resp)["error"]["code"] == "invalid"


def test_non_finite_path_walks_in_document_order() -> None:
    assert non_finite_path({"a": [1.0, {"b": 2}], "c": {"d": [0, INF]}, "e": NAN}) == "c.d[1]"
    assert non_finite_path({"a": [1.0, "x", None, True, 10**30]}) is None
    deep: Any = INF
    for _ in range(5000):
        deep = [deep]
    assert non_finite_path({"k": deep}) == "k" + "[0]" * 5000


# -- responses: a walk over every /v1 route ------------------------------------------------


def _job(name: str, args: list[Any] | None = None) -> dict[str, Any]:
    return {"name": name, "tenant": TENANT, "cron": "0 2 * * *",
            "tasks": {"a": {"ref": "num.echo", "args": args or [1]}}}  # fmt: skip


def test_every_response_is_strict_json_even_over_stored_infinities(
    app: App, client: FlaskClient
) -> None:
    # stored through the Python API (msgpack and the job's JSON text keep them):
    # a result, arguments of a run's task, of a ready task and of a dead one, run params
    spec = job_spec("odd", tenant=TENANT, cron="0 2 * * *",
                    tasks={"a": Task(ref="num.echo", args=[-INF])})  # fmt: skip
    job_id = app.jobs.put(spec).id
    run_id = app.jobs.trigger("odd", tenant=TENANT, params={"x": NAN, "y": [INF]})
    with thread_workers(app, "num-worker") as start:
        worker = start()
        odd = app.enqueue("num.odd")
        dead = app.enqueue("num.broken", INF)
        assert odd.result(timeout=20)["big"] == INF
        wait_for(lambda: dead.info().state == TaskState.DEAD, "the DLQ entry", 20)
        wait_for(lambda: app.jobs.run(run_id).state == "succeeded", "the run", 20)
        worker.stop()
    ready = app.enqueue("num.echo", NAN)

    got = strict(client.get(f"/v1/tasks/{odd.id}"))
    assert got["result"] == {"big": "Infinity", "small": "-Infinity", "nan": "NaN", "fine": 1.5}
    assert strict(client.get(f"/v1/tasks/{ready.id}"))["args"] == [["NaN"], {}]
    assert strict(client.get(f"/v1/runs/{run_id}"))["params"] == {"x": "NaN", "y": ["Infinity"]}
    (leased,) = strict(client.post("/v1/worker/lease", json={"worker_id": "hw1"}))
    assert leased["task_id"] == ready.id and leased["args"] == ["NaN"]
    entries = strict(client.get(f"/v1/tenants/{TENANT}/dlq"))["entries"]
    assert [e["task_id"] for e in entries] == [dead.id]
    assert strict(client.get(f"/v1/tasks/{dead.id}"))["args"] == [["Infinity"], {}]

    new = strict(client.post("/v1/jobs", json=_job("plain")))
    other = strict(client.post("/v1/jobs", json=_job("gone")))
    dead_path = f"{TENANT}/dlq/{dead.id}"
    hook = {"url": "http://127.0.0.1:9/hook", "timeout_s": 2.5}
    chan = strict(client.post("/v1/channels", json=hook))["channel"]["id"]
    gone = strict(client.post("/v1/channels", json=hook))["channel"]["id"]
    walk: dict[tuple[str, str], list[tuple[str, Any]]] = {
        ("GET", "/v1/openapi.json"): [("/v1/openapi.json", None)],
        ("GET", "/v1/jobs"): [("/v1/jobs", None)],
        ("POST", "/v1/jobs"): [("/v1/jobs", _job("more")), ("/v1/jobs", b'{"x": 1e400}')],
        ("GET", "/v1/jobs/<job_id>"): [(f"/v1/jobs/{job_id}", None)],
        ("PUT", "/v1/jobs/<job_id>"): [(f"/v1/jobs/{new['id']}", _job("plain", [2]))],
        ("DELETE", "/v1/jobs/<job_id>"): [(f"/v1/jobs/{other['id']}", None)],
        ("POST", "/v1/jobs/<job_id>/pause"): [(f"/v1/jobs/{new['id']}/pause", None)],
        ("POST", "/v1/jobs/<job_id>/resume"): [(f"/v1/jobs/{new['id']}/resume", None)],
        ("POST", "/v1/jobs/<job_id>/trigger"): [(f"/v1/jobs/{job_id}/trigger", {"params": {}})],
        ("GET", "/v1/runs"): [("/v1/runs", None), (f"/v1/runs?job={job_id}", None)],
        ("GET", "/v1/runs/<run_id>"): [(f"/v1/runs/{run_id}", None)],
        ("POST", "/v1/runs/<run_id>/cancel"): [(f"/v1/runs/{run_id}/cancel", None)],
        ("POST", "/v1/runs/<run_id>/tasks/<name>/cancel"): [
            (f"/v1/runs/{run_id}/tasks/a/cancel", None)
        ],
        ("POST", "/v1/runs/<run_id>/tasks/<name>/retry"): [
            (f"/v1/runs/{run_id}/tasks/a/retry", None)
        ],
        ("POST", "/v1/tasks"): [("/v1/tasks", {"name": "num.echo", "args": [1.5]})],
        ("POST", "/v1/tasks/<path:task_id>/cancel"): [(f"/v1/tasks/{odd.id}/cancel", None)],
        ("GET", "/v1/tasks/<path:task_id>"): [
            (f"/v1/tasks/{odd.id}", None),
            (f"/v1/tasks/{dead.id}", None),
            (f"/v1/tasks/{run_id}/a", None),
        ],
        # a run's task named cancel (none here: a 404, in JSON all the same)
        ("GET", "/v1/tasks/<path:task_id>/cancel"): [(f"/v1/tasks/{run_id}/cancel", None)],
        ("GET", "/v1/tenants"): [("/v1/tenants", None)],
        ("POST", "/v1/tokens"): [("/v1/tokens", {"kind": "admin"})],
        ("GET", "/v1/tokens"): [("/v1/tokens", None)],
        ("DELETE", "/v1/tokens/<token_id>"): [("/v1/tokens/000000000000", None)],
        ("GET", "/v1/tenants/<tenant>"): [(f"/v1/tenants/{TENANT}", None)],
        ("PUT", "/v1/tenants/<tenant>"): [(f"/v1/tenants/{TENANT}", {"weight": 2})],
        ("GET", "/v1/tenants/<tenant>/dlq"): [(f"/v1/tenants/{TENANT}/dlq", None)],
        ("GET", "/v1/dlq"): [("/v1/dlq", None)],
        ("GET", "/v1/workers"): [("/v1/workers", None)],
        ("GET", "/v1/audit"): [("/v1/audit", None), (f"/v1/audit?tenant={TENANT}", None)],
        ("POST", "/v1/tenants/<tenant>/dlq/<path:task_id>/replay"): [
            (f"/v1/tenants/{dead_path}/replay", None)
        ],
        ("POST", "/v1/tenants/<tenant>/dlq/<path:task_id>/discard"): [
            (f"/v1/tenants/{dead_path}/discard", None)
        ],
        ("GET", "/v1/channels"): [("/v1/channels", None)],
        ("POST", "/v1/channels"): [
            ("/v1/channels", hook),
            ("/v1/channels", b'{"timeout_s": 1e400}'),
        ],
        ("GET", "/v1/channels/<channel_id>"): [(f"/v1/channels/{chan}", None)],
        ("DELETE", "/v1/channels/<channel_id>"): [(f"/v1/channels/{gone}", None)],
        ("POST", "/v1/channels/<channel_id>/test"): [(f"/v1/channels/{chan}/test", None)],
        ("GET", "/v1/channels/<channel_id>/deliveries"): [
            (f"/v1/channels/{chan}/deliveries", None)
        ],
        ("POST", "/v1/worker/lease"): [("/v1/worker/lease", {"worker_id": "hw2"})],
        ("POST", "/v1/worker/heartbeat"): [
            ("/v1/worker/heartbeat", {"worker_id": "hw1", "lease_ids": [leased["lease_id"]]})
        ],
        ("POST", "/v1/worker/progress"): [
            ("/v1/worker/progress", {"lease_id": leased["lease_id"], "done": -0.0, "total": 2}),
            ("/v1/worker/progress", b'{"lease_id": "x", "done": 1e400}'),
        ],
        ("POST", "/v1/worker/complete"): [
            ("/v1/worker/complete", {"lease_id": leased["lease_id"], "result": -0.0})
        ],
        ("POST", "/v1/worker/fail"): [
            ("/v1/worker/fail", {"lease_id": leased["lease_id"], "error": "late"})
        ],
    }
    web = client.application
    routes = {
        (method, rule.rule)
        for rule in web.url_map.iter_rules()
        if rule.rule.startswith("/v1/")
        for method in rule.methods or ()
        if method not in ("HEAD", "OPTIONS")
    }
    assert routes == set(walk), f"routes not walked: {routes - set(walk)}"
    answered: dict[int, int] = {}
    for (method, _rule), calls in walk.items():
        for path, payload in calls:
            if isinstance(payload, bytes):
                resp = client.open(path, method=method, data=payload)
            else:
                resp = client.open(path, method=method, json=payload)
            strict(resp)
            answered[resp.status_code] = answered.get(resp.status_code, 0) + 1
    # and errors: unknown routes and ids, a wrong method
    for resp in (
        client.get("/v1/nothing"),
        client.get("/v1/tasks/0-nope"),
        client.patch("/v1/jobs"),
        web.test_client().get("/v1/jobs"),
    ):
        strict(resp)
    assert answered.get(200, 0) + answered.get(201, 0) >= 15, answered


def test_the_cli_json_output_is_strict_over_stored_infinities(app: App) -> None:
    """``--json`` prints with the API's serializer (``model/serialize.py``)."""
    with thread_workers(app, "num-worker") as start:
        start()
        odd = app.enqueue("num.odd")
        dead = app.enqueue("num.broken", INF)
        odd.result(timeout=20)
        wait_for(lambda: dead.info().state == TaskState.DEAD, "the DLQ entry", 20)
    env = {"REDCRON_PREFIX": app.settings.prefix, "REDCRON_REDIS_URL": app.settings.redis_url}

    def shown(*args: str) -> Any:
        out = CliRunner().invoke(main, [*args, "--json"], env=env)
        assert out.exit_code == 0, out.output
        return json.loads(out.output, parse_constant=_refuse)

    result = shown("task", "show", odd.id)["result"]
    assert result["big"] == "Infinity" and result["nan"] == "NaN"
    assert shown("task", "show", dead.id)["args"] == [["Infinity"], {}]
    shown("dlq", "list")
    assert math.isinf(odd.result(timeout=1)["big"]), "the Python API keeps the float"
