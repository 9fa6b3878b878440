"""The HTTP POST a delivery is, behind a small interface so tests and other
transports can pass their own (:class:`Sender`).

:class:`HttpSender` follows no redirect: a receiver that answers 3xx could
otherwise point our process at a host the allowlist never took (SSRF); a 3xx is
a failed attempt like any other non-2xx.

A send has one deadline, the channel's timeout, for the whole exchange.
urllib's ``timeout`` bounds each socket operation, not the request: a receiver
answering one byte a second would never trip it and would hold a notifier
thread for as long as it liked.  So a :class:`Watchdog` shuts the request's
socket down when the deadline passes, which ends any read or write blocked on
it.  (Name resolution happens before there is a socket and is not covered:
the resolver's own timeout bounds it.)

Whatever goes wrong in a send comes back as a failed :class:`Response`, never
as an exception: a reply that is no HTTP, 101 headers, a 100 KB header line...
each is one failed attempt, logged and retried like a refused connection.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

#: the characters of an error kept in a delivery's log line
ERROR_CHARS = 200


@dataclass(frozen=True, slots=True)
class Response:
    """What came back: the HTTP status (None: no answer) and a short error."""

    status: int | None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class Sender(Protocol):
    def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> Response: ...


class Watchdog:
    """One send's deadline: at ``timeout_s`` from now, every socket it watches is
    shut down (a read blocked on it returns at once), and so is any it is handed
    afterwards.  :meth:`expire` is what the timer calls; tests may call it."""

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s = timeout_s
        self.deadline = clock() + timeout_s
        self.expired = False
        self._clock = clock
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout_s, self.expire)
        self._timer.daemon = True

    def start(self) -> Watchdog:
        self._timer.start()
        return self

    def remaining(self) -> float:
        return max(0.0, self.deadline - self._clock())

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.append(sock)
            late = self.expired
        if late:
            _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            socks = list(self._socks)
        for sock in socks:
            _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # closed already, or never connected
        sock.shutdown(socket.SHUT_RDWR)


class _Request(urllib.request.Request):
    """A request that carries its watchdog to the connection that sends it."""

    watchdog: Watchdog


class _WatchedHTTPConnection(http.client.HTTPConnection):
    watchdog: Watchdog

    def connect(self) -> None:
        self.timeout = _connect_timeout(self.timeout, self.watchdog)
        super().connect()
        self.watchdog.watch(self.sock)


class _WatchedHTTPSConnection(http.client.HTTPSConnection):
    watchdog: Watchdog

    def connect(self) -> None:
        self.timeout = _connect_timeout(self.timeout, self.watchdog)
        super().connect()
        self.watchdog.watch(self.sock)


def _connect_timeout(given: float | None, dog: Watchdog) -> float:
    """What is left of the deadline (never 0, which would make the socket
    non-blocking: a connect then fails at once with no useful error)."""
    return max(0.001, min(given or dog.timeout_s, dog.remaining()))


def _watched(cls: type[http.client.HTTPConnection], dog: Watchdog) -> Any:
    def make(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
        conn = cls(*args, **kwargs)
        conn.watchdog = dog  # type: ignore[attr-defined]
        return conn

    return make


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: Any) -> Any:
        return self.do_open(_watched(_WatchedHTTPConnection, req.watchdog), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: Any) -> Any:
        return self.do_open(
            _watched(_WatchedHTTPSConnection, req.watchdog),
            req,
            context=self._context,  # type: ignore[attr-defined]
        )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class HttpSender:
    """POST with urllib, no redirects, the channel's timeout as one deadline."""

    def __init__(self) -> None:
        self._opener = urllib.request.build_opener(_NoRedirect, _HTTPHandler, _HTTPSHandler)

    def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> Response:
        dog = Watchdog(timeout_s)
        try:
            request = _Request(url, data=body, headers=dict(headers), method="POST")
            request.watchdog = dog
            dog.start()
            with self._opener.open(request, timeout=timeout_s) as answer:
                return Response(int(answer.status))
        except urllib.error.HTTPError as exc:
            exc.close()
            return Response(int(exc.code), f"HTTP {exc.code}")
        except Exception as exc:  # every failure of a send is a failed attempt, nothing else
            if dog.expired:
                return Response(None, f"timed out: no whole answer within {timeout_s:g} s")
            reason = getattr(exc, "reason", exc)
            return Response(None, f"{type(exc).__name__}: {reason}"[:ERROR_CHARS])
        finally:
            dog.cancel()
