"""The App behind the dashboard's test-client tests (the HTML pages and the /v1
API).  Imported by name (``tests/helpers`` is on ``sys.path``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import flask
from flask.testing import FlaskClient

from redcron import App, Permanent


@contextmanager
def add_and_broken_app(redis_url: str, key_prefix: str, ns: str, tenant: str) -> Iterator[App]:
    """An App under the test's key prefix with two tasks of ``tenant``:
    ``{ns}.add`` returns ``x + y``; ``{ns}.broken`` prints "about to fail", then
    fails permanently (no retries)."""
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)

    @a.task(name=f"{ns}.add", tenant=tenant)
    def add(x: int, y: int = 0) -> int:
        return x + y

    @a.task(name=f"{ns}.broken", tenant=tenant, retries=0)
    def broken() -> None:
        print("about to fail")
        raise Permanent("cannot work")

    try:
        yield a
    finally:
        a.close()


def bearer(web: flask.Flask, token: str) -> FlaskClient:
    """A test client of ``web`` that sends ``token`` as its bearer token (the API's way)."""
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


def login(web: flask.Flask, token: str) -> FlaskClient:
    """A test client of ``web`` signed in with ``token`` (the login form, CSRF and all)."""
    client = web.test_client()
    assert client.get("/login").status_code == 200
    with client.session_transaction() as session:
        csrf = session["csrf_token"]
    resp = client.post("/login", data={"token": token, "csrf_token": csrf})
    assert resp.status_code == 303
    return client


def lease_one(client: FlaskClient, worker: str = "hw-1") -> dict[str, Any]:
    """``POST /v1/worker/lease`` that hands out exactly one task: its item."""
    resp = client.post("/v1/worker/lease", json={"worker_id": worker})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    (item,) = resp.get_json()
    out: dict[str, Any] = item
    return out


def complete(client: FlaskClient, item: dict[str, Any], value: Any) -> Any:
    """``POST /v1/worker/complete`` of a leased item with the result ``value``."""
    return client.post("/v1/worker/complete", json={"lease_id": item["lease_id"], "result": value})
