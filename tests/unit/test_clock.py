"""clock: backoff bounds and ULIDs, pure (``now`` is passed in, nothing sleeps)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redcron.clock import backoff_ceiling_ms, backoff_delay_ms, ulid

CROCKFORD = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

bases = st.integers(min_value=0, max_value=10_000_000)
caps = st.integers(min_value=0, max_value=10**10)
attempts = st.integers(min_value=1, max_value=200)
fractions = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


def test_backoff_ceiling_doubles_from_base() -> None:
    assert [backoff_ceiling_ms(1000, 10**9, n) for n in range(1, 6)] == [
        1000,
        2000,
        4000,
        8000,
        16000,
    ]


def test_backoff_ceiling_is_capped() -> None:
    assert backoff_ceiling_ms(1000, 5000, 3) == 4000
    assert backoff_ceiling_ms(1000, 5000, 4) == 5000
    assert backoff_ceiling_ms(1000, 5000, 1000) == 5000


def test_attempt_is_one_based() -> None:
    with pytest.raises(ValueError, match="1-based"):
        backoff_ceiling_ms(1000, 5000, 0)


@given(bases, caps, attempts)
def test_backoff_ceiling_is_monotone_and_capped(base: int, cap: int, attempt: int) -> None:
    cap = max(cap, base)
    here = backoff_ceiling_ms(base, cap, attempt)
    after = backoff_ceiling_ms(base, cap, attempt + 1)
    assert here <= after <= cap
    assert here == min(base * 2 ** (attempt - 1), cap)
    assert isinstance(here, int)


@given(bases, caps, attempts, fractions)
def test_full_jitter_stays_below_the_ceiling(
    base: int, cap: int, attempt: int, fraction: float
) -> None:
    cap = max(cap, base)
    ceiling = backoff_ceiling_ms(base, cap, attempt)
    delay = backoff_delay_ms(base, cap, attempt, fraction)
    assert 0 <= delay <= ceiling
    if ceiling > 0:
        assert delay < ceiling
    assert delay == int(ceiling * fraction)


def test_full_jitter_spans_zero_to_ceiling() -> None:
    assert backoff_delay_ms(1000, 60_000, 3, 0.0) == 0
    assert backoff_delay_ms(1000, 60_000, 3, 0.5) == 2000
    assert backoff_delay_ms(1000, 60_000, 3, 0.999) == 3996


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
