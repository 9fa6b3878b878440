"""Property-based fuzzing of every /v1 route that takes a body, a query or a
path parameter, through Flask's test client against the real Redis fixture.

Properties: the API never answers 500; every error has the one shape and a
400 names the field at fault; a refused request writes nothing (every key
under the test's prefix, type and value, is the same afterwards); an
accepted job reads back as it was sent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import flask
import pytest
import redis
from flask.testing import FlaskClient
from fuzz_strategies import (
    BASE_JOB,
    EXAMPLES,
    awkward_text,
    job_bodies,
    json_scalars,
    json_values,
    names,
    numbers,
)
from grants import grant_commands
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from lease_ids import b64, unsigned  # tests/helpers
from redis_dump import diff, dump

from redcron import App
from redcron.dashboard import create_app
from redcron.dashboard.api.jobs import spec_from_body
from redcron.model.jobs import spec_from_json
from redcron.model.retry_rule import with_registered

ADMIN = "fuzz-admin-token"
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))

    @a.task(name="fuzz.add", tenant="acme")
    def add(x: int = 0, y: int = 0) -> int:
        return x + y

    grant_commands(a, "acme")  # BASE_JOB has a command task; other tenants get a 403
    yield a
    a.close()


@pytest.fixture
def client(app: App) -> FlaskClient:
    web: flask.Flask = create_app(app, admin_token=ADMIN)
    c = web.test_client()
    c.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    # the first request makes the dashboard's session secret (once per deployment):
    # not a write of any request under test
    assert c.get("/v1/jobs").status_code == 200
    return c


@pytest.fixture
def snap(r: redis.Redis, key_prefix: str) -> Any:
    return lambda: dump(r, key_prefix)


def to_body(value: Any) -> bytes:
    """JSON text; NaN and infinities go out as the bare words Python writes."""
    return json.dumps(value).encode()


def check(resp: Any, before: Any, snap: Any, what: str) -> dict[str, Any] | None:
    """No 500, the one error shape, a 400 names its field or the body, and a refusal
    writes nothing.  Returns the error (None on success)."""
    text = resp.get_data(as_text=True)
    assert resp.status_code < 500, f"{what}: {resp.status_code} {text}"
    if resp.status_code < 400:
        return None
    err: dict[str, Any] = resp.get_json()["error"]
    assert set(err) == {"code", "message", "field"}, text
    assert isinstance(err["message"], str) and err["message"].strip(), text
    assert "Traceback" not in err["message"]
    after = snap()
    changed = diff(before, after)
    assert not changed, f"{what} was refused ({text}) but wrote:\n{changed}"
    return err


def _plain(value: Any) -> Any:
    """JSON's view of a value (tuples as lists), for comparing what was sent."""
    return json.loads(json.dumps(value))


def assert_round_trip(
    client: FlaskClient, app: App, sent: dict[str, Any], answer: dict[str, Any]
) -> None:
    """What was put is what is read back: the stored spec is the sent body's, its
    Python tasks' left-out retries filled from their registration (one retry rule,
    ``model.retry_rule``)."""
    read = client.get(f"/v1/jobs/{answer['id']}").get_json()
    assert {k: v for k, v in answer.items() if k not in ("warnings", "change")} == {
        k: v for k, v in read.items() if k != "change"
    }
    stored = spec_from_json(json.dumps(read["spec"]))
    assert stored == with_registered(spec_from_body(sent), app.retry_rules())
    for key in ("name", "tenant", "cron", "every", "tz", "catchup", "overlap", "keep_runs"):
        if key in sent and sent[key] is not None:
            assert getattr(stored, key) == sent[key], key
    tasks = sent.get("tasks")
    if isinstance(tasks, dict):
        for tname, task in tasks.items():
            for key, value in task.items() if isinstance(task, dict) else ():
                field = "timeout" if key == "timeout_s" else key
                assert _plain(getattr(stored.tasks[tname], field)) == _plain(value), key


# -- POST /v1/jobs, PUT /v1/jobs/{id} ---------------------------------------------------


@FUZZ
@given(case=job_bodies())
@example(case=({**BASE_JOB, "tz": "Etc/GMT+15"}, "tz"))
@example(case=({**BASE_JOB, "nmae": None, "": None}, "nmae"))
@example(case=({**BASE_JOB, "tz": "x" * 4000}, "tz"))  # ZoneInfo: OSError, file name too long
@example(case=({**BASE_JOB, "keep_runs": 10**30}, "keep_runs"))
@example(case=({**BASE_JOB, "tasks": {"a": {"command": ["a\x00b"]}}}, "tasks.a.command"))
@example(case=({**BASE_JOB, "tasks": {"a": {"command": ["x"], "env": {"A": 1}}}}, "tasks.a.env"))
@example(case=({**BASE_JOB, "tasks": {"a": {"command": ["x"], "cwd": 5}}}, "tasks.a.cwd"))
@example(case=({**BASE_JOB, "tasks": {"a": {"ref": "fuzz.add", "kwargs": {"": 1}}}}, "tasks"))
def test_job_bodies(
    client: FlaskClient, app: App, snap: Any, case: tuple[dict[str, Any], str]
) -> None:
    job, path = case
    before = snap()
    resp = client.post("/v1/jobs", data=to_body(job))
    err = check(resp, before, snap, f"POST /v1/jobs {job!r}")
    if err is None:
        assert_round_trip(client, app, job, resp.get_json())
        # the same body again writes nothing new
        before = snap()
        again = client.post("/v1/jobs", data=to_body(job))
        assert again.status_code == 200 and again.get_json()["change"] == "unchanged"
        client.delete(f"/v1/jobs/{resp.get_json()['id']}")
        return
    if err["code"] == "forbidden":  # a valid job with a command task of an ungranted tenant
        assert "allow_commands" in err["message"] and job.get("tenant", "default") != "acme", err
        return
    assert err["code"] == "invalid", err
    head = path.split(".")[0]
    # the field at fault is named: the mutated one, or one the mutation made invalid
    # (a dropped trigger, a task now of the wrong shape); null only for the body as a whole
    assert err["field"] is not None or head in err["message"] or not job, (path, err)


@FUZZ
@given(case=job_bodies())
def test_job_replace_bodies(
    client: FlaskClient, app: App, snap: Any, case: tuple[dict[str, Any], str]
) -> None:
    job_id = client.post("/v1/jobs", json=BASE_JOB).get_json()["id"]
    job, _path = case
    before = snap()
    resp = client.put(f"/v1/jobs/{job_id}", data=to_body(job))
    err = check(resp, before, snap, f"PUT /v1/jobs {job!r}")
    if err is None:
        assert_round_trip(
            client, app, {**job, "name": "nightly", "tenant": "acme"}, resp.get_json()
        )
        client.put(f"/v1/jobs/{job_id}", json=BASE_JOB)


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), st.sampled_from(
    [b"", b"null", b"[]", b"1", b'"x"', b"{", b'{"name": NaN}', b'{"name": Infinity}',
     b'{"a":1,"a":2}', b"\xff\xfe", b'{"name": "\\ud800"}', b"[" * 5000 + b"]" * 5000,
     b'{"k":' * 3000 + b"1" + b"}" * 3000, b'{"name": 1e999}', b'{"name": -0}']
)))  # fmt: skip
def test_raw_bodies_on_every_body_route(client: FlaskClient, snap: Any, raw: bytes) -> None:
    job_id = client.post("/v1/jobs", json=BASE_JOB).get_json()["id"]
    routes = [
        ("POST", "/v1/jobs"),
        ("PUT", f"/v1/jobs/{job_id}"),
        ("POST", f"/v1/jobs/{job_id}/trigger"),
        ("POST", "/v1/tasks"),
        ("PUT", "/v1/tenants/acme"),
        ("POST", "/v1/worker/lease"),
        ("POST", "/v1/worker/heartbeat"),
        ("POST", "/v1/worker/complete"),
        ("POST", "/v1/worker/fail"),
    ]
    for method, path in routes:
        before = snap()
        resp = client.open(path, method=method, data=raw)
        if resp.status_code < 400 and method == "POST" and path.endswith("trigger"):
            continue  # an empty body triggers a run: allowed
        err = check(resp, before, snap, f"{method} {path} {raw[:80]!r}")
        if resp.status_code < 400:
            continue
        assert err is not None


# -- POST /v1/jobs/{id}/trigger ----------------------------------------------------------


@FUZZ
@given(body=st.one_of(json_values, st.dictionaries(awkward_text, json_values, max_size=3)))
def test_trigger_bodies(client: FlaskClient, snap: Any, body: Any) -> None:
    job_id = client.post("/v1/jobs", json=BASE_JOB).get_json()["id"]
    before = snap()
    resp = client.post(f"/v1/jobs/{job_id}/trigger", data=to_body(body))
    err = check(resp, before, snap, f"trigger {body!r}")
    if err is None:
        assert isinstance(body, dict) and set(body) <= {"params"}
        assert isinstance(body.get("params", {}), dict)


# -- POST /v1/tasks -----------------------------------------------------------------------

TASK_BODY_FIELDS = {
    "name": st.one_of(st.just("fuzz.add"), names, json_scalars),
    "args": st.one_of(st.lists(json_scalars, max_size=3), json_values),
    "kwargs": st.one_of(st.dictionaries(awkward_text, json_scalars, max_size=3), json_values),
    "tenant": st.one_of(names, json_scalars),
    "queue": st.one_of(names, json_scalars),
    "priority": st.one_of(st.sampled_from(["high", "normal", "low"]), json_scalars),
    "timeout_s": st.one_of(numbers, json_scalars),
    "retries": st.one_of(numbers, json_scalars),
    "countdown_s": st.one_of(numbers, json_scalars),
    "bogus": json_values,
}


@FUZZ
@given(
    body=st.fixed_dictionaries(
        {"name": st.just("fuzz.add")},
        optional={k: v for k, v in TASK_BODY_FIELDS.items() if k != "name"},
    )
)
@example(body={"name": "fuzz.add", "args": [2**64]})
@example(body={"name": "fuzz.add", "args": [], "kwargs": {"x": 10**30}})
@example(body={"name": "fuzz.add", "timeout_s": 1e308})
@example(body={"name": "fuzz.add", "countdown_s": 1e308})
@example(body={"name": "fuzz.add", "retries": 10**30})
def test_task_bodies(client: FlaskClient, snap: Any, body: dict[str, Any]) -> None:
    before = snap()
    resp = client.post("/v1/tasks", data=to_body(body))
    err = check(resp, before, snap, f"POST /v1/tasks {body!r}")
    if err is None:
        task = resp.get_json()
        read = client.get(f"/v1/tasks/{task['id']}").get_json()
        assert read["id"] == task["id"] and read["name"] == "fuzz.add"
        for field in ("tenant", "queue", "priority"):
            if body.get(field) is not None:
                assert read[field] == body[field]
        return
    if err["code"] == "invalid":
        assert err["field"] is not None, err


# -- PUT /v1/tenants/{t} --------------------------------------------------------------------

TENANT_FIELDS = {
    "weight": st.one_of(numbers, json_scalars),
    "max_in_flight": st.one_of(numbers, json_scalars),
    "rate": st.one_of(
        numbers, st.sampled_from(["20/s", "1200/m", "5/h", "1e3/s", "/s", "-1/s", "\u0663/s"]),
        json_scalars,
    ),
    "burst": st.one_of(numbers, json_scalars),
    "max_queued": st.one_of(numbers, json_scalars),
    "max_priority": st.one_of(st.sampled_from(["high", "normal", "low"]), json_scalars),
    "jitter_s": st.one_of(numbers, json_scalars),
    "unknown": json_values,
}  # fmt: skip


@FUZZ
@given(
    tenant=st.one_of(st.just("acme"), names),
    body=st.fixed_dictionaries({}, optional=TENANT_FIELDS),
)
@example(tenant="acme", body={"weight": 1, "max_in_flight": 2**64})
@example(tenant="/0", body={})
@example(tenant="acme", body={"rate": 1e308})
@example(tenant="acme", body={"jitter_s": 1e308})
def test_tenant_bodies(client: FlaskClient, snap: Any, tenant: str, body: dict[str, Any]) -> None:
    before = snap()
    # the name as one path segment: "/0" unquoted is another URL (Werkzeug merges
    # the slashes), not the tenant "/0"
    url = f"/v1/tenants/{quote(tenant, safe='')}"
    resp = client.put(url, data=to_body(body))
    if 300 <= resp.status_code < 400:
        # a name with a "/" ("/0": Werkzeug decodes %2F and merges the slashes)
        # is routed as another URL and redirected: never a write
        assert not diff(before, snap()), f"PUT {url} was redirected but wrote"
        return
    err = check(resp, before, snap, f"PUT /v1/tenants/{tenant!r} {body!r}")
    if err is None:
        shown = client.get(url).get_json()
        for field, value in body.items():
            if field == "rate":
                continue  # given as text or a number, shown as per second
            got = shown["settings"][field] if "settings" in shown else shown[field]
            assert got == value or (isinstance(value, float) and math.isclose(got, value)), (
                field,
                value,
                shown,
            )
        return
    if err["code"] == "invalid" and body:
        assert err["field"] is not None, err


# -- query strings and path parameters -------------------------------------------------------

query_text = st.one_of(awkward_text, st.integers(-(10**25), 10**25).map(str))


@FUZZ
@given(
    limit=st.one_of(st.none(), query_text),
    cursor=st.one_of(st.none(), query_text, st.binary(max_size=40).map(
        lambda b: __import__("base64").urlsafe_b64encode(b).decode())),
    state=st.one_of(st.none(), st.sampled_from(["failed", "succeeded", "FAILED"]), query_text),
    tenant=st.one_of(st.none(), query_text),
    job=st.one_of(st.none(), query_text),
)  # fmt: skip
def test_query_params(client: FlaskClient, snap: Any, **query: str | None) -> None:
    params = {k: v for k, v in query.items() if v is not None}
    for path in ("/v1/runs", "/v1/jobs", "/v1/tenants/acme/dlq"):
        before = snap()
        resp = client.get(path, query_string=params)
        err = check(resp, before, snap, f"GET {path} {params!r}")
        if err is not None and err["code"] == "invalid":
            assert err["field"] in params, err


@settings(FUZZ, max_examples=50)  # 17 routes each
@given(ident=st.one_of(awkward_text, st.sampled_from(
    ["0-x", "²-x", "\u0661-x", "99999999999999999999-x", "-1-x", "0-", "0",
     "0-01ARZ3NDEKTSV4RRFFQ69G5FAV",
     "0-x/y", "a/b/c", "%00", "0-x\x00"]
)))  # fmt: skip
def test_path_params(client: FlaskClient, snap: Any, ident: str) -> None:
    from urllib.parse import quote

    q = quote(ident, safe="")
    routes = [
        ("GET", f"/v1/jobs/{q}"),
        ("PUT", f"/v1/jobs/{q}"),
        ("DELETE", f"/v1/jobs/{q}"),
        ("POST", f"/v1/jobs/{q}/pause"),
        ("POST", f"/v1/jobs/{q}/resume"),
        ("POST", f"/v1/jobs/{q}/trigger"),
        ("GET", f"/v1/runs/{q}"),
        ("POST", f"/v1/runs/{q}/cancel"),
        ("POST", f"/v1/runs/{q}/tasks/{q}/cancel"),
        ("POST", f"/v1/runs/{q}/tasks/{q}/retry"),
        ("GET", f"/v1/tasks/{q}"),
        ("GET", f"/v1/tenants/{q}"),
        ("PUT", f"/v1/tenants/{q}"),
        ("GET", f"/v1/tenants/{q}/dlq"),
        ("POST", f"/v1/tenants/{q}/dlq/{q}/replay"),
        ("POST", f"/v1/tenants/{q}/dlq/{q}/discard"),
        ("POST", f"/v1/tenants/acme/dlq/{q}/replay"),
    ]
    for method, path in routes:
        before = snap()
        data = to_body(BASE_JOB if path.startswith("/v1/jobs") else {"weight": 2})
        resp = client.open(path, method=method, data=data if method == "PUT" else b"")
        if resp.status_code < 400:
            # a valid tenant name (its settings, its empty DLQ), or a redirect of an
            # empty segment ('/v1/runs//cancel'); only a tenant's new settings write
            if not (method == "PUT" and "/tenants/" in path):
                assert not diff(before, snap()), (method, path, resp.status_code)
            continue
        check(resp, before, snap, f"{method} {path}")


# -- the worker protocol ------------------------------------------------------------------------

#: a signature of the right size that signs nothing (a made-up lease id is refused, 403)
FAKE_MAC = b64(bytes(32))


@FUZZ
@given(
    route=st.sampled_from(["lease", "heartbeat", "complete", "fail"]),
    body=st.one_of(
        st.dictionaries(
            st.sampled_from(["worker_id", "capacity", "queues", "wait_s", "lease_ids",
                             "lease_id", "result", "error", "retryable", "exit_code",
                             "retry_in_s", "x"]),
            json_values, max_size=4),
        st.fixed_dictionaries({"worker_id": st.just("w1"), "capacity": st.fixed_dictionaries(
            {}, optional={"slots": json_scalars, "cpu": json_scalars, "mem": json_scalars}),
            "queues": st.one_of(st.lists(names, max_size=2), json_scalars),
            "wait_s": st.one_of(st.just(0), st.sampled_from([-1, 31, 1e308, "1", None]))}),
    ),
)  # fmt: skip
@example(route="complete", body={"lease_id": unsigned(0, "0-x", "0", "w")})
@example(route="complete", body={"lease_id": f"{unsigned(0, '0-x', '0', 'w')}.{FAKE_MAC}"})
@example(route="fail", body={"lease_id": unsigned(0, "0-x", "²", "w"), "error": "x"})
@example(
    route="heartbeat",
    body={
        "worker_id": "w",
        "lease_ids": [
            f"{unsigned(0, '0-x', '1', 'w')}.{FAKE_MAC}",
            unsigned(1, "1-y", "\u0661", "w"),
        ],
    },
)
def test_worker_bodies(client: FlaskClient, snap: Any, route: str, body: dict[str, Any]) -> None:
    wait = body.get("wait_s")
    if isinstance(wait, int | float) and 0 < wait <= 30:
        body["wait_s"] = 0  # a valid wait would only block the test
    before = snap()
    resp = client.post(f"/v1/worker/{route}", data=to_body(body))
    err = check(resp, before, snap, f"POST /v1/worker/{route} {body!r}")
    if err is not None and err["code"] == "invalid":
        assert err["field"] is not None or not body, err
