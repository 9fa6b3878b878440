"""Shared fixtures: every test that touches Redis talks to a real server.

The session server is an :class:`~redcron.embedded.EmbeddedRedis` on a free
port, or the server named by ``REDCRON_TEST_REDIS_URL``. Tests never flush:
each gets its own key prefix, and its keys are deleted afterwards.
"""

from __future__ import annotations

import os
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pytest
import redis
from hypothesis import settings

from redcron.embedded import EmbeddedRedis

# Modules shared between test directories (there is no __init__.py in tests/), imported
# by name: ``chaos_app`` in tests/apps, worker-process helpers in tests/helpers.
_TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(_TESTS / "apps"), str(_TESTS / "helpers")]
from redis_binary import chosen_redis_server  # noqa: E402  (tests/helpers, on the path above)

# Property tests explore new inputs on every local run (a failure found there
# becomes an @example); under CI they replay a fixed sequence, so a build is
# never refused for an input no change of its own brought in.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


class RedisServer(Protocol):
    """What tests may do with the session server."""

    can_restart: bool

    @property
    def url(self) -> str: ...
    def running(self) -> bool: ...
    def start(self, timeout: float = 10.0) -> None: ...
    def stop(self, timeout: float = 10.0) -> None: ...
    def kill(self) -> None: ...
    def restart(self) -> None: ...


class ExternalRedis:
    """A server we did not start, so we must not stop, kill or restart it."""

    can_restart = False

    def __init__(self, url: str) -> None:
        self._url = url

    @property
    def url(self) -> str:
        return self._url

    def running(self) -> bool:
        return True

    def _refuse(self) -> None:
        pytest.skip("REDCRON_TEST_REDIS_URL is set: the server cannot be stopped or restarted")

    def start(self, timeout: float = 10.0) -> None:
        self._refuse()

    def stop(self, timeout: float = 10.0) -> None:
        self._refuse()

    def kill(self) -> None:
        self._refuse()

    def restart(self) -> None:
        self._refuse()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The session's Redis server; chaos tests may kill and restart it."""
    url = os.environ.get("REDCRON_TEST_REDIS_URL")
    if url:
        yield ExternalRedis(url)
        return
    server = EmbeddedRedis(
        tmp_path_factory.mktemp("redis"), appendonly=True, binary=chosen_redis_server()
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The server's URL; restarts it first if an earlier test left it down."""
    if redis_server.can_restart and not redis_server.running():
        redis_server.start()
    return redis_server.url


@pytest.fixture
def key_prefix(redis_server: RedisServer) -> Iterator[str]:
    """A unique key prefix; every key under it is deleted after the test."""
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    yield prefix
    if not redis_server.running():
        return
    client = redis.Redis.from_url(redis_server.url, socket_connect_timeout=2, socket_timeout=5)
    try:
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{prefix}*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                client.unlink(*batch)
                batch.clear()
        if batch:
            client.unlink(*batch)
    except (redis.ConnectionError, redis.TimeoutError):
        pass  # the test left the server down or unreachable: nothing to clean
    finally:
        client.close()


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A bytes client (decode_responses=False) on the session server."""
    client = redis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Write a module into a fresh cwd; returns its (unique) name."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    names: list[str] = []

    def write(source: str) -> str:
        name = f"rc_mod_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        names.append(name)
        return name

    yield write
    for name in names:
        sys.modules.pop(name, None)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A redis-server of the test's own (AOF on), for tests that stop and start
    it again on the same port and data: never the session server."""
    server = EmbeddedRedis(tmp_path / "own-redis", appendonly=True, binary=chosen_redis_server())
    server.start()
    try:
        yield server
    finally:
        server.stop()
