"""A beat owning several shards fires them in turns, a schedule page each, so
that a burst due on every shard fires on all of them together: before, each
shard fired all its due jobs before the next one's first (``bench midnight``
on a 12-shard cluster: the tenants of the last shard waited for every other
shard's fires; Jain 0.07 of starts per tenant)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from beats import runs_of  # tests/helpers

from redcron import App
from redcron.beat.beat import TURN_PAGES, Beat
from redcron.engine.argv import FireArgs
from redcron.engine.beat import BeatStore
from redcron.keys import shard_of
from redcron.model.jobs import JobSpec, Task


def test_due_jobs_of_two_shards_fire_in_turns(
    redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = App(redis_url, prefix=key_prefix.rstrip(":"), shards=2)
    try:
        tenant = {shard_of(f"t{i}", 2): f"t{i}" for i in range(8)}
        # one fire time 5 s ago (within the catch-up window: fired, once)
        target = (app.jobs.server_now() - timedelta(seconds=5)).replace(microsecond=0)
        cron = f"{target.second} {target.minute} {target.hour} * * *"
        specs = [
            JobSpec(name=f"j{s}{i}", tenant=tenant[s], cron=cron, tasks={"t": Task("noop")})
            for s in (0, 1)
            for i in range(2 * TURN_PAGES)
        ]
        changes = app.jobs.put_many(
            specs, now=target - timedelta(seconds=1), allow_unregistered=True
        )
        calls: list[int] = []
        real = BeatStore.fire

        def fire(self: BeatStore, shard: int, fires: Sequence[FireArgs]) -> list[Any]:
            calls.append(shard)
            return real(self, shard, fires)

        monkeypatch.setattr(BeatStore, "fire", fire)
        beat = Beat(app, name="b1", batch=1, apply_declared=False)
        beat.tick()
        beat.close()
        # TURN_PAGES pages of one row each, then the other shard's turn, then back
        assert calls[: 2 * TURN_PAGES] == [0] * TURN_PAGES + [1] * TURN_PAGES
        assert 0 in calls[2 * TURN_PAGES :] and 1 in calls[2 * TURN_PAGES :]
        assert all(len(runs_of(app, c.id)) == 1 for c in changes)
    finally:
        app.close()
