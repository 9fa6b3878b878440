"""Notifications on a 3-master cluster (12 shards): channels, routing from every
shard's events stream, the digest and the retry all run in their own slots
(each channel's keys share its hash tag, each stream its shard's)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from receiver import (  # tests/helpers
    Receiver,
    rec_fixture,  # noqa: F401 (the rec fixture)
)
from server_time import server_ms  # tests/helpers

from redcron import App
from redcron.keys import shard_of
from redcron.notify import Notifier
from redcron.notify.signing import DELIVERY_HEADER
from redcron.store import ChannelStore


@pytest.fixture
def napp(cluster_url: str, cprefix: str) -> Iterator[App]:
    a = App(cluster_url, prefix=cprefix, shards=12, notify_allow_hosts="127.0.0.1")
    yield a
    a.close()


def test_events_of_every_shard_reach_the_admin_channel_once(napp: App, rec: Receiver) -> None:
    channels = ChannelStore(napp.broker)
    info, _ = channels.add(None, "webhook", rec.url, events=["run_failed", "dead_lettered"])
    tenants = [f"t{i}" for i in range(40)]
    assert len({shard_of(t, 12) for t in tenants}) == 12
    b = napp.broker
    for t in tenants:
        shard = shard_of(t, 12)
        base = {"tenant": t, "job": "j", "at": 1}
        b.client.xadd(b.keys.events(shard), {**base, "type": "run_failed", "run": f"{shard}-j@1"})
        b.client.xadd(
            b.keys.events(shard),
            {**base, "type": "dead_lettered", "run": "", "detail": json.dumps({"error": t})},
        )
    rec.statuses = [500]
    n = Notifier(napp, claim_idle_ms=0)
    try:
        now = server_ms(napp)
        for i in range(8):  # 10 a channel a pass
            n.step(now + i * 3_600_000)
    finally:
        n.pool.shutdown(wait=True)
    got = [r.json() for r in rec.got]
    delivered = {r.headers[DELIVERY_HEADER] for r in rec.got}
    assert len(delivered) == 41  # 40 runs failed + one digest; one of them sent twice (the 500)
    assert len(got) == 42
    digest = next(g for g in got if g["type"] == "dead_lettered")
    assert digest["count"] == 40
    assert channels.pending(info.id) == 0
    assert [d.outcome for d in channels.deliveries(info.id)].count("delivered") == 41
