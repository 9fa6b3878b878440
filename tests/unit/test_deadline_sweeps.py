"""The beat's deadline sweeps without Redis: how often a shard is swept, and
how many script calls a sweep makes (``redcron.beat.deadlines``)."""

from __future__ import annotations

from typing import Any, cast

from redcron.beat.deadlines import SWEEP_CALLS, Deadlines
from redcron.engine import SWEEP_LIMIT, Engine, LateRun
from redcron.engine.beat import Swept


class FakeStore:
    """Answers each sweep_deadlines call with the next of ``answers``."""

    def __init__(self, *answers: Swept) -> None:
        self.answers = list(answers)
        self.calls: list[int] = []

    def sweep_deadlines(self, shard: int) -> Swept:
        self.calls.append(shard)
        return self.answers.pop(0) if self.answers else Swept(0, [])


def store(fake: FakeStore) -> Engine:
    return cast(Engine, fake)


def late(rid: str) -> LateRun:
    return LateRun(rid, "acme", "nightly", 1_000, 61_000)


def test_a_shard_is_swept_at_most_once_per_interval() -> None:
    fake = FakeStore(Swept(1, [late("r1")]))
    d = Deadlines(every_ms=1_000)
    assert d.sweep(store(fake), [0, 1], 10_000) == [late("r1")]
    assert fake.calls == [0, 1]
    assert d.sweep(store(fake), [0, 1], 10_999) == []
    assert fake.calls == [0, 1]  # not yet
    d.sweep(store(fake), [0, 1], 11_000)
    assert fake.calls == [0, 1, 0, 1]


def test_a_full_call_is_followed_by_another_up_to_the_bound() -> None:
    full = Swept(SWEEP_LIMIT, [])
    fake = FakeStore(*[full] * (SWEEP_CALLS + 2))
    Deadlines().sweep(store(fake), [3], 0)
    assert fake.calls == [3] * SWEEP_CALLS  # the rest waits for the next sweep
    fake = FakeStore(full, Swept(7, []))
    Deadlines().sweep(store(fake), [3], 0)
    assert fake.calls == [3, 3]


def test_shards_no_longer_owned_are_forgotten() -> None:
    fake = FakeStore()
    d = Deadlines(every_ms=1_000)
    d.sweep(store(fake), [0, 1], 0)
    d.forget([1])
    d.sweep(store(fake), [0, 1], 500)  # shard 0 comes back: swept at once
    assert fake.calls == [0, 1, 0]
    assert cast(Any, d)._next == {0: 1_500, 1: 1_000}
