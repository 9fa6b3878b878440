"""The webhook POST against receivers that misbehave, on 127.0.0.1 (no Redis):
a send has one deadline for the whole exchange, and whatever a receiver
answers comes back as a failed :class:`Response`, never as an exception."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from pathlib import Path

import pytest
from receiver import Receiver, receiver  # tests/helpers
from tls_redis import make_certs  # tests/helpers

from redcron.notify.sender import HttpSender, Response, Watchdog

HEAD = b"HTTP/1.1 200 OK\r\n"


def post(rec: Receiver, timeout_s: float = 5.0, url: str | None = None) -> tuple[float, Response]:
    started = time.monotonic()
    got = HttpSender().post(url or rec.url, b"{}", {"Content-Type": "application/json"}, timeout_s)
    return time.monotonic() - started, got


def test_a_receiver_that_dribbles_one_byte_at_a_time_is_cut_at_the_deadline() -> None:
    """urllib's timeout is per socket read: a byte every 50 ms never trips a
    0.5 s timeout, and this answer would take 50 s to dribble out."""
    with receiver() as rec:
        rec.raw = HEAD + b"X-Slow: " + b"a" * 1000 + b"\r\n\r\n"
        rec.dribble_s = 0.05
        took, got = post(rec, timeout_s=0.5)
        assert took < 10, f"held {took:.1f} s by a 0.5 s channel"  # the margin is generous
        assert not got.ok and got.status is None
        assert "timed out" in got.error


def test_the_watchdog_ends_a_blocked_read_when_it_expires() -> None:
    """The mechanism, without the clock: expire() wakes a read blocked on a
    socket it watches, and shuts one handed to it afterwards at once."""
    a, b = socket.socketpair()
    late_a, late_b = socket.socketpair()
    dog = Watchdog(3600)  # never started: only expire() below ends the read
    dog.watch(a)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(a.recv(10)))
    reader.start()
    try:
        reader.join(0.2)
        assert reader.is_alive() and not dog.expired  # blocked: nothing came
        dog.expire()
        reader.join(10)
        assert not reader.is_alive() and got == [b""]
        dog.watch(late_a)
        assert late_a.recv(10) == b""  # shut as soon as it was watched
    finally:
        for s in (a, b, late_a, late_b):
            s.close()


def test_the_deadline_counts_from_the_start_of_the_send() -> None:
    now = [100.0]
    dog = Watchdog(5, clock=lambda: now[0])
    assert dog.remaining() == 5
    now[0] = 103.5
    assert dog.remaining() == 1.5
    now[0] = 200
    assert dog.remaining() == 0


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"garbage\r\n\r\n", id="no-http"),
        pytest.param(HEAD + b"".join(b"X-%d: v\r\n" % i for i in range(101)) + b"\r\n",
                     id="101-headers"),
        pytest.param(HEAD + b"X-Big: " + b"a" * 100_000 + b"\r\n\r\n", id="100KB-header-line"),
        pytest.param(b"HTTP/1.1 abc Nope\r\n\r\n", id="bad-status"),
        pytest.param(b"", id="closed-at-once"),
    ],
)  # fmt: skip
def test_a_reply_that_is_no_http_is_a_failed_response(raw: bytes) -> None:
    with receiver() as rec:
        rec.raw = raw
        _took, got = post(rec)
        assert not got.ok and got.status is None and got.error


def test_an_invalid_url_is_a_failed_response() -> None:
    """What check_url would refuse, should it reach the sender anyway."""
    sender = HttpSender()
    for url in ("http://127.0.0.1:port/", "http://127.0.0.1/a b", "nope://x/"):
        got = sender.post(url, b"{}", {}, 1)
        assert not got.ok and got.status is None and got.error


def test_an_https_receiver_that_dribbles_is_cut_at_the_deadline_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same over TLS, past the handshake (which has a deadline of its own)."""
    try:
        ca, cert, key = make_certs(tmp_path)
    except FileNotFoundError:
        pytest.skip("no openssl to make a certificate")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # the sender's default context trusts it
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    with receiver(tls) as rec:
        rec.raw = b"HTTP/1.1 204 No Content\r\n\r\n"
        assert post(rec)[1].status == 204  # the TLS path works at all
        rec.raw = HEAD + b"X-Slow: " + b"a" * 1000 + b"\r\n\r\n"
        rec.dribble_s = 0.05
        took, got = post(rec, timeout_s=0.5)
        assert took < 10, f"held {took:.1f} s by a 0.5 s channel"
        assert not got.ok and got.status is None and "timed out" in got.error
