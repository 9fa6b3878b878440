"""model/rate.py: a rate parsed, ``rate_key`` checked against the function, and
each call's group bound by name through its signature (issue 32 §5)."""

from __future__ import annotations

import pytest

from redcron import Context
from redcron.errors import ValidationError
from redcron.model.binding import CallShape
from redcron.model.rate import Rate, check_declaration, group_of, parse


def sync(customer_id: int, full: bool = False, *, region: str = "eu") -> None:
    return None


SHAPE = CallShape.of(sync)


@pytest.mark.parametrize(
    ("text", "n", "unit_ms"),
    [("10/s", 10, 1000), ("100/m", 100, 60_000), (" 5 / h ", 5, 3_600_000), ("1/s", 1, 1000)],
)
def test_a_rate_parses(text: str, n: int, unit_ms: int) -> None:
    assert parse(text) == Rate(n, unit_ms)
    assert str(parse(text)) == text.replace(" ", "")


@pytest.mark.parametrize(
    "bad", ["10", "10/d", "0/s", "10001/s", "-1/s", "1.5/s", "ten/s", 10, None]
)
def test_a_rate_that_is_not_one_is_refused(bad: object) -> None:
    with pytest.raises(ValidationError) as exc:
        parse(bad)
    assert exc.value.field == "rate"


def test_rate_key_names_an_argument_taken_by_name() -> None:
    assert check_declaration(SHAPE, "10/s", "customer_id") == Rate(10, 1000)
    assert check_declaration(SHAPE, "10/s", "region") == Rate(10, 1000)
    assert check_declaration(SHAPE, "10/s", None) == Rate(10, 1000)
    assert check_declaration(SHAPE, None, None) is None
    for key in ("nope", "", 3):
        with pytest.raises(ValidationError) as exc:
            check_declaration(SHAPE, "10/s", key)
        assert exc.value.field == "rate_key"
    with pytest.raises(ValidationError, match="needs a rate"):
        check_declaration(SHAPE, None, "customer_id")


def test_the_group_is_the_argument_bound_to_the_parameter_by_name() -> None:
    assert group_of(SHAPE, "customer_id", [42], {}) == "42"  # by position, str()
    assert group_of(SHAPE, "customer_id", [], {"customer_id": "42"}) == "42"
    assert group_of(SHAPE, "full", [1], {}) == "False"  # its default
    assert group_of(SHAPE, "full", [1, True], {}) == "True"
    assert group_of(SHAPE, "region", [1], {"region": "us"}) == "us"  # keyword-only
    assert group_of(SHAPE, "customer_id", [], {}) == ""  # missing: the argument check's
    with pytest.raises(ValidationError, match="needs a value"):
        group_of(SHAPE, "customer_id", [None], {})
    with pytest.raises(ValidationError, match="1 to 200 bytes"):
        group_of(SHAPE, "customer_id", ["x" * 201], {})


def test_a_ctx_parameter_does_not_shift_positions() -> None:
    def task(ctx: Context, customer_id: str) -> None:
        return None

    assert group_of(CallShape.of(task), "customer_id", ["c"], {}) == "c"
