"""A process's own ULIDs list in the order it made them (clock.ulid)."""

from __future__ import annotations

from redcron.clock import ulid


def test_ids_made_in_one_millisecond_keep_their_order() -> None:
    ids = [ulid() for _ in range(2000)]  # many share a millisecond
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_given_time_and_randomness_are_taken_as_given() -> None:
    assert ulid(0, bytes(10)) == "0" * 26
    assert ulid(1, bytes(9) + b"\x01") == "0" * 9 + "1" + "0" * 15 + "1"
