"""The Channels page: list, add (the secret shown once, on the reply page and
never in the session cookie), test and remove; a tenant sees and changes only
its own channels."""

from __future__ import annotations

from typing import Any

import flask
import pytest
from flask.testing import FlaskClient
from receiver import notify_app_fixture  # noqa: F401 (fixtures: app)

from redcron import App
from redcron.dashboard import create_app
from redcron.store import ChannelStore, TokenStore
from redcron.store.channels import MAX_TENANT_CHANNELS

ADMIN = "admin-token-for-tests"


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def csrf_of(client: FlaskClient) -> str:
    with client.session_transaction() as session:
        token: str = session["csrf_token"]
    return token


def logged_in(web: flask.Flask, token: str) -> FlaskClient:
    client = web.test_client()
    assert client.get("/login").status_code == 200
    got = client.post("/login", data={"token": token, "csrf_token": csrf_of(client)})
    assert got.status_code == 303
    return client


def post(client: FlaskClient, path: str, **data: Any) -> Any:
    return client.post(path, data={"csrf_token": csrf_of(client), **data})


def test_a_tenant_adds_tests_and_removes_its_own_channel(web: flask.Flask, app: App) -> None:
    acme = logged_in(web, TokenStore(app.broker).create_tenant("acme")[1])
    page = acme.get("/channels").get_data(as_text=True)
    assert "No channels yet" in page and 'name="tenant"' not in page  # its own tenant only
    got = post(acme, "/channels", url="http://127.0.0.1:9/hook", kind="webhook",
               events="run_failed")  # fmt: skip
    assert got.status_code == 200
    [info] = ChannelStore(app.broker).list()
    assert info.tenant == "acme" and info.events == ("run_failed",)
    shown = got.get_data(as_text=True)
    assert 'id="channel-secret">whsec_' in shown
    secret = shown.split('id="channel-secret">')[1].split("<")[0]
    with acme.session_transaction() as session:
        assert secret not in repr(dict(session))
    listed = acme.get("/channels").get_data(as_text=True)
    assert info.id in listed and secret not in listed
    assert post(acme, f"/channels/{info.id}/test").status_code == 303
    assert ChannelStore(app.broker).pending(info.id) == 1
    assert post(acme, f"/channels/{info.id}/remove").status_code == 303
    assert ChannelStore(app.broker).list() == []


def test_a_bad_url_is_refused_with_the_field_named(web: flask.Flask) -> None:
    admin = logged_in(web, ADMIN)
    got = post(admin, "/channels", url="file:///etc/passwd", kind="webhook")
    assert got.status_code == 400
    assert "url: scheme" in got.get_data(as_text=True)


def test_a_full_tenant_is_told_to_remove_one_first(web: flask.Flask, app: App) -> None:
    store = ChannelStore(app.broker)
    for _ in range(MAX_TENANT_CHANNELS):
        store.add("acme", "webhook", "http://127.0.0.1:9/hook")
    acme = logged_in(web, TokenStore(app.broker).create_tenant("acme")[1])
    got = post(acme, "/channels", url="http://127.0.0.1:9/hook", kind="webhook")
    assert got.status_code == 409
    assert "remove one first" in got.get_data(as_text=True)
    assert len(store.list("acme")) == MAX_TENANT_CHANNELS


def test_a_tenant_sees_no_other_channel_and_cannot_touch_one(web: flask.Flask, app: App) -> None:
    store = ChannelStore(app.broker)
    theirs, _ = store.add("other", "webhook", "http://127.0.0.1:9/theirs")
    admins, _ = store.add(None, "slack", "http://127.0.0.1:9/admins")
    acme = logged_in(web, TokenStore(app.broker).create_tenant("acme")[1])
    page = acme.get("/channels").get_data(as_text=True)
    assert theirs.id not in page and admins.id not in page
    for cid in (theirs.id, admins.id):
        assert post(acme, f"/channels/{cid}/remove").status_code == 404
        assert post(acme, f"/channels/{cid}/test").status_code == 404
    assert len(store.list()) == 2 and store.pending(theirs.id) == 0
    admin = logged_in(web, ADMIN)
    page = admin.get("/channels").get_data(as_text=True)
    assert theirs.id in page and admins.id in page and "(admin: every tenant)" in page
