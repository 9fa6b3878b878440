"""Tenant settings without Redis: rate parsing, validation messages, hash round trip."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from redcron.errors import ValidationError
from redcron.model.tenants import SETTINGS_FIELDS, TenantSettings, format_rate, parse_rate


@pytest.mark.parametrize(
    ("text", "per_second"),
    [
        ("20/s", 20.0),
        ("20", 20.0),
        (" 20 / s ", 20.0),
        ("1200/m", 20.0),
        ("5/h", 5 / 3600),
        ("0.5/s", 0.5),
        ("1.5", 1.5),
        ("0", 0.0),
        (7, 7.0),
        (2.5, 2.5),
    ],
)
def test_parse_rate(text: object, per_second: float) -> None:
    assert parse_rate(text) == pytest.approx(per_second)


@pytest.mark.parametrize(
    "junk", ["", "fast", "20/d", "20/", "/s", "-1/s", "20/s/s", "1e3", "nan", None, True, [20]]
)
def test_parse_rate_rejects_junk(junk: object) -> None:
    with pytest.raises(ValidationError) as info:
        parse_rate(junk)
    assert info.value.field == "rate"
    assert "N/s" in str(info.value) or ">= 0" in str(info.value)


@pytest.mark.parametrize("bad", [-1, -0.5, math.inf, math.nan])
def test_parse_rate_rejects_negative_and_non_finite_numbers(bad: float) -> None:
    with pytest.raises(ValidationError, match=r"^rate: .*>= 0"):
        parse_rate(bad)


@pytest.mark.parametrize(
    ("rate", "text"),
    [(0.0, "unlimited"), (20.0, "20/s"), (0.5, "30/m"), (5 / 3600, "5/h"), (0.3, "18/m")],
)
def test_format_rate(rate: float, text: str) -> None:
    assert format_rate(rate) == text
    assert rate == 0 or parse_rate(text) == pytest.approx(rate)


def test_defaults_are_valid_and_unlimited() -> None:
    s = TenantSettings().validate()
    assert (s.weight, s.max_in_flight, s.rate, s.burst, s.max_queued) == (1.0, 0, 0.0, 0, 0)
    assert s.max_priority == "high"
    assert s.effective_burst == 1


@pytest.mark.parametrize(("rate", "burst"), [(0.2, 1), (1.0, 1), (2.5, 3), (20.0, 20)])
def test_effective_burst_defaults_to_one_second_of_rate(rate: float, burst: int) -> None:
    assert TenantSettings(rate=rate).effective_burst == burst
    assert TenantSettings(rate=rate, burst=7).effective_burst == 7


@pytest.mark.parametrize(
    ("change", "field", "hint"),
    [
        ({"weight": 0}, "weight", ">= 1 and <= 1000"),
        ({"weight": 0.5}, "weight", ">= 1 and <= 1000"),
        ({"weight": -2.0}, "weight", ">= 1 and <= 1000"),
        ({"weight": 1000.5}, "weight", ">= 1 and <= 1000"),
        ({"weight": math.nan}, "weight", ">= 1 and <= 1000"),
        ({"weight": "4"}, "weight", "must be a number"),
        ({"weight": True}, "weight", "must be a number"),
        ({"max_in_flight": -1}, "max_in_flight", "whole number >= 0"),
        ({"max_in_flight": 2.5}, "max_in_flight", "whole number >= 0"),
        ({"burst": -1}, "burst", "whole number >= 0"),
        ({"max_queued": -5}, "max_queued", "whole number >= 0"),
        ({"max_queued": True}, "max_queued", "whole number >= 0"),
        ({"rate": -0.1}, "rate", ">= 0 tasks per second"),
        ({"rate": math.inf}, "rate", ">= 0 tasks per second"),
        ({"rate": "20/s"}, "rate", ">= 0 tasks per second"),
        ({"jitter_s": -1}, "jitter_s", "seconds >= 0"),
        ({"max_priority": "urgent"}, "max_priority", "high, normal, low"),
    ],
)
def test_validate_names_the_field_and_the_fix(
    change: dict[str, Any], field: str, hint: str
) -> None:
    with pytest.raises(ValidationError) as info:
        dataclasses.replace(TenantSettings(), **change).validate()
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert hint in str(info.value)


def test_boundaries_are_accepted() -> None:
    TenantSettings(weight=1000, max_in_flight=0, rate=0, burst=0, max_queued=0).validate()
    TenantSettings(weight=1, max_priority="low", jitter_s=0.25).validate()


def test_hash_round_trip_is_plain_text() -> None:
    s = TenantSettings(
        weight=4, max_in_flight=50, rate=1 / 3, burst=3, max_queued=10_000,
        max_priority="normal", jitter_s=1.5,
    )  # fmt: skip
    h = s.to_hash()
    assert list(h) == list(SETTINGS_FIELDS)
    assert h["weight"] == "4" and h["max_in_flight"] == "50" and h["max_priority"] == "normal"
    assert float(h["rate"]) == 1 / 3
    back = TenantSettings.from_hash({k.encode(): v.encode() for k, v in h.items()})
    assert back == dataclasses.replace(s, weight=4.0)


def test_from_hash_fills_defaults_and_ignores_dispatch_state() -> None:
    s = TenantSettings.from_hash(
        {b"max_in_flight": b"3", b"d:default:normal": b"17", "tokens": "2"}
    )
    assert s == TenantSettings(max_in_flight=3)


def test_from_hash_names_a_corrupt_field() -> None:
    with pytest.raises(ValidationError, match=r"^max_in_flight: stored value 'lots'.*tenants set"):
        TenantSettings.from_hash({"max_in_flight": "lots"})


def test_the_command_grant_is_stored_as_one_or_zero() -> None:
    # the scripts grant only on the exact text "1" (lua/lib/grant.lua)
    assert TenantSettings().allow_commands is False
    assert TenantSettings(allow_commands=True).to_hash()["allow_commands"] == "1"
    assert TenantSettings().to_hash()["allow_commands"] == "0"
    assert TenantSettings.from_hash({b"allow_commands": b"1"}).allow_commands is True
    assert TenantSettings.from_hash({"allow_commands": "0"}).allow_commands is False
    with pytest.raises(ValidationError, match=r"^allow_commands: stored value 'yes' is not 1 or 0"):
        TenantSettings.from_hash({"allow_commands": "yes"})
    with pytest.raises(ValidationError, match=r"^allow_commands: 1 must be true or false"):
        TenantSettings(allow_commands=1).validate()  # type: ignore[arg-type]
