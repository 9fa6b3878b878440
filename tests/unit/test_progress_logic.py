"""Task progress without Redis (issue 34 §1): the checks of a value, and the
worker's coalescer on explicit ``now`` (no sleeping)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from redcron.errors import ValidationError
from redcron.model.progress import (
    MESSAGE_MAX,
    RECENT_MAX,
    Coalescer,
    Pending,
    Value,
    check,
)
from redcron.model.records import TaskProgress

EVERY = 10.0  # the heartbeat period the keeper passes


@pytest.mark.parametrize(
    ("args", "field"),
    [((-1,), "done"), ((float("nan"),), "done"), ((float("inf"),), "done"), ((True,), "done"),
     (("3",), "done"), ((None,), "done"), ((2**60,), "done"), ((10**400,), "done"),
     ((1, 0), "total"), ((1, -1), "total"), ((1, "10"), "total"), ((1, float("nan")), "total"),
     ((1, 2, 3), "message"), ((1, 2, b"x"), "message")],
)  # fmt: skip
def test_bad_values_name_their_field(args: tuple[Any, ...], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        check(*args)
    assert info.value.field == field


def test_good_values() -> None:
    assert check(0) == Value(0.0)
    assert check(5, 3) == Value(5.0, 3.0)  # past the total: an estimate that grew
    assert check(0.5, 1.5, "") == Value(0.5, 1.5, None)
    long = check(1, message="é" * (MESSAGE_MAX + 1)).message
    assert long is not None and len(long) == MESSAGE_MAX and long.endswith("…")
    # whole numbers are written as integers, and only what was given
    latest, notes = Pending(check(5, 10, "hé"), ((5.0, "hé"),)).argv()
    assert json.loads(latest) == {"done": 5, "total": 10, "message": "hé"}
    assert '"done":5,' in latest and json.loads(notes) == [{"done": 5, "message": "hé"}]
    assert Pending(check(0.25), ()).argv() == ('{"done":0.25}', "[]")


def test_the_first_value_is_due_at_once_then_one_write_per_interval() -> None:
    c = Coalescer()
    assert c.take(0.0, EVERY) is None  # nothing said
    for i in range(10_000):
        c.offer(check(i, 20_000))
    first = c.take(100.0, EVERY)
    assert first is not None and first.value.done == 9_999
    c.offer(check(10_000, 20_000))
    assert c.take(100.0 + EVERY / 2, EVERY) is None  # within the interval: held
    c.offer(check(10_001, 20_000))
    second = c.take(100.0 + EVERY, EVERY)
    assert second is not None and second.value.done == 10_001
    assert c.take(200.0, EVERY) is None  # nothing new: nothing to write
    assert c.writes == 2


def test_reaching_the_total_flushes_at_once() -> None:
    c = Coalescer()
    c.offer(check(1, 3))
    assert c.take(0.0, EVERY) is not None
    c.offer(check(3, 3, "done"))
    flushed = c.take(0.001, EVERY)
    assert flushed is not None and flushed.value == Value(3.0, 3.0, "done")


def test_messages_between_writes_are_kept_up_to_the_bound() -> None:
    c = Coalescer()
    for i in range(RECENT_MAX + 3):
        c.offer(check(i, message=f"m{i}"))
        c.offer(check(i + 0.5))  # no message: none added
    got = c.take(0.0, EVERY)
    assert got is not None
    assert got.notes == tuple((float(i), f"m{i}") for i in range(3, RECENT_MAX + 3))
    assert got.value == Value(RECENT_MAX + 2.5)


def test_the_rest_is_taken_at_the_end_due_or_not_and_a_failed_write_is_put_back() -> None:
    c = Coalescer()
    c.offer(check(1, message="a"))
    assert c.take(0.0, EVERY) is not None
    c.offer(check(2, message="b"))
    assert c.take(1.0, EVERY) is None
    rest = c.take_rest(1.0)
    assert rest is not None and rest.value.done == 2 and rest.notes == ((2.0, "b"),)
    assert c.take_rest(1.0) is None  # nothing left
    c.restore(rest)  # the write failed: written at the next try
    again = c.take_rest(2.0)
    assert again == rest
    c.offer(check(3))
    c.restore(rest)  # a newer value came meanwhile: it wins
    newest = c.take_rest(3.0)
    assert newest is not None and newest.value.done == 3


def test_the_record_reads_what_the_script_wrote_and_refuses_garbage() -> None:
    fields = {
        "progress": json.dumps({"done": 3, "total": 4, "message": "m", "at": 1000, "attempt": 2}),
        "progress_recent": json.dumps([{"done": 3, "message": "m", "at": 1000, "attempt": 2}]),
    }
    got = TaskProgress.from_fields(fields)
    assert got is not None and (got.done, got.total, got.attempt) == (3, 4, 2)
    assert got.fraction == 0.75 and got.recent[0].message == "m"
    assert TaskProgress.from_fields({}) is None
    for bad in ("nope", "[]", '{"done": "3"}', '{"done": true}'):
        assert TaskProgress.from_fields({"progress": bad}) is None
    weird = TaskProgress.from_fields({"progress": '{"done": 1, "at": 1e300}',
                                      "progress_recent": '{"not": "a list"}'})  # fmt: skip
    assert weird is not None and weird.at is None and weird.recent == ()
