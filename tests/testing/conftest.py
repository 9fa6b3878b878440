"""Fixtures of the testing mode's tests.

``test_helpers.py`` and ``test_docs.py`` need no Redis server: that is the
point of the testing mode.  ``test_parity.py`` runs the same scenarios on the
testing mode and on the session's real server (``redis_url`` from
tests/conftest.py), through :class:`RealTwin`: the TestApp's own helpers on a
real broker whose scripts read the test clock from a key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from redcron.config import Settings
from redcron.engine import Broker
from redcron.engine.core import ACKED
from redcron.errors import ConfigError
from redcron.testing import TestApp
from redcron.testing.fakeserver import check_supported

try:
    check_supported()
except ConfigError as exc:  # fail, not skip: make test installs the extra
    raise pytest.UsageError(f"tests/testing: {exc}") from None

#: lib/clock.lua's read of the server clock, as the scripts carry it
SERVER_CLOCK = (
    "  local t = redis.call('TIME')\n"
    "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
)
#: what the real twin's scripts read instead: the test clock, from a key of
#: the shard (KEYS[1] is the shard prefix, so the key shares its hash tag)
KEY_CLOCK = "  return tonumber(redis.call('GET', KEYS[1] .. ':testclock'))\n"


class RealTwin(TestApp):
    """A TestApp whose broker is on a real Redis server.

    Redis's clock cannot be set, so the twin's scripts read "now" from a key
    the twin writes whenever its test clock moves, and ``server_ms()`` (the
    beat's now) is the test clock.  Everything else (the scripts' logic, the
    drain, the beat's tick, the serializer) is what the testing mode runs.
    Not covered: what Redis itself times (key TTLs, stream idle times), which
    stay on the real clock; the scenarios do not depend on them.
    """

    url = ""

    def _connect(self, settings: Settings) -> Broker:
        client = redis.Redis.from_url(self.url)
        broker = Broker(dataclasses.replace(settings, redis_url=self.url), client=client)
        scripts: Any = broker.scripts
        for name, script in list(scripts._scripts.items()):
            source = script.script
            assert source.count(SERVER_CLOCK) <= 1, name
            scripts._scripts[name] = client.register_script(source.replace(SERVER_CLOCK, KEY_CLOCK))
        broker._acked = frozenset(broker.scripts.script(n).sha for n in ACKED)
        clock = self.clock
        broker.server_ms = lambda: clock.ms  # type: ignore[method-assign]
        moved = clock.set_ms

        def set_ms(ms: int) -> None:
            moved(ms)
            self._write_clock(broker)

        clock.set_ms = set_ms  # type: ignore[method-assign]
        self._write_clock(broker)
        return broker

    def _write_clock(self, broker: Broker) -> None:
        shards = broker.settings.shards or 1
        for shard in range(shards):
            broker.client.set(f"{broker.keys.shard(shard)}:testclock", self.clock.ms)


Make = Callable[..., TestApp]


@pytest.fixture
def make_fake() -> Iterator[Make]:
    """TestApp(**kwargs), closed after the test."""
    made: list[TestApp] = []

    def make(**kwargs: Any) -> TestApp:
        app = TestApp(**kwargs)
        made.append(app)
        return app

    yield make
    for app in made:
        app.close()


@pytest.fixture
def make_real(redis_url: str, key_prefix: str) -> Iterator[Make]:
    """The same helpers on the session's real server, under the test's prefix."""
    made: list[TestApp] = []

    def make(**kwargs: Any) -> TestApp:
        twin = type("Twin", (RealTwin,), {"url": redis_url})
        app: TestApp = twin(prefix=f"{key_prefix}{len(made)}", **kwargs)
        made.append(app)
        return app

    yield make
    for app in made:
        app.close()
