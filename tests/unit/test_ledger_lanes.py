"""The ledger's accounting with two lease loops in flight (no Redis, no sleeps).

A lane reserves the slots it asks for before its lease call goes out; the
leases that come back take them over; what the reply did not fill is given
back.  Held plus reserved never exceeds the capacity, whatever the order.
"""

from __future__ import annotations

from redcron.broker import Lease
from redcron.worker import WorkerOptions, capture
from redcron.worker.execute import Attempt, Outcome
from redcron.worker.leasing import LANES, lanes_for
from redcron.worker.ledger import Ledger


def _ledger(slots: int = 4, prefetch: int = 4) -> Ledger:
    return Ledger(WorkerOptions(concurrency=slots, prefetch=prefetch))


def _attempts(n: int, start: int = 0) -> list[Attempt]:
    return [
        Attempt(Lease(f"t{i}", "1", 1, "job", "python", b"", 1000, 0), capture.LineBuffer(10))
        for i in range(start, start + n)
    ]


def _take(ledger: Ledger) -> int:
    """What a lane reserves for its next lease call: all the room there is."""
    with ledger.lock:
        free = max(0, ledger.room())
        ledger.reserve(free)
    return free


def test_two_lanes_in_flight_never_ask_for_more_than_the_capacity() -> None:
    ledger = _ledger()  # capacity 8
    a = _take(ledger)
    b = _take(ledger)  # sent while a's reply is out: nothing left to ask for
    assert (a, b, ledger.reserved, ledger.room()) == (8, 0, 8, 0)
    got = _attempts(5)
    ledger.hold(got, reserved=len(got))  # a's reply: 5 of the 8
    assert (ledger.busy, ledger.reserved, ledger.room()) == (5, 3, 0)
    ledger.unreserve(a - len(got))  # the 3 it did not fill
    assert (ledger.busy, ledger.reserved, ledger.room()) == (5, 0, 3)
    b = _take(ledger)
    assert (b, ledger.busy + ledger.reserved) == (3, ledger.capacity)


def test_slots_freed_while_a_call_is_in_flight_go_to_the_other_lane() -> None:
    ledger = _ledger()
    first = _attempts(8)
    ledger.hold(first, reserved=_take(ledger))
    assert ledger.room() == 0 and ledger.reserved == 0
    for attempt in first[:3]:
        ledger.ended(attempt, Outcome(ok=True))
    a = _take(ledger)  # lane a reports the 3 and leases 3
    for attempt in first[3:5]:
        ledger.ended(attempt, Outcome(ok=True))
    b = _take(ledger)  # lane b: the 2 that ended meanwhile, not a's 3 again
    assert (a, b, ledger.busy, ledger.reserved) == (3, 2, 3, 5)
    ledger.hold(_attempts(2, 100), reserved=2)  # b's reply first
    ledger.hold(_attempts(3, 200), reserved=3)  # then a's
    assert (ledger.busy, ledger.reserved, ledger.room()) == (8, 0, 0)
    assert len(ledger.done) == 5  # the reports wait for a lane, each once
    assert len(ledger.take_done()) == 5 and ledger.take_done() == []


def test_a_failed_call_gives_its_whole_reservation_back() -> None:
    ledger = _ledger()
    a = _take(ledger)
    ledger.unreserve(a)  # the shard failed: nothing leased
    assert (ledger.busy, ledger.reserved, ledger.room()) == (0, 0, ledger.capacity)


def test_reserved_slots_count_against_a_waiters_batch() -> None:
    ledger = _ledger()
    with ledger.lock:
        ledger.reserve(6)
        ledger.wait_for_slots(4, 0, lane=1)  # timeout 0: registers, returns
        assert ledger.waits == {}  # unregistered once it returns
        assert ledger.room() == 2


def test_the_reporter_takes_over_only_when_no_lane_carries() -> None:
    ledger = _ledger()
    ledger.set_leaser_reports(True, lane=0)
    ledger.set_leaser_reports(True, lane=1)
    ledger.set_leaser_reports(False, lane=1)  # lane 1 blocks on the wake lists
    assert ledger.leaser_reports  # lane 0 is busy: it carries them
    ledger.set_leaser_reports(False, lane=0)
    assert not ledger.leaser_reports


def test_unsent_reports_of_a_stopping_lane_go_first() -> None:
    ledger = _ledger()
    a, b = _attempts(2)
    ledger.hold([a, b])
    ledger.ended(b, Outcome(ok=True))
    ledger.set_leaser_reports(False, unsent=[(a, Outcome(ok=True))], lane=1)
    assert [it[0] for it in ledger.done] == [a, b]


def test_two_lanes_unless_cpu_or_memory_is_declared() -> None:
    assert LANES == 2 and lanes_for(None, None) == 2
    assert lanes_for(2.0, None) == 1 and lanes_for(None, 1 << 30) == 1
