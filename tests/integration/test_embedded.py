"""EmbeddedRedis against a real redis-server: start, crash, restart, config."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from redcron.embedded import EmbeddedRedis, find_redis_server
from redcron.errors import ConfigError


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    # fsync=always so a SIGKILL right after a write cannot lose it.
    srv = EmbeddedRedis(tmp_path / "data", fsync="always")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _client(srv: EmbeddedRedis, *, decode: bool = False) -> redis.Redis:
    return redis.Redis.from_url(srv.url, socket_timeout=5, decode_responses=decode)


def test_find_redis_server_returns_an_executable() -> None:
    path = find_redis_server()
    assert os.path.isfile(path)
    assert os.access(path, os.X_OK)


def test_start_ping_and_properties(server: EmbeddedRedis, tmp_path: Path) -> None:
    assert server.running()
    assert server.pid is not None
    assert server.url == f"redis://127.0.0.1:{server.port}/0"
    assert server.data_dir == (tmp_path / "data").resolve()
    client = _client(server)
    try:
        assert client.ping() is True
    finally:
        client.close()


def test_config_is_applied(server: EmbeddedRedis) -> None:
    client = _client(server, decode=True)
    try:
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
        assert client.config_get("save") == {"save": ""}
    finally:
        client.close()
    assert (server.data_dir / "redis.log").exists()


def test_data_survives_sigkill_via_aof(server: EmbeddedRedis) -> None:
    port, old_pid = server.port, server.pid
    client = _client(server)
    try:
        client.set("survivor", b"still here")
    finally:
        client.close()

    server.kill()
    assert not server.running()
    assert server.pid is None

    server.start()  # same port, immediately: redis sets SO_REUSEADDR
    assert server.port == port
    assert server.pid != old_pid
    client = _client(server)
    try:
        assert client.get("survivor") == b"still here"
    finally:
        client.close()


def test_restart_keeps_port_and_data(server: EmbeddedRedis) -> None:
    port = server.port
    client = _client(server)
    try:
        client.set("k", b"v")
    finally:
        client.close()
    server.restart()
    assert server.running()
    assert server.port == port
    client = _client(server)
    try:
        assert client.get("k") == b"v"
    finally:
        client.close()


def test_stop_and_kill_are_idempotent(server: EmbeddedRedis) -> None:
    server.stop()
    server.stop()
    server.kill()
    assert not server.running()
    assert server.pid is None


def test_context_manager(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path, appendonly=False) as srv:
        assert srv.running()
        client = _client(srv, decode=True)
        try:
            assert client.config_get("appendonly") == {"appendonly": "no"}
        finally:
            client.close()
    assert not srv.running()


def test_start_failure_reports_log_tail(tmp_path: Path) -> None:
    # Something else already listens on the port, so redis-server exits at once.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        srv = EmbeddedRedis(tmp_path, port=blocker.getsockname()[1])
        with pytest.raises(ConfigError, match=r"(?s)redis-server exited.*Address already in use"):
            srv.start(timeout=5)
    assert not srv.running()


def test_bad_fsync_raises(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="fsync"):
        EmbeddedRedis(tmp_path, fsync="no")
