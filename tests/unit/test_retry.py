"""Backoff: the retry delays every Redis loop of the worker and the beat uses."""

from __future__ import annotations

import logging

import pytest
import redis
import redis.exceptions

from redcron.engine.retry import TRANSIENT, Backoff, Outage, is_unavailable
from redcron.errors import ConnectionLost, RedisUnavailable


def test_delays_double_up_to_the_cap_and_reset_starts_over() -> None:
    backoff = Backoff(0.1, 1.0)
    err = ConnectionLost("gone")
    assert [backoff.failed(err, "lease") for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.reset()
    assert backoff.failed(err, "lease") == 0.1


def test_a_fixed_delay_is_first_equal_to_cap() -> None:
    backoff = Backoff(1.0, 1.0)
    assert {backoff.failed(OSError("refused"), "tick") for _ in range(3)} == {1.0}


def test_failed_logs_what_failed_and_why(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("redcron.test.backoff")
    with caplog.at_level(logging.WARNING, logger=log.name):
        Backoff(0.1, 5.0, log).failed(ConnectionLost("connection refused"), "report")
    assert caplog.messages == [
        "report failed (connection refused); retrying with back-off until Redis answers"
    ]


def test_an_outage_is_one_warning_and_one_info_however_many_loops_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("redcron.test.outage")
    outage = Outage(log, "worker w1")
    lease, report = Backoff(0.1, 5.0, log, outage), Backoff(0.1, 5.0, log, outage)
    with caplog.at_level(logging.INFO, logger=log.name):
        for _ in range(5):
            lease.failed(ConnectionLost("refused"), "lease")
            report.failed(ConnectionLost("refused"), "report")
        assert outage.down
        lease.reset()
        report.reset()
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]
    assert caplog.messages[0].startswith("worker w1: lease failed (refused)")
    assert caplog.messages[1].startswith("worker w1: Redis answers again after ")
    assert caplog.messages[1].endswith("(10 failed tries)")
    assert not outage.down


def test_transient_covers_redis_broker_and_socket_errors() -> None:
    for exc in (redis.ConnectionError("x"), ConnectionLost("x"), ConnectionResetError()):
        assert isinstance(exc, TRANSIENT)
    assert not isinstance(ValueError("x"), TRANSIENT)


def test_unavailable_is_an_outage_not_a_refusal() -> None:
    """What the dashboard answers 503 (tests/integration/test_dashboard_outage.py)."""
    for exc in (
        redis.ConnectionError("x"),
        redis.TimeoutError("x"),
        redis.BusyLoadingError("Redis is loading the dataset in memory"),
        redis.ReadOnlyError("You can't write against a read only replica."),
        redis.exceptions.MasterDownError("Link with MASTER is down"),
        ConnectionLost("x"),
        RedisUnavailable("cannot reach Redis"),
    ):
        assert is_unavailable(exc), exc
    for exc in (
        redis.AuthenticationError("invalid password"),
        redis.exceptions.AuthorizationError("NOPERM"),
        redis.ResponseError("WRONGTYPE"),
        ValueError("x"),
    ):
        assert not is_unavailable(exc), exc
