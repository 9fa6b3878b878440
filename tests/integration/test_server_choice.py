"""The session server is the binary ``REDCRON_TEST_REDIS_SERVER`` asked for
(tests/helpers/redis_binary.py), so a run meant for Redis 6.2 or Valkey cannot
pass on another server unnoticed.  ``make test`` runs this with each of them."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import redis
from redis_binary import redis_server_path  # tests/helpers


def _binary_version(binary: str) -> str:
    """``v=`` of ``--version``: "Redis server v=7.0.15 ..." or "Valkey server v=9.1.2 ..."."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"\bv=(\S+)", out)
    assert found, out
    return found.group(1)


def test_the_session_server_is_the_one_asked_for(r: redis.Redis) -> None:
    if os.environ.get("REDCRON_TEST_REDIS_URL"):
        pytest.skip("REDCRON_TEST_REDIS_URL is set: a server we did not start")
    info = r.info("server")
    # Valkey reports its own version in valkey_version; its redis_version is the
    # Redis it is compatible with (7.2.4 on Valkey 9.1)
    version = str(info.get("valkey_version") or info["redis_version"])
    assert version == _binary_version(redis_server_path())
    if os.environ.get("REDCRON_TEST_REDIS_SERVER") == "valkey":
        assert info.get("server_name") == "valkey"
        assert version.startswith("9.")
    elif os.environ.get("REDCRON_TEST_REDIS_SERVER") == "wheel":
        assert "valkey_version" not in info
        assert version.startswith("6.2.")
