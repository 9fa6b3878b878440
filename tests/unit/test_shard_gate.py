"""ShardGate: on a Redis Cluster a master that is down fails only its own shards,
so the worker's and the beat's loops leave those shards alone for a doubling
delay and go on with the others (times passed in, no sleeping); and a node's
connection failure among a cluster pipeline's replies is raised."""

from __future__ import annotations

import logging

import pytest
import redis

from redcron.engine.connection import raise_unreachable
from redcron.engine.retry import Outage, ShardGate
from redcron.errors import ConnectionLost

DOWN = ConnectionLost("connection refused")


def test_a_failed_shard_is_left_alone_for_its_delay_and_the_others_stay_open() -> None:
    gate = ShardGate(0.1, 2.0)
    gate.failed(3, DOWN, "lease", now=10.0)
    assert gate.open([1, 2, 3, 4], now=10.05) == [1, 2, 4]
    assert gate.open([1, 2, 3, 4], now=10.1) == [1, 2, 3, 4]  # due its retry
    assert gate.failing == {3}
    assert gate.wait(now=10.05) == pytest.approx(0.05)


def test_delays_double_per_shard_up_to_the_cap_and_ok_clears() -> None:
    gate = ShardGate(0.1, 0.4)
    reopen = []
    now = 0.0
    for _ in range(5):
        gate.failed(7, DOWN, "heartbeat", now)
        reopen.append(round(gate.wait(now), 3))
    assert reopen == [0.1, 0.2, 0.4, 0.4, 0.4]
    gate.failed(8, DOWN, "heartbeat", now)
    assert gate.wait(now) == pytest.approx(0.1)  # shard 8's own delay starts at first
    gate.ok(7)
    gate.ok(8)
    assert gate.failing == frozenset()
    assert gate.wait(now) == 0.0
    gate.failed(7, DOWN, "heartbeat", now)
    assert gate.wait(now) == pytest.approx(0.1)  # started over


def test_every_shard_failing_is_one_outage_whose_end_is_logged_once_all_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("redcron.test.gate")
    gate = ShardGate(0.1, 2.0, Outage(log, "worker w1"))
    with caplog.at_level(logging.INFO, logger=log.name):
        for shard in range(4):
            gate.failed(shard, DOWN, "lease", now=0.0)
        assert gate.open([0, 1, 2, 3], now=0.0) == []
        gate.ok(0)
        gate.ok(1)
        assert [r.levelname for r in caplog.records] == ["WARNING"]  # 2 and 3 still fail
        gate.ok(2)
        gate.ok(3)
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]
    assert caplog.messages[0].startswith("worker w1: lease on shard 0 failed")


def test_a_connection_error_among_pipeline_replies_is_raised_not_returned() -> None:
    # redis-py's cluster pipeline (raise_on_error=False) puts a node's
    # ConnectionError in place of its replies; the lease loop iterated one and died
    raise_unreachable([1, redis.ResponseError("WRONGTYPE"), None])  # refusals stay replies
    with pytest.raises(ConnectionLost, match="refused"):
        raise_unreachable([1, redis.ConnectionError("Error 111 connecting. Connection refused.")])
    with pytest.raises(ConnectionLost):
        raise_unreachable([redis.TimeoutError("timed out")])


def test_a_failure_closes_every_shard_of_the_same_node() -> None:
    # a master down costs one failed call per delay, not one per shard it serves
    node_of = {0: "a", 1: "b", 2: "a", 3: "b", 4: "a"}
    gate = ShardGate(0.1, 2.0, siblings=lambda s: [x for x in node_of if node_of[x] == node_of[s]])
    gate.failed(2, DOWN, "lease", now=0.0)
    assert gate.failing == {0, 2, 4}
    assert gate.open([0, 1, 2, 3, 4], now=0.05) == [1, 3]
    gate.ok(0)
    assert gate.failing == {2, 4}  # each answers for itself when tried again


def test_due_says_when_one_shard_is_tried_again() -> None:
    gate = ShardGate(0.5, 2.0)
    assert gate.due(3, now=10.0) == 0.0  # open
    gate.failed(3, DOWN, "enqueue", now=10.0)
    assert gate.due(3, now=10.2) == pytest.approx(0.3)
    assert gate.due(3, now=11.0) == 0.0
    assert gate.due(4, now=10.2) == 0.0
