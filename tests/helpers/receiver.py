"""A webhook receiver on 127.0.0.1 for the notification tests: an
``http.server`` in a thread that records every request and answers with the
statuses it is told (then 200), optionally holding a request until released,
or with raw bytes instead of a response (garbage, odd headers), optionally one
byte at a time (a receiver that dribbles)."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from redcron import App


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    url: str = ""
    got: list[Received] = field(default_factory=list)
    #: statuses to answer, in order; 200 once it runs out
    statuses: list[int] = field(default_factory=list)
    #: while set, a request is recorded, then held until ``release`` is set
    hold: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: when set, every request is answered with these bytes instead of a response
    raw: bytes | None = None
    #: with ``raw``: seconds between its bytes (0: all at once); the dribble stops
    #: when the client goes away or ``release`` is set
    dribble_s: float = 0.0
    #: when the client went away in the middle of a dribble (time.monotonic())
    dropped_at: list[float] = field(default_factory=list)


@contextmanager
def receiver(tls: ssl.SSLContext | None = None) -> Iterator[Receiver]:
    """A receiver; with ``tls`` (a server context), an https one."""
    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with rec.lock:
                rec.got.append(Received(self.path, dict(self.headers.items()), body))
                status = rec.statuses.pop(0) if rec.statuses else 200
            if rec.raw is not None:
                self._answer_raw(rec.raw)
                return
            if rec.hold.is_set():
                rec.release.wait(30)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _answer_raw(self, raw: bytes) -> None:
            self.close_connection = True
            try:
                if not rec.dribble_s:
                    self.wfile.write(raw)
                    return
                for i in range(len(raw)):
                    if rec.release.wait(rec.dribble_s):
                        return
                    self.wfile.write(raw[i : i + 1])
                    self.wfile.flush()
            except OSError:
                rec.dropped_at.append(time.monotonic())

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    scheme = "https" if tls is not None else "http"
    rec.url = f"{scheme}://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        rec.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(name="rec")
def rec_fixture() -> Iterator[Receiver]:
    """A receiver for one test (import it: ``from receiver import rec_fixture``)."""
    with receiver() as r:
        yield r


@pytest.fixture(name="app")
def notify_app_fixture(redis_url: str, key_prefix: str) -> Iterator[App]:
    """An App under the test's prefix whose channels may name the loopback host."""
    a = App(redis_url, prefix=key_prefix.rstrip(":"), notify_allow_hosts="127.0.0.1")
    yield a
    a.close()
