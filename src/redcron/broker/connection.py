"""The broker's Redis client: a bad URL and an unreachable server become redcron
errors that name the URL (without its password) and the fix, not redis-py's
bare ``ValueError`` or ``ConnectionError`` from deep inside a call."""

from __future__ import annotations

import contextlib
import time
from typing import Any, cast
from urllib.parse import urlencode

import redis
import redis.client
import redis.connection
import redis.sentinel

from redcron.config import SENTINEL_SCHEME, SentinelURL, parse_sentinel_url
from redcron.errors import ConfigError, RedisUnavailable
from redcron.redact import masked_url

#: what a user can do about an unreachable Redis
FIX = (
    "is it running? `redcron up` starts one; or point --redis or REDCRON_REDIS_URL "
    "(App(redis_url=...) in Python) at yours"
)

#: failures to reach the server; AuthenticationError is a ConnectionError too,
#: but the server was reached and said no: that one keeps its own type
_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)


def unavailable(url: str, exc: BaseException) -> RedisUnavailable:
    """The error for ``exc`` raised talking to ``url``."""
    return RedisUnavailable(f"cannot reach Redis at {masked_url(url)} ({exc}): {FIX}")


def _reraise(url: str, exc: BaseException) -> None:
    if isinstance(exc, _UNREACHABLE) and not isinstance(exc, redis.AuthenticationError):
        raise unavailable(url, exc) from exc


class Pipeline(redis.client.Pipeline):
    """A pipeline whose ``execute`` raises :class:`RedisUnavailable`."""

    url = ""

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        try:
            return super().execute(raise_on_error)
        except _UNREACHABLE as exc:
            _reraise(self.url, exc)
            raise


class Client(redis.Redis):
    """``redis.Redis`` whose commands and pipelines raise :class:`RedisUnavailable`
    once redis-py's own retries have given up."""

    url = ""
    #: the sentinels a ``redis+sentinel://`` client asks (closed with it)
    sentinels: redis.sentinel.Sentinel | None = None
    _next_look = 0.0

    def follow_master(self) -> None:
        """A sentinel client: at most every :data:`MASTER_LOOK_S`, ask the sentinels
        where the master is; if it moved, idle connections to the old one are
        closed, and busy ones when they come back to the pool.

        redis-py asks only when it opens a connection, so a steady pool would keep
        writing to a demoted master until it turns read-only (after a forced
        failover, up to the sentinels' 10-second INFO period): writes it takes
        then are lost when it resyncs from the new master.
        """
        if self.sentinels is None:
            return
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + MASTER_LOOK_S
        # no sentinel answers: the command's own connection attempt will say so
        with contextlib.suppress(redis.RedisError):
            self.connection_pool.get_master_address()  # type: ignore[attr-defined]

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.follow_master()
        try:
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except _UNREACHABLE as exc:
            _reraise(self.url, exc)
            raise

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Pipeline:
        self.follow_master()
        pipe = Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        pipe.url = self.url
        return pipe

    def close(self) -> None:
        super().close()
        if self.sentinels is not None:
            self.sentinels.close()


def connect(url: str, **kwargs: Any) -> redis.Redis:
    """A client for ``url`` (no I/O yet: redis-py connects on first use).

    A ``redis+sentinel://`` URL gives a client of the master the sentinels name
    (redis-py's :meth:`~redis.sentinel.Sentinel.master_for`): each new
    connection asks them where the master is, and a connection to a master
    demoted by a failover is dropped (its READONLY reply becomes a
    ``ConnectionError``), so the caller's retry lands on the new master.

    Raises:
        ConfigError: redis-py refuses the URL.
    """
    try:
        if url.startswith(f"{SENTINEL_SCHEME}://"):
            client = _sentinel_master(parse_sentinel_url(url), kwargs)
        else:
            client = cast(Client, Client.from_url(url, **kwargs))
    except ValueError as exc:
        raise ConfigError(f"redis_url {masked_url(url)!r}: {exc}") from None
    client.url = url
    return client


#: how often a sentinel client checks that the master has not moved (seconds)
MASTER_LOOK_S = 1.0

#: how long a sentinel may take to answer "where is the master?" before the next
#: one is asked (redis-py's default is to wait forever)
SENTINEL_TIMEOUT = 2.0


def _sentinel_master(target: SentinelURL, kwargs: dict[str, Any]) -> Client:
    """The master client of a sentinel URL; ``kwargs`` and the URL's query fields
    (redis-py's URL options, e.g. ``socket_timeout``) go to the master connections."""
    # redis-py parses and types the query fields of its own URLs: borrow that
    query = f"redis://localhost/0?{urlencode(target.query)}"
    options: dict[str, Any] = redis.connection.parse_url(query)  # type: ignore[no-untyped-call]
    for name in ("host", "port", "db", "username", "password"):
        options.pop(name, None)
    options.update(kwargs)
    sentinel_kwargs: dict[str, Any] = {
        "socket_timeout": options.get("socket_timeout") or SENTINEL_TIMEOUT,
        "socket_connect_timeout": options.get("socket_connect_timeout") or SENTINEL_TIMEOUT,
    }
    if target.sentinel_password is not None:
        sentinel_kwargs["password"] = target.sentinel_password
    if target.sentinel_username is not None:
        sentinel_kwargs["username"] = target.sentinel_username
    sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels), sentinel_kwargs=sentinel_kwargs
    )
    client = cast(
        Client,
        sentinel.master_for(  # type: ignore[no-untyped-call]
            target.master,
            redis_class=Client,
            db=target.db,
            username=target.username,
            password=target.password,
            **options,
        ),
    )
    client.sentinels = sentinel
    return client
