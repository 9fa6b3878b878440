"""Fixtures for the Lua script tests; the helpers themselves are in ``lua_ops.py``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from lua_ops import Ops

from redcron.config import Settings
from redcron.engine import Broker


@pytest.fixture
def broker(redis_url: str, key_prefix: str) -> Iterator[Broker]:
    """A one-shard broker under the test's key prefix (``test_scripts.py`` overrides it)."""
    b = Broker(Settings(redis_url=redis_url, prefix=key_prefix.rstrip(":"), min_lease_ttl=0.1))
    b.ensure_meta()
    yield b
    b.close()


@pytest.fixture
def ops(broker: Broker) -> Ops:
    """Script calls on shard 0 of ``broker``, starting at ``lua_ops.T0``."""
    return Ops(broker)
