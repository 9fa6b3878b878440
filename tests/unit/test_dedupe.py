"""model/dedupe.py: the options' checks, the canonical key digest and the wire
field lib/dedupe.lua reads (pure: no Redis)."""

from __future__ import annotations

import math

import pytest

from redcron.errors import ValidationError
from redcron.model import dedupe
from redcron.model.dedupe import Dedupe


def test_options_in_milliseconds() -> None:
    assert dedupe.options() is None
    assert dedupe.options(unique_for=1.5) == Dedupe("unique", 1500)
    assert dedupe.options(debounce=2) == Dedupe("debounce", 2000, 0)
    assert dedupe.options(debounce=2, max_wait=2) == Dedupe("debounce", 2000, 2000)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"unique_for": 0}, "unique_for"),
        ({"unique_for": -5}, "unique_for"),
        ({"unique_for": math.nan}, "unique_for"),
        ({"unique_for": math.inf}, "unique_for"),
        ({"unique_for": True}, "unique_for"),
        ({"unique_for": "60"}, "unique_for"),
        ({"unique_for": 0.0001}, "unique_for"),
        ({"debounce": 0}, "debounce"),
        ({"debounce": 1, "max_wait": 0.5}, "max_wait"),
        ({"debounce": 1, "max_wait": math.nan}, "max_wait"),
        ({"max_wait": 5}, "max_wait"),
        ({"unique_for": 1, "debounce": 1}, "debounce"),
    ],
)
def test_bad_options_name_their_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as exc:
        dedupe.options(**kw)  # type: ignore[arg-type]
    assert exc.value.field == field
    with pytest.raises(ValidationError) as exc:
        dedupe.options(**kw, prefix="_")  # type: ignore[arg-type]
    assert exc.value.field == f"_{field}"


def test_the_digest_is_canonical_and_scoped_to_the_task() -> None:
    a = dedupe.digest("t", [[1, {"x": 1, "y": [2]}], {"b": 1, "a": 2}])
    b = dedupe.digest("t", [[1, {"y": [2], "x": 1}], {"a": 2, "b": 1}])
    assert a == b and len(a) == 40
    assert dedupe.digest("u", [[1, {"x": 1, "y": [2]}], {"b": 1, "a": 2}]) != a
    assert dedupe.digest("t", [[1], {}]) != dedupe.digest("t", [[], {"n": 1}])


def test_the_wire_field() -> None:
    u = Dedupe("unique", 60_000)
    field = dedupe.wire(u, "t", None, [[1], {}])
    mode, hexd, window, cap, label = field.split("|", 4)
    assert (mode, window, cap, label) == ("u", "60000", "0", f"sha1:{hexd}")
    assert dedupe.wire(u, "t", "a|b", [[1], {}]).endswith("|a|b")
    d = Dedupe("debounce", 1000, 5000)
    # a debounce matches on the task name alone: the arguments do not change it
    assert dedupe.wire(d, "t", None, [[1], {}]) == dedupe.wire(d, "t", None, [[2], {}])
    assert dedupe.wire(d, "t", None, [[1], {}]).startswith("d|")


@pytest.mark.parametrize("key", ["", "x" * 257, 5, None])
def test_an_explicit_key_is_a_short_string(key: object) -> None:
    with pytest.raises(ValidationError) as exc:
        dedupe.explicit_key(key)
    assert exc.value.field == "_unique_key"
