"""The broker's Redis client: a bad URL and an unreachable server become redcron
errors that name the URL (without its password) and the fix, not redis-py's
bare ``ValueError`` or ``ConnectionError`` from deep inside a call."""

from __future__ import annotations

from typing import Any, cast

import redis
import redis.client

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

    def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except _UNREACHABLE as exc:
            _reraise(self.url, exc)
            raise

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Pipeline:
        pipe = Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        pipe.url = self.url
        return pipe


def connect(url: str, **kwargs: Any) -> redis.Redis:
    """A client for ``url`` (no I/O yet: redis-py connects on first use).

    Raises:
        ConfigError: redis-py refuses the URL.
    """
    try:
        client = cast(Client, Client.from_url(url, **kwargs))
    except ValueError as exc:
        raise ConfigError(f"redis_url {masked_url(url)!r}: {exc}") from None
    client.url = url
    return client
