"""The chaos runner's submissions: a shard whose enqueue fails (on a cluster, its
master is down) keeps its row groups, in order, and the other shards' go on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from redcron.app import App
from redcron.chaos.submissions import Submissions
from redcron.chaos.tally import Tally
from redcron.engine import EnqueueRow, ShardGate
from redcron.errors import RedisUnavailable


class Enqueuer:
    def __init__(self) -> None:
        self.down: set[int] = set()
        self.written: list[str] = []
        self.calls = 0

    def enqueue(self, rows: list[Any]) -> None:
        self.calls += 1
        if int(rows[0].iid.partition("-")[0]) in self.down:
            raise RedisUnavailable("cannot reach Redis: master down")
        self.written += [r.iid for r in rows]


def group(*iids: str) -> list[EnqueueRow]:
    return [cast(EnqueueRow, SimpleNamespace(iid=i)) for i in iids]


def test_a_failing_shard_keeps_its_groups_in_order_and_the_others_go_on() -> None:
    enq = Enqueuer()
    broker = SimpleNamespace(enqueuer=enq, shards_with=lambda shard: [shard])
    app = cast(App, SimpleNamespace(broker=broker))
    tally = Tally()
    sub = Submissions(app, tally)
    enq.down = {1}
    sub.pending = [group("1-a"), group("0-a", "0-b"), group("1-b"), group("2-a")]
    sub.flush()
    assert enq.calls == 3  # "1-b" waits for shard 1's gate delay: not tried again at once
    assert enq.written == ["0-a", "0-b", "2-a"]
    assert [[r.iid for r in g] for g in sub.pending] == [["1-a"], ["1-b"]]
    assert tally.acked == ["0-a", "0-b", "2-a"] and tally.enqueued == 3
    enq.down = set()
    sub.gate = ShardGate(0.0, 0.0)  # shard 1 due its next try now
    sub.flush()
    assert enq.written[3:] == ["1-a", "1-b"] and sub.pending == []
