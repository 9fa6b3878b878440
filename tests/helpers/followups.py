"""Apply follow-ups in tests: what maintenance does within its interval after a
script ends attempts or runs (docs/architecture.md, "Follow-ups beside the hot
path").  A test that reads what only reacts to an end (counters, histograms,
breakers, events, chained and buffered runs, retention) calls :func:`follow`
first, as a deployment's workers and beats would within the interval."""

from __future__ import annotations

from typing import Any


def follow(owner: Any, shards: list[int] | None = None) -> int:
    """Apply every follow-up entry of ``shards`` (all: None) of ``owner`` (an App,
    a Broker or anything with ``.broker``); the number of entries applied."""
    broker = getattr(owner, "broker", owner)
    n = 0
    for shard in range(broker.shards) if shards is None else shards:
        while True:
            applied, left = broker.maintenance.follow_up(shard)
            n += applied
            if not left:
                break
    return n
