"""A long-polling lease whose client hung up takes no work (issue 16, item 3): against a
live ``redcron dashboard`` (waitress), with a raw socket that closes mid-wait; and the
hand-back of leases whose reply was never written, through the WSGI app itself."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from dashboard_proc import dashboard  # tests/helpers
from werkzeug.serving import make_server
from werkzeug.test import EnvironBuilder

from redcron import App
from redcron.dashboard import create_app
from redcron.dashboard.api.connection import UnlessSent, client_gone, peer_closed

ADMIN = "gone-admin-token"
TENANT = "acme"


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"))

    # no retries: an attempt spent on a gone client would dead-letter it unrun
    @a.task(name="gone.add", tenant=TENANT, retries=0)
    def add(x: int) -> int:
        return x + 1

    yield a
    a.close()


def _post(base: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"{base}{path}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.load(resp)


def _raw_lease(base: str, worker: str, wait_s: float) -> socket.socket:
    """A lease request with a wait, sent on a raw socket that is left open (no read)."""
    where = urlsplit(base)
    assert where.hostname and where.port
    body = json.dumps({"worker_id": worker, "wait_s": wait_s}).encode()
    sock = socket.create_connection((where.hostname, where.port), timeout=10)
    sock.sendall(
        b"POST /v1/worker/lease HTTP/1.1\r\nHost: x\r\n"
        + f"Authorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\n".encode()
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def _blocked_clients(r: redis.Redis) -> int:
    return sum("b" in c["flags"] for c in r.client_list())


def _wait_until_blocked(r: redis.Redis, n: int) -> None:
    """Until ``n`` clients block in Redis (the long-poll waits on the wake list)."""
    end = time.monotonic() + 10
    while _blocked_clients(r) < n:
        assert time.monotonic() < end, "the long-poll never waited on the wake lists"
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_long_poll_whose_client_left_takes_no_work(
    app: App, redis_url: str, key_prefix: str, r: redis.Redis, how: str
) -> None:
    with dashboard(redis_url, key_prefix, REDCRON_ADMIN_TOKEN=ADMIN, REDCRON_LEASE_TTL="60") as b:
        blocked = _blocked_clients(r)
        sock = _raw_lease(b, "gone-1", wait_s=25)
        _wait_until_blocked(r, blocked + 1)
        if how == "reset":  # an RST rather than a FIN, as a killed process's peer sees
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        handle = app.enqueue("gone.add", 1)
        # a live worker gets it: within about a second (the gone poll passes its wake-up
        # on), polled here for up to 10 s so a slow machine does not fail the test
        got: list[dict[str, Any]] = []
        end = time.monotonic() + 10
        while not got and time.monotonic() < end:
            got = _post(b, "/v1/worker/lease", {"worker_id": "live-1", "wait_s": 1})
        assert [item["task_id"] for item in got] == [handle.id], got
        # its attempt budget is whole: the first attempt, nothing spent on the gone client
        assert got[0]["attempt"] == 1 and got[0]["max_attempts"] == 1
        assert len(app.broker.inspection.task_info(handle.id).attempts) == 1
        done = _post(b, "/v1/worker/complete", {"lease_id": got[0]["lease_id"], "result": 2})
        assert done["state"] == "succeeded"
        assert handle.result(timeout=5) == 2


def test_under_werkzeugs_server_too(app: App, r: redis.Redis) -> None:
    """Werkzeug's server (``flask run``) hands over its socket: a peek sees the hang-up."""
    server = make_server("127.0.0.1", 0, create_app(app, admin_token=ADMIN), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        blocked = _blocked_clients(r)
        sock = _raw_lease(base, "gone-3", wait_s=25)
        _wait_until_blocked(r, blocked + 1)
        sock.close()
        handle = app.enqueue("gone.add", 1)
        got: list[dict[str, Any]] = []
        end = time.monotonic() + 10
        while not got and time.monotonic() < end:
            got = _post(base, "/v1/worker/lease", {"worker_id": "live-3", "wait_s": 1})
        assert [item["task_id"] for item in got] == [handle.id], got
        assert got[0]["attempt"] == 1
    finally:
        server.shutdown()
        thread.join(30)


def test_leases_whose_reply_was_not_written_are_handed_back(app: App) -> None:
    """The server closes the body without writing it (waitress does when its write to a
    gone client raises): the leases go back at once, the attempt not counted."""
    web = create_app(app, admin_token=ADMIN)
    handle = app.enqueue("gone.add", 1)
    environ = EnvironBuilder(
        path="/v1/worker/lease", method="POST", json={"worker_id": "gone-2"},
        headers={"Authorization": f"Bearer {ADMIN}"},
    ).get_environ()  # fmt: skip
    replies: list[str] = []
    body = web.wsgi_app(environ, lambda status, headers, exc=None: replies.append(status))
    assert replies == ["200 OK"]
    assert app.broker.inspection.task_info(handle.id).state == "running"
    body.close()  # type: ignore[attr-defined]  # never iterated: nothing was written
    info = app.broker.inspection.task_info(handle.id)
    assert info.state == "ready", info
    assert [a.outcome for a in info.attempts] == ["lost"]
    # retries=0, yet the task runs again: the hand-back did not use its one attempt
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    again = client.post("/v1/worker/lease", json={"worker_id": "live-2"}).get_json()
    assert [item["task_id"] for item in again] == [handle.id]
    done = client.post("/v1/worker/complete", json={"lease_id": again[0]["lease_id"], "result": 2})
    assert done.get_json()["state"] == "succeeded"


def test_a_reply_that_was_written_keeps_its_leases(app: App) -> None:
    web = create_app(app, admin_token=ADMIN)
    handle = app.enqueue("gone.add", 1)
    client = web.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {ADMIN}"
    got = client.post("/v1/worker/lease", json={"worker_id": "w"}).get_json()
    assert [item["task_id"] for item in got] == [handle.id]
    assert app.broker.inspection.task_info(handle.id).state == "running"


def test_unless_sent_calls_back_only_when_closed_unwritten() -> None:
    calls: list[str] = []
    written = UnlessSent([b"a", b"b"], lambda: calls.append("back"))
    assert list(written) == [b"a", b"b"]
    written.close()
    cut = UnlessSent([b"a", b"b"], lambda: calls.append("cut"))
    next(iter(cut))  # the server wrote one chunk, then its write failed
    cut.close()
    cut.close()  # closed twice: called back once
    assert calls == ["cut"]


def test_peer_closed_sees_a_hang_up_and_not_a_pipelined_request() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert not peer_closed(ours)
        theirs.sendall(b"GET / HTTP/1.1\r\n")
        assert not peer_closed(ours)
        assert ours.recv(100) == b"GET / HTTP/1.1\r\n"  # the peek took nothing
        theirs.close()
        assert peer_closed(ours)


class _Channel:
    """Stands in for a waitress channel that does not read while a request runs
    (``channel_request_lookahead`` 0): its flag never turns, its socket tells."""

    def __init__(self, sock: socket.socket) -> None:
        self.socket = sock

    def check_client_disconnected(self) -> bool:
        return False


def test_client_gone_peeks_a_waitress_channel_that_does_not_read() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        environ = {"waitress.client_disconnected": _Channel(ours).check_client_disconnected}
        assert not client_gone(environ)
        theirs.close()
        assert client_gone(environ)
    assert not client_gone({})  # a server that tells nothing: assumed connected


def test_a_wake_up_the_gone_poll_took_goes_on_to_another_worker(app: App) -> None:
    """Redis hands one wake-up to one blocked client; a poll that will not lease (its
    client left) puts it back, or a live worker would sleep through the work."""
    broker = app.broker
    key = broker.keys.wake(0, "default")
    broker.client.lpush(key, "1")
    assert broker.leases.wait_for_work([0], ["default"], 1.0, pass_on=lambda: True)
    assert broker.client.llen(key) == 1
    assert broker.leases.wait_for_work([0], ["default"], 1.0, pass_on=lambda: False)
    assert broker.client.llen(key) == 0
