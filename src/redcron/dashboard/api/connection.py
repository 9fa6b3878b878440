"""Is the client of this request still there, and did it get the reply?

A long-polling lease must not take work for a client that has hung up: the
attempt would sit ``running`` on nobody until its lease expired, one attempt
spent.  Two tools for that:

* :func:`client_gone` asks the WSGI server.  Under waitress (what ``redcron
  dashboard`` serves with) that is ``environ["waitress.client_disconnected"]``,
  which waitress keeps up to date only while it reads the connection during a
  request: ``channel_request_lookahead`` ≥ 1 (``cli/dashboard.py`` sets it;
  set it too if you serve ``create_app`` with waitress yourself).  Under a
  server that hands over its socket (Werkzeug's, ``werkzeug.socket``), a
  non-blocking peek tells: end of stream or a reset means gone.  Waitress
  without the lookahead: the same peek on the socket of the channel that owns
  the flag (not a documented attribute, so only a fallback).  Any other
  server: assumed connected.
* :class:`UnlessSent` wraps a reply body: if the server closes it before the
  body was written (waitress does when the client is gone: its write raises,
  and it closes the iterable), a callback runs, which hands the leases back.
  A write the kernel accepted for a peer that has already gone cannot be seen
  at this layer: such a lease expires as any lost worker's does.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: the WSGI environ key waitress sets to a callable: True once the client is gone
WAITRESS_DISCONNECTED = "waitress.client_disconnected"
#: the WSGI environ key Werkzeug's server sets to the connection's socket
WERKZEUG_SOCKET = "werkzeug.socket"


def client_gone(environ: dict[str, Any]) -> bool:
    """True when the server knows this request's client has disconnected."""
    check = environ.get(WAITRESS_DISCONNECTED)
    if callable(check) and check():
        return True
    sock = environ.get(WERKZEUG_SOCKET)
    if sock is None:
        # waitress without channel_request_lookahead never turns its flag; the flag's
        # owner, its channel, holds the socket, which nobody reads meanwhile: peek it
        sock = getattr(getattr(check, "__self__", None), "socket", None)
    return isinstance(sock, socket.socket) and peer_closed(sock)


def peer_closed(sock: socket.socket) -> bool:
    """Has the peer closed ``sock``?  Peeks without blocking and without taking any
    byte a later read would want (a pipelined request stays where it is)."""
    try:
        data = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False  # nothing to read: still there
    except OSError:
        return True  # reset, or the socket is closed already
    return data == b""


class UnlessSent:
    """A WSGI body that calls ``on_unsent`` if it is closed before it was all written.

    A server writes each chunk before it asks for the next one, so the body
    counts as sent once the server asks for more after the last chunk.
    """

    def __init__(self, chunks: Iterable[bytes], on_unsent: Callable[[], None]) -> None:
        self._chunks = chunks
        self._on_unsent: Callable[[], None] | None = on_unsent
        self.sent = False

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks
        self.sent = True

    def close(self) -> None:
        on_unsent, self._on_unsent = self._on_unsent, None
        if on_unsent is not None and not self.sent:
            on_unsent()
