"""Every reply of ``/v1`` is what ``GET /v1/openapi.json`` says it is, field by field.

One walk through every operation (jobs, runs, tasks, the worker protocol, the
DLQ, tenants, tokens, channels, the audit) on the real Redis fixture; each
reply is validated against the document's schema for its status with every
object made closed (``additionalProperties: false`` wherever properties are
listed): a field the server sends that the schema does not list fails, as
does a listed ``required`` field it leaves out, a null where the schema has
no null, a state outside its enum.  The walk must reach every operation's
success status, so a route added without a reply schema (or with a partial
one) fails here.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import flask
import jsonschema_rs  # schemathesis's validator (the dev extra)
import pytest
from flask.testing import FlaskClient
from grants import grant_commands

from redcron import App, Permanent
from redcron.dashboard import create_app
from redcron.dashboard.api.openapi import document

ADMIN = "replies-admin-token"
TENANT = "acme"
Json = dict[str, Any]


def closed(schema: Any) -> Any:
    """``schema`` with every object that lists properties closed to others."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


class Checked:
    """A test client whose every reply is validated against the document."""

    def __init__(self, client: FlaskClient, doc: Json) -> None:
        self.client = client
        self.doc = doc
        self.components = closed(copy.deepcopy(doc["components"]))
        self.routes = [
            (re.compile("^" + re.sub(r"\{[^}]+\}", "[^?]+", path) + "$"), path, item)
            for path, item in doc["paths"].items()
        ]
        #: operation id -> statuses checked
        self.seen: dict[str, set[int]] = {}

    def _operation(self, method: str, path: str) -> tuple[str, Json]:
        # the most specific template first (a parameter may hold slashes: a run's
        # task id): /v1/runs/{r}/tasks/{name}/cancel before /v1/runs/{r}/cancel
        matches = [(tpl, item) for rx, tpl, item in self.routes if rx.match(path)]
        matches.sort(key=lambda m: -len(re.sub(r"\{[^}]+\}", "", m[0])))
        for _tpl, item in matches:
            if method.lower() in item:
                op: Json = item[method.lower()]
                return op["operationId"], op
        raise AssertionError(f"{method} {path} is in no operation of the document")

    def __call__(self, method: str, path: str, **kwargs: Any) -> Any:
        resp = self.client.open(path, method=method, **kwargs)
        op_id, op = self._operation(method, path.split("?", 1)[0])
        status = str(resp.status_code)
        assert status in op["responses"], f"{op_id}: undeclared {status}: {resp.get_data()!r}"
        self.seen.setdefault(op_id, set()).add(resp.status_code)
        content = op["responses"][status].get("content")
        if content is None:
            assert not resp.get_data(), f"{op_id} {status}: a body where none is declared"
            return None
        data = resp.get_json()
        schema = {**closed(content["application/json"]["schema"]),
                  "components": self.components}  # fmt: skip
        errors = [f"{e.instance_path}: {e.message}"
                  for e in jsonschema_rs.validator_for(schema).iter_errors(data)]  # fmt: skip
        assert not errors, f"{op_id} {status} off its schema:\n" + "\n".join(errors[:20])
        return data


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5,
            notify_allow_hosts="127.0.0.1")  # fmt: skip

    @a.task(name="api.add", tenant=TENANT)
    def add(x: int, y: int = 0) -> int:
        return x + y

    @a.task(name="api.broken", tenant=TENANT, retries=0)
    def broken() -> None:
        raise Permanent("cannot work")

    @a.task(name="api.keyed", tenant=TENANT, concurrency_key="k", max_concurrent=1)
    def keyed(k: str) -> None:
        return None

    grant_commands(a, TENANT, "default")
    try:
        yield a
    finally:
        a.close()


@pytest.fixture
def call(app: App) -> Checked:
    web: flask.Flask = create_app(app, admin_token=ADMIN)
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    return Checked(client, document(sorted(app.tasks), ("127.0.0.1",)))


def _lease(call: Checked, queue: str, kind: str) -> Json:
    got = call("POST", "/v1/worker/lease", json={"worker_id": "w-1", "queues": [queue]})
    assert got and got[0]["kind"] == kind, got
    lease: Json = got[0]
    return lease


def test_every_reply_matches_its_schema(call: Checked) -> None:
    # tenants and tokens (admin)
    call("PUT", f"/v1/tenants/{TENANT}", json={"weight": 2, "allow_commands": True})
    call("GET", f"/v1/tenants/{TENANT}")
    made = call("POST", "/v1/tokens", json={"kind": "tenant", "tenant": TENANT})
    call("POST", "/v1/tokens", json={"kind": "admin"})
    call("POST", "/v1/tokens", json={"kind": "worker", "queues": ["default"]})
    assert call("GET", "/v1/tokens?limit=2")["next_cursor"]
    call("DELETE", f"/v1/tokens/{made['token']['id']}")
    call("DELETE", f"/v1/tokens/{made['token']['id']}")  # 404

    # a job, its runs and its tasks through the worker protocol
    dag = {
        "extract": {"ref": "api.add", "args": [1, 2]},
        "load": {"command": ["true"], "depends_on": ["extract"]},
    }
    job = call(
        "POST",
        "/v1/jobs",
        json={"name": "nightly", "tenant": TENANT, "cron": "0 2 * * *", "tasks": dag},
    )
    call("GET", "/v1/jobs")
    call("GET", f"/v1/jobs/{job['id']}")
    call("PUT", f"/v1/jobs/{job['id']}", json={"cron": "0 3 * * *", "tasks": dag})
    call("POST", f"/v1/jobs/{job['id']}/pause")
    call("POST", f"/v1/jobs/{job['id']}/resume")
    run_id = call("POST", f"/v1/jobs/{job['id']}/trigger", json={"params": {"day": 1}})["run_id"]
    python = _lease(call, "default", "python")
    call("POST", "/v1/worker/heartbeat",
         json={"worker_id": "w-1", "lease_ids": [python["lease_id"]]})  # fmt: skip
    call("GET", "/v1/workers")
    call("POST", "/v1/worker/progress", json={"lease_id": python["lease_id"], "done": 1,
                                              "total": 2, "message": "half"})  # fmt: skip
    call("POST", "/v1/worker/complete", json={"lease_id": python["lease_id"], "result": 3})
    call("POST", "/v1/worker/complete", json={"lease_id": python["lease_id"], "result": 3})  # 409
    command = _lease(call, "commands", "command")
    call("POST", "/v1/worker/fail", json={"lease_id": command["lease_id"], "error": "no",
                                          "retryable": False, "exit_code": 2})  # fmt: skip
    call("GET", f"/v1/runs?job={job['id']}")
    call("GET", "/v1/runs")
    call("GET", f"/v1/runs/{run_id}")
    call("GET", f"/v1/tasks/{run_id}/extract")
    named = call(
        "POST",
        "/v1/jobs",
        json={
            "name": "odd",
            "tenant": TENANT,
            "tasks": {"cancel": {"ref": "api.add", "args": [1]}},
        },
    )
    odd_run = call("POST", f"/v1/jobs/{named['id']}/trigger")["run_id"]
    assert call("GET", f"/v1/tasks/{odd_run}/cancel")["task"] == "cancel"
    call("POST", f"/v1/runs/{run_id}/tasks/load/retry")
    call("POST", f"/v1/runs/{run_id}/tasks/load/cancel")
    call("POST", f"/v1/runs/{run_id}/cancel")  # 409: it ended
    run2 = call("POST", f"/v1/jobs/{job['id']}/trigger")["run_id"]
    call("POST", f"/v1/runs/{run2}/cancel")

    # one-off tasks: enqueue, read, cancel; a keyed one; one to the DLQ and back
    task = call("POST", "/v1/tasks", json={"name": "api.add", "args": [2, 3]})
    call("GET", f"/v1/tasks/{task['id']}")
    call("POST", f"/v1/tasks/{task['id']}/cancel")
    keyed = call("POST", "/v1/tasks", json={"name": "api.keyed", "kwargs": {"k": "a"}})
    assert "concurrency" in call("GET", f"/v1/tasks/{keyed['id']}")
    dead = call("POST", "/v1/tasks", json={"name": "api.broken", "queue": "dead"})
    lease = _lease(call, "dead", "python")
    call("POST", "/v1/worker/fail", json={"lease_id": lease["lease_id"], "retryable": False})
    call("GET", "/v1/dlq")
    assert call("GET", f"/v1/tenants/{TENANT}/dlq")["entries"]
    call("POST", f"/v1/tenants/{TENANT}/dlq/{dead['id']}/replay")
    lease = _lease(call, "dead", "python")
    call("POST", "/v1/worker/fail", json={"lease_id": lease["lease_id"], "retryable": False})
    call("POST", f"/v1/tenants/{TENANT}/dlq/{dead['id']}/discard")
    call("DELETE", f"/v1/jobs/{job['id']}")

    # channels
    added = call("POST", "/v1/channels", json={"url": "http://127.0.0.1:9/hook", "tenant": TENANT})
    channel_id = added["channel"]["id"]
    call("GET", "/v1/channels")
    call("GET", f"/v1/channels/{channel_id}")
    call("POST", f"/v1/channels/{channel_id}/test")
    call("GET", f"/v1/channels/{channel_id}/deliveries")
    call("DELETE", f"/v1/channels/{channel_id}")

    call("GET", "/v1/tenants")
    call("GET", "/v1/audit")
    call("GET", "/v1/openapi.json")

    missed = [
        op["operationId"]
        for item in call.doc["paths"].values()
        for method, op in item.items()
        if method != "parameters"
        and not any(200 <= s < 300 for s in call.seen.get(op["operationId"], ()))
    ]
    assert not missed, f"operations whose success reply the walk never checked: {missed}"
