"""The task bodies the Python peers' workers run, alike for every system: one
INCR of ``<ns>:bench:counter`` on the executing thread's own connection (as
``bench.incr`` in redcron/cli/bench/fixtures.py), nothing, or an RPUSH of the start time.

The worker learns the Redis URL and namespace from RCBENCH_URL and RCBENCH_NS,
read when a body first runs (never at import).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import redis

_local = threading.local()
_async_clients: dict[int, Any] = {}


def _client() -> redis.Redis:
    client: redis.Redis | None = getattr(_local, "client", None)
    if client is None:
        client = _local.client = redis.Redis.from_url(
            os.environ["RCBENCH_URL"], single_connection_client=True
        )
    return client


def _ns() -> str:
    return os.environ["RCBENCH_NS"]


def incr() -> None:
    _client().incr(f"{_ns()}:bench:counter")


def noop() -> None:
    return None


def now() -> None:
    started = time.time()
    _client().rpush(f"{_ns()}:bench:stamps", repr(started))


def _async_client() -> Any:
    """An asyncio client for the event loop's thread (arq runs its jobs as
    coroutines on one thread: that thread's own connections)."""
    import redis.asyncio

    key = threading.get_ident()
    client = _async_clients.get(key)
    if client is None:
        client = _async_clients[key] = redis.asyncio.Redis.from_url(os.environ["RCBENCH_URL"])
    return client


async def aincr(ctx: dict[str, Any]) -> None:
    await _async_client().incr(f"{_ns()}:bench:counter")


async def anoop(ctx: dict[str, Any]) -> None:
    return None


async def anow(ctx: dict[str, Any]) -> None:
    started = time.time()
    await _async_client().rpush(f"{_ns()}:bench:stamps", repr(started))


SYNC = {"incr": incr, "noop": noop, "now": now}
