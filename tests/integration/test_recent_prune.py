"""Maintenance walks each shard's ``recent`` index (the one ``task list``
reads) and drops ids whose instance hash expired, so the index holds about
the retained instances instead of growing to its cap (``bench soak``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from redcron import App
from redcron.keys import shard_of


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[App]:
    a = App(redis_url, prefix=key_prefix.rstrip(":"), shards=1)

    @a.task(name="p.t")
    def t() -> None:
        return None

    yield a
    a.close()


def test_prune_drops_expired_ids_a_window_at_a_time(app: App) -> None:
    broker = app.broker
    ids = [app.tasks["p.t"].enqueue().id for _ in range(7)]
    shard = shard_of("default", broker.shards)
    expired = ids[1::2]  # as if their retention ran out
    broker.client.delete(*[broker.keys.ti(shard, i) for i in expired])
    recent = broker.keys.recent(shard)
    assert broker.client.zcard(recent) == 7

    dropped = [broker.maintenance.prune_recent(shard, batch=3) for _ in range(4)]
    assert sum(dropped) == 3
    left = {m.decode() for m in broker.client.zrange(recent, 0, -1)}
    assert left == set(ids) - set(expired)
    # the cursor wrapped: a further pass over live ids drops nothing and keeps walking
    assert broker.maintenance.prune_recent(shard, batch=3) == 0


def test_maintenance_prunes_the_index(app: App) -> None:
    broker = app.broker
    ids = [app.tasks["p.t"].enqueue().id for _ in range(3)]
    broker.client.delete(*[broker.keys.ti(0, i) for i in ids[:2]])
    broker.maintenance.maintain(0)
    assert [m.decode() for m in broker.client.zrange(broker.keys.recent(0), 0, -1)] == ids[2:]


def test_maintenance_prunes_a_shard_every_few_seconds_not_every_pass(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redcron.engine import maintenance

    broker = app.broker
    now = [1_000.0]
    monkeypatch.setattr(maintenance.time, "monotonic", lambda: now[0])
    ids = [app.tasks["p.t"].enqueue().id for _ in range(2)]
    recent = broker.keys.recent(0)
    broker.maintenance.maintain(0)  # the first pass prunes (nothing has expired yet)
    broker.client.delete(broker.keys.ti(0, ids[0]))
    now[0] += maintenance.PRUNE_EVERY_S / 2
    broker.maintenance.maintain(0)  # too soon: the expired id stays
    assert broker.client.zcard(recent) == 2
    now[0] += maintenance.PRUNE_EVERY_S / 2
    broker.maintenance.maintain(0)
    assert [m.decode() for m in broker.client.zrange(recent, 0, -1)] == ids[1:]
