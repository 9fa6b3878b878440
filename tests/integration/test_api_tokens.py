"""``/v1/tokens`` and ``GET /v1/tenants``: the admin's routes to set a tenant up
without the CLI.  Only admin tokens reach them (a tenant or a worker token is
a 403 and mints or lists nothing), a secret is shown once and never again
(not in a listing, not in the audit trail), and minting and revoking are
recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator

import flask
import pytest
from flask.testing import FlaskClient

from redcron import App
from redcron.dashboard import create_app
from redcron.store import TokenStore

ADMIN = "tokens-admin-token"


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))
    yield a
    a.close()


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def client(web: flask.Flask, token: str) -> FlaskClient:
    c = web.test_client()
    c.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return c


def test_the_admin_mints_a_tenant_token_shown_once_and_revokes_it(web: flask.Flask) -> None:
    admin = client(web, ADMIN)
    resp = admin.post("/v1/tokens", json={"kind": "tenant", "tenant": "acme"})
    assert resp.status_code == 201, resp.get_json()
    made = resp.get_json()
    secret, info = made["secret"], made["token"]
    assert secret.startswith(info["id"] + ".")
    assert info == {**info, "kind": "tenant", "tenant": "acme", "role": "operator"}
    # it works, for acme only
    acme = client(web, secret)
    assert acme.get("/v1/tenants/acme").status_code == 200
    assert acme.get("/v1/tenants/other").status_code == 404
    # never shown again: not in the listing, not in the audit trail
    listed = admin.get("/v1/tokens?kind=tenant").get_json()
    assert [t["id"] for t in listed["tokens"]] == [info["id"]]
    secret_part = secret.split(".", 1)[1]
    audit = admin.get("/v1/audit").get_data(as_text=True)
    assert secret_part not in admin.get("/v1/tokens").get_data(as_text=True)
    assert secret_part not in audit
    # revoked: the next request with it is a 401; both changes are in the trail
    assert admin.delete(f"/v1/tokens/{info['id']}").get_json()["id"] == info["id"]
    assert acme.get("/v1/tenants/acme").status_code == 401
    assert admin.delete(f"/v1/tokens/{info['id']}").status_code == 404
    actions = admin.get("/v1/audit").get_json()["actions"]
    done = [(a["action"], a["outcome"], a["ids"], a["tenant"]) for a in actions]
    assert ("token.create", "ok", [info["id"]], "acme") in done
    assert ("token.revoke", "ok", [info["id"]], "acme") in done


def test_worker_and_admin_tokens_are_minted_by_kind(web: flask.Flask) -> None:
    admin = client(web, ADMIN)
    worker = admin.post("/v1/tokens", json={"kind": "worker", "queues": ["q1"],
                                            "tenants": ["acme"]}).get_json()  # fmt: skip
    assert worker["token"]["queues"] == ["q1"] and worker["token"]["role"] == ""
    lease = client(web, worker["secret"]).post(
        "/v1/worker/lease", json={"worker_id": "w", "queues": ["q1"]}
    )
    assert lease.status_code == 200, lease.get_json()
    viewer = admin.post("/v1/tokens", json={"kind": "admin"}).get_json()
    assert viewer["token"]["role"] == "viewer"
    # listed a page at a time, oldest first, each once
    ids, cursor = [], ""
    while True:
        page = admin.get(f"/v1/tokens?limit=1&cursor={cursor}").get_json()
        ids += [t["id"] for t in page["tokens"]]
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
    # (by creation, then id: two made in one millisecond come in id order)
    assert sorted(ids) == sorted([worker["token"]["id"], viewer["token"]["id"]])
    assert len(ids) == 2
    kinds = admin.get("/v1/tokens?kind=worker").get_json()["tokens"]
    assert [t["id"] for t in kinds] == [worker["token"]["id"]]
    # a viewer admin reads the listings, and may not mint
    seen = client(web, viewer["secret"])
    assert seen.get("/v1/tokens").status_code == 200
    assert seen.get("/v1/tenants").status_code == 200
    assert seen.post("/v1/tokens", json={"kind": "admin"}).status_code == 403
    # each kind takes its own fields only
    for body, field in (({"kind": "worker"}, "queues"), ({"kind": "tenant"}, "tenant"),
                        ({"kind": "admin", "tenant": "acme"}, "tenant"),
                        ({"kind": "root"}, "kind")):  # fmt: skip
        resp = admin.post("/v1/tokens", json=body)
        assert resp.status_code == 400 and resp.get_json()["error"]["field"] == field, body


@pytest.mark.parametrize("kind", ["tenant", "worker"])
def test_tenant_and_worker_tokens_get_403_and_mint_or_list_nothing(
    web: flask.Flask, app: App, kind: str
) -> None:
    store = TokenStore(app.broker)
    _info, token = (
        store.create_tenant("acme") if kind == "tenant" else store.create_worker(["default"])
    )
    before = {t.id for t in store.list()}
    c = client(web, token)
    for method, path, body in (
        ("POST", "/v1/tokens", {"kind": "admin", "role": "operator"}),
        ("POST", "/v1/tokens", {"kind": "tenant", "tenant": "acme"}),
        ("GET", "/v1/tokens", None),
        ("DELETE", f"/v1/tokens/{_info.id}", None),
        ("GET", "/v1/tenants", None),
    ):
        resp = c.open(path, method=method, json=body)
        assert resp.status_code == 403, (method, path, resp.get_json())
        assert resp.get_json()["error"]["code"] == "forbidden"
        assert "secret" not in json.dumps(resp.get_json())
    assert {t.id for t in store.list()} == before


def test_tenants_are_listed_a_page_at_a_time(web: flask.Flask, app: App) -> None:
    for name in ("acme", "beta", "gamma"):
        app.tenants.set(name, weight=2)
    admin = client(web, ADMIN)
    names, cursor = [], ""
    while True:
        page = admin.get(f"/v1/tenants?limit=2&cursor={cursor}").get_json()
        names += [t["tenant"] for t in page["tenants"]]
        assert all(t["settings"]["weight"] == 2 for t in page["tenants"])
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
    assert names == ["acme", "beta", "gamma"]
