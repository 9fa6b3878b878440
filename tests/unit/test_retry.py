"""Backoff: the retry delays every Redis loop of the worker and the beat uses."""

from __future__ import annotations

import logging

import pytest
import redis

from redcron.broker.retry import TRANSIENT, Backoff
from redcron.errors import ConnectionLost


def test_delays_double_up_to_the_cap_and_reset_starts_over() -> None:
    backoff = Backoff(0.1, 1.0)
    err = ConnectionLost("gone")
    assert [backoff.failed(err, "lease") for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.reset()
    assert backoff.failed(err, "lease") == 0.1


def test_a_fixed_delay_is_first_equal_to_cap() -> None:
    backoff = Backoff(1.0, 1.0)
    assert {backoff.failed(OSError("refused"), "tick") for _ in range(3)} == {1.0}


def test_failed_logs_what_failed_why_and_the_wait(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("redcron.test.backoff")
    with caplog.at_level(logging.WARNING, logger=log.name):
        Backoff(0.1, 5.0, log).failed(ConnectionLost("connection refused"), "report")
    assert caplog.messages == ["report failed (connection refused); retrying in 0.1s"]


def test_transient_covers_redis_broker_and_socket_errors() -> None:
    for exc in (redis.ConnectionError("x"), ConnectionLost("x"), ConnectionResetError()):
        assert isinstance(exc, TRANSIENT)
    assert not isinstance(ValueError("x"), TRANSIENT)
