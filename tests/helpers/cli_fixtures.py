"""Fixtures for tests that drive the CLI against the test server.  A module
takes them with ``from cli_fixtures import prefix_fixture, invoke_fixture``
(pytest registers them as ``prefix``, ``invoke`` and ``app``); ``tests/helpers`` is on
``sys.path`` (see ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner, Result

from redcron import App
from redcron.cli.main import main

#: ``invoke("jobs", "list")`` runs ``redcron jobs list --redis <test server>``
Invoke = Callable[..., Result]


@pytest.fixture(name="prefix")
def prefix_fixture(key_prefix: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's key prefix, also in REDCRON_PREFIX (and no REDCRON_REDIS_URL),
    so CLI commands and apps built without arguments use the test's keys."""
    p = key_prefix.rstrip(":")
    monkeypatch.setenv("REDCRON_PREFIX", p)
    monkeypatch.delenv("REDCRON_REDIS_URL", raising=False)
    return p


@pytest.fixture(name="invoke")
def invoke_fixture(redis_url: str, prefix: str) -> Invoke:
    """Run ``redcron ARGS... --redis <test server>`` (``redis=`` for another URL)."""

    def run(*args: str, redis: str | None = None) -> Result:
        return CliRunner().invoke(main, [*args, "--redis", redis or redis_url])

    return run


@pytest.fixture(name="app")
def app_fixture(redis_url: str, prefix: str) -> Iterator[App]:
    """A bare App on the test server under the test's prefix."""
    a = App(redis_url, prefix=prefix)
    yield a
    a.close()
