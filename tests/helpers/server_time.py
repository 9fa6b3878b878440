"""The Redis server's clock, as the scripts read it (ms), for tests that compare
against what a script stamped.  Imported by name (``tests/helpers`` is on
``sys.path``, see ``tests/conftest.py``)."""

from __future__ import annotations

from typing import Any


def server_ms(client: Any) -> int:
    """Server TIME in ms; ``client`` is a redis client, a broker or an app."""
    for attr in ("broker", "client"):  # an app has a broker, a broker a client
        if not hasattr(client, "time"):
            client = getattr(client, attr, client)
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def server_ms_after(client: Any, ms: int) -> int:
    """The server clock once it is past ``ms`` (polled, no sleep: at most a
    millisecond of round trips), for work that must be stamped a later ms by
    the server itself: a stream entry id, which no explicit ``now`` sets."""
    now = server_ms(client)
    while now <= ms:
        now = server_ms(client)
    return now
