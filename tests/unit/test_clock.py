"""clock: ULIDs, pure (``now`` is passed in, nothing sleeps)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from redcron.clock import ulid

CROCKFORD = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def test_ulid_shape_and_known_values() -> None:
    # The timestamp part of the spec's example ULID 01ARYZ6S41TSV4RRFFQ69G5FAV.
    assert ulid(1469918176385, bytes(10)) == "01ARYZ6S41" + "0" * 16
    assert ulid(0, bytes(10)) == "0" * 26
    assert ulid(2**48 - 1, b"\xff" * 10) == "7" + "Z" * 25
    fresh = ulid()
    assert len(fresh) == 26
    assert set(fresh) <= CROCKFORD


def test_ulids_are_unique() -> None:
    assert len({ulid(1_700_000_000_000) for _ in range(1000)}) == 1000


@given(
    st.integers(min_value=0, max_value=2**48 - 2),
    st.integers(min_value=1, max_value=10**9),
    st.binary(min_size=10, max_size=10),
    st.binary(min_size=10, max_size=10),
)
def test_ulids_sort_by_time(t: int, step: int, rnd1: bytes, rnd2: bytes) -> None:
    later = min(t + step, 2**48 - 1)
    a, b = ulid(t, rnd1), ulid(later, rnd2)
    assert len(a) == len(b) == 26
    assert a < b
