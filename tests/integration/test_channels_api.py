"""Channels through the REST API and the CLI: a tenant sees and changes only its
own, the secret is shown once, bad schemes and hosts are a 400 naming ``url``."""

from __future__ import annotations

import flask
import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from receiver import (  # tests/helpers
    Receiver,
    notify_app_fixture,  # noqa: F401 (the app fixture)
    rec_fixture,  # noqa: F401 (the rec fixture)
)
from server_time import server_ms  # tests/helpers

from redcron import App
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.notify import Notifier
from redcron.store import ActionLog, ChannelStore, TokenStore
from redcron.store.channels import MAX_TENANT_CHANNELS

ADMIN = "admin-token-for-tests"


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def client(web: flask.Flask, token: str) -> FlaskClient:
    c = web.test_client()
    c.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return c


@pytest.fixture
def admin(web: flask.Flask) -> FlaskClient:
    return client(web, ADMIN)


@pytest.fixture
def acme(web: flask.Flask, app: App) -> FlaskClient:
    return client(web, TokenStore(app.broker).create_tenant("acme")[1])


@pytest.fixture
def other(web: flask.Flask, app: App) -> FlaskClient:
    return client(web, TokenStore(app.broker).create_tenant("other")[1])


def test_a_tenant_sees_and_changes_only_its_own_channels(
    admin: FlaskClient, acme: FlaskClient, other: FlaskClient, rec: Receiver
) -> None:
    made = acme.post("/v1/channels", json={"url": rec.url, "events": ["run_failed"]})
    assert made.status_code == 201, made.get_json()
    mine = made.get_json()
    assert mine["secret"].startswith("whsec_") and mine["channel"]["tenant"] == "acme"
    cid = mine["channel"]["id"]
    theirs = other.post("/v1/channels", json={"url": rec.url, "kind": "slack"}).get_json()
    admins = admin.post("/v1/channels", json={"url": rec.url}).get_json()
    assert admins["channel"]["tenant"] is None

    assert [c["id"] for c in acme.get("/v1/channels").get_json()["channels"]] == [cid]
    assert acme.get("/v1/channels?tenant=other").get_json() == {"channels": []}
    assert len(admin.get("/v1/channels").get_json()["channels"]) == 3
    for foreign in (theirs["channel"]["id"], admins["channel"]["id"]):
        for method, path in (
            ("GET", ""),
            ("DELETE", ""),
            ("POST", "/test"),
            ("GET", "/deliveries"),
        ):
            got = acme.open(f"/v1/channels/{foreign}{path}", method=method)
            assert got.status_code == 404, (method, path)
    assert len(admin.get("/v1/channels").get_json()["channels"]) == 3  # nothing removed
    # never the secret again
    shown = acme.get(f"/v1/channels/{cid}").get_data(as_text=True)
    assert mine["secret"] not in shown and "pending" in shown
    assert acme.post("/v1/channels", json={"url": rec.url, "tenant": "other"}).status_code == 400
    assert acme.delete(f"/v1/channels/{cid}").status_code == 200
    assert acme.get("/v1/channels").get_json() == {"channels": []}


@pytest.mark.parametrize(
    ("body", "field"),
    [({"url": "ftp://127.0.0.1/x"}, "url"), ({"url": "file:///etc/passwd"}, "url"),
     ({"url": "http://169.254.169.254/latest"}, "url"), ({}, "url"),
     ({"url": "http://127.0.0.1/", "kind": "email"}, "kind"),
     ({"url": "http://127.0.0.1/", "events": ["nope"]}, "events"),
     ({"url": "http://127.0.0.1/", "timeout_s": 0}, "timeout_s"),
     ({"url": "http://127.0.0.1/", "colour": "red"}, "colour")],
)  # fmt: skip
def test_bad_channels_are_a_400_naming_the_field(
    acme: FlaskClient, body: dict[str, object], field: str
) -> None:
    got = acme.post("/v1/channels", json=body)
    assert got.status_code == 400, got.get_json()
    assert got.get_json()["error"]["field"] == field


def test_test_queues_a_delivery_the_notifier_sends(
    app: App, acme: FlaskClient, rec: Receiver
) -> None:
    cid = acme.post("/v1/channels", json={"url": rec.url}).get_json()["channel"]["id"]
    delivery = acme.post(f"/v1/channels/{cid}/test")
    assert delivery.status_code == 202
    n = Notifier(app)
    try:
        n.step(server_ms(app))
    finally:
        n.pool.shutdown(wait=True)
    assert [r.json()["type"] for r in rec.got] == ["test"]
    log = acme.get(f"/v1/channels/{cid}/deliveries").get_json()
    assert log["pending"] == 0
    assert [(d["delivery"], d["outcome"], d["status"]) for d in log["deliveries"]] == [
        (delivery.get_json()["delivery"], "delivered", 200)
    ]


def test_the_cli_adds_lists_tests_and_removes(app: App, rec: Receiver) -> None:
    runner = CliRunner()
    env = {"REDCRON_PREFIX": app.settings.prefix, "REDCRON_NOTIFY_ALLOW_HOSTS": "127.0.0.1"}
    url = ["--redis", app.settings.redis_url]
    got = runner.invoke(
        main, ["channels", "add", "--tenant", "acme", "--url", rec.url, *url], env=env
    )
    assert got.exit_code == 0, got.output
    secret = got.output.strip().splitlines()[-1].split()[-1]
    assert secret.startswith("whsec_")
    cid = ChannelStore(app.broker).list()[0].id
    listed = runner.invoke(main, ["channels", "list", *url], env=env)
    assert cid in listed.output and "acme" in listed.output and secret not in listed.output
    refused = runner.invoke(
        main, ["channels", "add", "--url", "gopher://127.0.0.1/", *url], env=env
    )
    assert refused.exit_code != 0 and "url" in refused.output
    tested = runner.invoke(main, ["channels", "test", cid, *url], env=env)
    assert tested.exit_code == 0 and "queued test delivery" in tested.output
    assert ChannelStore(app.broker).pending(cid) == 1
    removed = runner.invoke(main, ["channels", "remove", cid, *url], env=env)
    assert removed.exit_code == 0 and ChannelStore(app.broker).list() == []
    # each change is in acme's audit trail, as the CLI's, never with the secret
    trail = ActionLog(app.broker).page("acme").actions
    assert [(a.action, a.ids, a.via) for a in reversed(trail)] == [
        (name, (cid,), "cli") for name in ("channel.add", "channel.test", "channel.remove")
    ]
    assert all(secret not in repr(a) for a in trail)


def test_a_tenant_holds_at_most_its_share_of_channels(
    acme: FlaskClient, admin: FlaskClient
) -> None:
    for _ in range(MAX_TENANT_CHANNELS):
        assert acme.post("/v1/channels", json={"url": "http://127.0.0.1:9/"}).status_code == 201
    over = acme.post("/v1/channels", json={"url": "http://127.0.0.1:9/"})
    # the deployment's state, not the request's: a 409 that says what to do
    assert over.status_code == 409 and over.get_json()["error"]["code"] == "conflict"
    assert "remove one first" in over.get_json()["error"]["message"]
    assert admin.post("/v1/channels", json={"url": "http://127.0.0.1:9/"}).status_code == 201
