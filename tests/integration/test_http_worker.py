"""The HTTP worker protocol (/v1/worker) through Flask's test client against the real
Redis fixture: the lease cycle, fencing (a stale lease writes nothing), cancel,
failure reports, long-polling, and a worker token's queue/tenant limits."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from typing import Any

import flask
import pytest
from flask.testing import FlaskClient
from grants import grant_commands
from lease_ids import forged, parts, signed, unsigned  # tests/helpers

from redcron import App
from redcron.dashboard import create_app
from redcron.keys import shard_of_id
from redcron.store.tokens import TokenStore

TENANT = "acme"


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.5)

    @a.task(name="hw.add", tenant=TENANT, retries=2)
    def add(x: int, y: int = 0) -> int:
        return x + y

    yield a
    a.close()


ADMIN = "test-admin-token"


@pytest.fixture
def web(app: App) -> flask.Flask:
    return create_app(app, admin_token=ADMIN)


def bearer(web: flask.Flask, token: str) -> FlaskClient:
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


@pytest.fixture
def client(web: flask.Flask) -> FlaskClient:
    return bearer(web, ADMIN)


def lease(client: FlaskClient, worker: str = "hw-1", **body: Any) -> list[dict[str, Any]]:
    resp = client.post("/v1/worker/lease", json={"worker_id": worker, **body})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    items: list[dict[str, Any]] = resp.get_json()
    return items


def lease_one(client: FlaskClient, **body: Any) -> dict[str, Any]:
    items = lease(client, **body)
    assert len(items) == 1, items
    return items[0]


def error_of(resp: Any, status: int, field: str | None) -> dict[str, Any]:
    assert resp.status_code == status, resp.get_data(as_text=True)
    err: dict[str, Any] = resp.get_json()["error"]
    assert err["field"] == field, err
    return err


def test_lease_heartbeat_complete(app: App, client: FlaskClient) -> None:
    handle = app.enqueue("hw.add", 2, y=3)
    item = lease_one(client, capacity={"slots": 4})
    assert item["task_id"] == handle.id
    assert item["kind"] == "python" and item["name"] == "hw.add"
    assert item["args"] == [2] and item["kwargs"] == {"y": 3}
    assert item["attempt"] == 1 and item["idem_key"] == handle.id
    assert item["ttl_s"] > 0 and item["tenant"] == TENANT
    assert "command" not in item
    assert handle.state == "running"

    resp = client.post(
        "/v1/worker/heartbeat", json={"worker_id": "hw-1", "lease_ids": [item["lease_id"]]}
    )
    assert resp.status_code == 200
    assert resp.get_json() == {item["lease_id"]: "ok"}

    resp = client.post("/v1/worker/complete", json={"lease_id": item["lease_id"], "result": 5})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.get_json()["state"] == "succeeded"
    assert handle.result(timeout=5) == 5
    assert lease(client) == []  # nothing else to hand out


def test_a_stale_lease_is_rejected_and_writes_nothing(app: App, client: FlaskClient) -> None:
    handle = app.enqueue("hw.add", 1)
    item = lease_one(client)
    lease_id = item["lease_id"]
    epoch = parts(lease_id)["epoch"]
    # tampered: the signature no longer fits (403); genuine but not the held lease (409)
    for stale, status, code in (
        (forged(lease_id, epoch=str(int(epoch) + 1)), 403, "forbidden"),
        (forged(lease_id, worker="someone-else"), 403, "forbidden"),
        (signed(app, lease_id, epoch=str(int(epoch) + 1)), 409, "lease_lost"),
        (signed(app, lease_id, worker="someone-else"), 409, "lease_lost"),
    ):
        resp = client.post("/v1/worker/complete", json={"lease_id": stale, "result": 99})
        assert error_of(resp, status, "lease_id")["code"] == code
        resp = client.post("/v1/worker/fail", json={"lease_id": stale, "error": "x"})
        assert error_of(resp, status, "lease_id")["code"] == code
    info = app.broker.inspection.task_info(handle.id)
    assert info.state == "running" and info.result is None and info.error is None

    assert (
        client.post("/v1/worker/complete", json={"lease_id": lease_id, "result": 1}).status_code
        == 200
    )
    # the same lease again, once its attempt has ended: refused, the result stays
    resp = client.post("/v1/worker/complete", json={"lease_id": lease_id, "result": 2})
    error_of(resp, 409, "lease_id")
    resp = client.post("/v1/worker/fail", json={"lease_id": lease_id, "error": "late"})
    error_of(resp, 409, "lease_id")
    assert handle.result(timeout=5) == 1
    resp = client.post("/v1/worker/heartbeat", json={"worker_id": "hw-1", "lease_ids": [lease_id]})
    assert resp.get_json() == {lease_id: "lost"}


def test_a_python_workers_lease_cannot_be_forged(app: App, web: flask.Flask) -> None:
    """Everything in a lease is readable (the worker id is in the task's attempts), so a
    made-up lease id must not reach it, whoever sends it: issue 16, item 1."""
    _info, worker_token = TokenStore(app.broker).create_worker(["default"], [TENANT])
    borrowed = _mint(app, web, worker_token)  # a genuine lease id, to borrow its shape
    handle = app.enqueue("hw.add", 1)
    shard = shard_of_id(handle.id)
    (held,) = app.broker.leases.lease(shard, "py-worker-1", 1, 30_000, ["default"])
    assert held.iid == handle.id
    app.broker.leases.start(shard, "py-worker-1", [(held.iid, held.epoch)])
    ti = app.broker.keys.ti(shard, held.iid)
    before = app.broker.client.hgetall(ti)

    def made_up() -> Iterator[str]:
        yield unsigned(shard, held.iid, held.epoch, "py-worker-1")  # the old, readable format
        aimed = {"task_id": held.iid, "epoch": held.epoch, "worker": "py-worker-1"}
        yield forged(borrowed, **aimed)  # a genuine signature over other parts
        yield forged(borrowed, **aimed, leaser="admin")
        other_secret = signed(app, borrowed, secret=b"not this deployment's", **aimed)
        yield other_secret
        yield other_secret.partition(".")[0] + "."
        yield other_secret.partition(".")[0]

    for token in (worker_token, ADMIN):
        client = bearer(web, token)
        for lease_id in made_up():
            for path, report in (
                ("complete", {"lease_id": lease_id, "result": 666}),
                ("fail", {"lease_id": lease_id, "error": "forged", "retryable": False}),
                ("heartbeat", {"worker_id": "py-worker-1", "lease_ids": [lease_id]}),
            ):
                resp = client.post(f"/v1/worker/{path}", json=report)
                assert resp.status_code in (400, 403), (path, lease_id, resp.get_data())
                assert resp.get_json()["error"]["field"] in ("lease_id", "lease_ids")
                assert app.broker.client.hgetall(ti) == before, (path, lease_id)
    # the real worker's result is the one that counts
    assert app.broker.leases.complete(shard, "py-worker-1", [(held.iid, held.epoch, b"\x03")]) == [
        True
    ]
    assert handle.result(timeout=5) == 3


def _mint(app: App, web: flask.Flask, token: str) -> str:
    """A genuine lease id taken with ``token`` (of a task of its own)."""
    app.enqueue("hw.add", 0)
    return lease_one(bearer(web, token), worker="minter")["lease_id"]


def test_lease_ids_hold_across_dashboard_replicas(app: App, web: flask.Flask) -> None:
    """The signing secret lives in Redis (SET NX), so another dashboard of the same
    deployment (a replica, a restart) accepts the lease ids this one gave."""
    handle = app.enqueue("hw.add", 4)
    item = lease_one(bearer(web, ADMIN))
    replica = create_app(app, admin_token=ADMIN)
    resp = bearer(replica, ADMIN).post(
        "/v1/worker/complete", json={"lease_id": item["lease_id"], "result": 4}
    )
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert handle.result(timeout=5) == 4
    secret = app.broker.client.get(app.broker.keys.lease_secret())
    assert secret is not None and len(bytes.fromhex(secret.decode())) == 32


def test_heartbeat_says_revoked_after_cancel(app: App, client: FlaskClient) -> None:
    handle = app.enqueue("hw.add", 1)
    item = lease_one(client)
    assert app.broker.cancel(handle.id).may_still_be_running
    assert handle.state == "cancelled"  # at once: the worker's report cannot change it
    resp = client.post(
        "/v1/worker/heartbeat", json={"worker_id": "hw-1", "lease_ids": [item["lease_id"]]}
    )
    assert resp.get_json() == {item["lease_id"]: "revoked"}
    resp = client.post("/v1/worker/complete", json={"lease_id": item["lease_id"], "result": 2})
    error_of(resp, 409, "lease_id")
    resp = client.post("/v1/worker/fail", json={"lease_id": item["lease_id"], "error": "cancelled"})
    error_of(resp, 409, "lease_id")
    info = handle.info()
    assert info.state == "cancelled" and info.result is None
    assert [a.outcome for a in info.attempts] == ["cancelled"]


def test_fail_records_retryable_and_exit_code(app: App, client: FlaskClient) -> None:
    handle = app.enqueue("hw.add", 1)
    item = lease_one(client)
    resp = client.post(
        "/v1/worker/fail",
        json={"lease_id": item["lease_id"], "error": "exit 3", "retryable": True, "exit_code": 3},
    )
    assert resp.status_code == 200, resp.get_data(as_text=True)
    report = resp.get_json()
    assert report["state"] in ("retry_wait", "ready") and report["retry_in_s"] is not None
    info = app.broker.inspection.task_info(handle.id)
    assert info.exit_code == 3 and info.error == "exit 3"
    assert info.attempts[-1].outcome == "failed" and info.attempts[-1].exit_code == 3
    resp = client.post("/v1/worker/fail", json={"lease_id": item["lease_id"], "error": "again"})
    error_of(resp, 409, "lease_id")  # that attempt is over: reported once only


def test_a_permanent_failure_goes_to_the_dlq(app: App, client: FlaskClient) -> None:
    handle = app.enqueue("hw.add", 1)
    item = lease_one(client)
    resp = client.post(
        "/v1/worker/fail",
        json={"lease_id": item["lease_id"], "error": "bad input", "retryable": False,
              "exit_code": 2},
    )  # fmt: skip
    assert resp.get_json() == {"task_id": handle.id, "state": "dead", "retry_in_s": None}
    assert handle.state == "dead"
    assert app.broker.inspection.task_info(handle.id).exit_code == 2


def test_retry_in_s_sets_the_delay(app: App, client: FlaskClient) -> None:
    app.enqueue("hw.add", 1)
    item = lease_one(client)
    resp = client.post(
        "/v1/worker/fail", json={"lease_id": item["lease_id"], "error": "x", "retry_in_s": 0}
    )
    assert resp.get_json()["state"] == "ready"
    again = lease_one(client)
    assert again["attempt"] == 2 and again["lease_id"] != item["lease_id"]
    # the first attempt's lease is stale now
    resp = client.post("/v1/worker/complete", json={"lease_id": item["lease_id"], "result": 0})
    error_of(resp, 409, "lease_id")


def test_long_poll_returns_when_work_arrives(app: App, client: FlaskClient) -> None:
    got: list[list[dict[str, Any]]] = []
    poll = threading.Thread(target=lambda: got.append(lease(client, wait_s=20)))
    started = time.monotonic()
    poll.start()
    time.sleep(0.3)
    handle = app.enqueue("hw.add", 7)
    poll.join(25)
    assert not poll.is_alive()
    assert [item["task_id"] for item in got[0]] == [handle.id]
    assert time.monotonic() - started < 15  # well before wait_s ran out


def test_long_poll_with_no_work_answers_an_empty_list(client: FlaskClient) -> None:
    assert lease(client, wait_s=0.2) == []


def test_a_command_task_gives_its_command(app: App, client: FlaskClient) -> None:
    grant_commands(app)
    handle = app.enqueue_command(["echo", "hi"], env={"A": "1"}, timeout=30)
    assert lease(client) == []  # command tasks go to the "commands" queue
    item = lease_one(client, queues=["commands"])
    assert item["task_id"] == handle.id and item["kind"] == "command"
    assert item["command"] == ["echo", "hi"] and item["env"] == {"A": "1"}
    assert item["timeout_s"] == 30 and "name" not in item


def test_capacity_slots_bound_the_batch(app: App, client: FlaskClient) -> None:
    for i in range(3):
        app.enqueue("hw.add", i)
    assert len(lease(client, capacity={"slots": 2})) == 2
    assert len(lease(client, capacity={"slots": 2})) == 1


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("lease", {}, "worker_id"),
        ("lease", {"worker_id": "a b"}, "worker_id"),
        ("lease", {"worker_id": "w", "wait_s": 31}, "wait_s"),
        ("lease", {"worker_id": "w", "wait_s": -1}, "wait_s"),
        ("lease", {"worker_id": "w", "capacity": {"slots": 0}}, "capacity.slots"),
        ("lease", {"worker_id": "w", "capacity": {"cpu": "lots"}}, "capacity.cpu"),
        ("lease", {"worker_id": "w", "capacity": {"gpus": 1}}, "capacity.gpus"),
        ("lease", {"worker_id": "w", "queues": []}, "queues"),
        ("lease", {"worker_id": "w", "queues": ["a:b"]}, "queues"),
        ("lease", {"worker_id": "w", "nope": 1}, "nope"),
        ("complete", {"lease_id": "not-a-lease"}, "lease_id"),
        ("complete", {"lease_id": 7}, "lease_id"),
        ("complete", {}, "lease_id"),
        ("complete", {"lease_id": base64.urlsafe_b64encode(b"[1,2]").decode()}, "lease_id"),
        ("fail", {"lease_id": "!!!"}, "lease_id"),
        ("heartbeat", {"worker_id": "w", "lease_ids": ["x"]}, "lease_ids"),
        ("heartbeat", {"worker_id": "w", "lease_ids": "x"}, "lease_ids"),
    ],
)
def test_bad_input_is_400_naming_the_field(
    client: FlaskClient, path: str, body: dict[str, Any], field: str
) -> None:
    error_of(client.post(f"/v1/worker/{path}", json=body), 400, field)


def test_fail_checks_its_fields(app: App, client: FlaskClient) -> None:
    app.enqueue("hw.add", 1)
    lease_id = lease_one(client)["lease_id"]
    for body, field in (
        ({"retryable": "yes"}, "retryable"),
        ({"exit_code": 1.5}, "exit_code"),
        ({"error": 3}, "error"),
        ({"retry_in_s": -1}, "retry_in_s"),
    ):
        error_of(client.post("/v1/worker/fail", json={"lease_id": lease_id, **body}), 400, field)


def test_heartbeat_refuses_another_workers_lease(app: App, client: FlaskClient) -> None:
    app.enqueue("hw.add", 1)
    lease_id = lease_one(client)["lease_id"]
    resp = client.post("/v1/worker/heartbeat", json={"worker_id": "hw-2", "lease_ids": [lease_id]})
    error_of(resp, 400, "lease_ids")


def test_a_worker_token_limits_queues_and_tenants(app: App, web: flask.Flask) -> None:
    _info, token = TokenStore(app.broker).create_worker(["default"], [TENANT])
    client = bearer(web, token)
    other = app.tasks["hw.add"].enqueue(1, _tenant="other")
    mine = app.enqueue("hw.add", 2)
    resp = client.post("/v1/worker/lease", json={"worker_id": "w", "queues": ["commands"]})
    assert error_of(resp, 403, "queues")["code"] == "forbidden"
    assert [item["task_id"] for item in lease(client, capacity={"slots": 5})] == [mine.id]
    assert other.state == "ready"


def test_a_made_up_lease_id_writes_nothing_not_even_the_secret(
    app: App, client: FlaskClient
) -> None:
    """Only a lease makes the signing secret: a refused report leaves Redis as it was."""
    made_up = f"{unsigned(0, '0-x', '1', 'hw-1')}.{'A' * 43}"
    resp = client.post("/v1/worker/complete", json={"lease_id": made_up, "result": 1})
    assert error_of(resp, 403, "lease_id")["code"] == "forbidden"
    assert app.broker.client.get(app.broker.keys.lease_secret()) is None


def test_a_lease_id_has_one_spelling(app: App, client: FlaskClient) -> None:
    """base64 decoders drop stray characters and a last character's unused bits: a
    lease id spelled otherwise, though it decodes to the same bytes, is not taken."""
    app.enqueue("hw.add", 1)
    lease_id = lease_one(client)["lease_id"]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(lease_id[-1])
    # 32 bytes take 43 characters; the last one's low 2 bits carry nothing
    respelled = lease_id[:-1] + alphabet[last ^ 1]
    for variant in (respelled, lease_id + "=", lease_id[:10] + "\n" + lease_id[10:]):
        resp = client.post("/v1/worker/complete", json={"lease_id": variant, "result": 9})
        error_of(resp, 400, "lease_id")
    resp = client.post("/v1/worker/complete", json={"lease_id": lease_id, "result": 1})
    assert resp.status_code == 200
