"""schedule.words: schedules in words for the dashboard, and the next few fire times.

Pure: explicit datetimes only.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from redcron.schedule.triggers import (
    ScheduleError,
    Trigger,
    fires_between,
    make_trigger,
    parse_cron,
)
from redcron.schedule.words import describe, upcoming

KEY = "acme/nightly"


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, s, tzinfo=UTC)


def hashed(expr: str) -> tuple[int, ...]:
    """The (minute, hour) the parser picks for ``expr`` under KEY."""
    cron = parse_cron(expr, job_key=KEY)
    return cron.minutes[0], cron.hours[0]


H_MINUTE, H_HOUR = hashed("H H * * *")

CRON_CASES = [
    # the brief's examples
    ("0 2 * * *", "Europe/Berlin", "at 02:00 every day, Europe/Berlin"),
    ("*/15 * * * *", "UTC", "every 15 minutes"),
    ("0 9-17 * * 1-5", "UTC", "every hour from 09:00 to 17:00, Monday to Friday"),
    ("30 8 1 * *", "UTC", "at 08:30 on day 1 of every month"),
    ("0 0 L * *", "UTC", "at 00:00 on the last day of every month"),
    ("0 12 * * 5L", "UTC", "at 12:00 on the last Friday of every month"),
    ("0 12 * * 5#2", "UTC", "at 12:00 on the second Friday of every month"),
    ("0 6 * 1,7 *", "UTC", "at 06:00 every day in January and July"),
    ("*/5 * * * * *", "UTC", "every 5 seconds"),
    ("0 8,12,18 * * *", "UTC", "at 08:00, 12:00 and 18:00 every day"),
    # Vixie: neither day field starts with "*", so either one matching is enough
    ("0 0 1 * 1", "UTC", "at 00:00 on day 1 or on Monday"),
    ("0 0 1,15 * MON,FRI", "UTC", "at 00:00 on days 1 and 15 or on Monday or Friday"),
    ("0 0 L * 5#1", "UTC", "at 00:00 on the last day or on the first Friday of every month"),
    # ... and one starting with "*" means both must match
    ("0 0 */2 * 1", "UTC", "at 00:00 on days 1 to 31 in steps of 2 (only if it is Monday)"),
    (
        "0 0 1 * */2",
        "UTC",
        "at 00:00 on day 1 (only if it is Tuesday, Thursday, Saturday or Sunday)",
    ),
    # a field listing every value is no restriction, whatever the semantics
    ("0 0 1-31 * 1", "UTC", "at 00:00 every day"),
    ("0 0 ? * ?", "UTC", "at 00:00 every day"),
    # steps, ranges, lists and names
    ("* * * * *", "UTC", "every minute"),
    ("* * * * * *", "UTC", "every second"),
    ("0 * * * *", "UTC", "every hour"),
    ("5 * * * *", "UTC", "at 5 minutes past every hour"),
    ("15 30 * * * *", "UTC", "at 30 minutes 15 seconds past every hour"),
    ("30 * * * * *", "UTC", "every minute from 30 seconds past the minute"),
    ("3/10 * * * * *", "UTC", "every 10 seconds from 3 seconds past the minute"),
    ("0 */2 * * *", "UTC", "every 2 hours"),
    ("30 1/2 * * *", "UTC", "every 2 hours from 01:30 to 23:30"),
    ("0 */5 * * *", "UTC", "every 5 hours from 00:00 to 20:00"),
    ("*/15 9-17 * * 1-5", "UTC", "every 15 minutes from 09:00 to 17:45, Monday to Friday"),
    (
        "*/20 9-10,17-18 * * *",
        "UTC",
        "every 20 minutes from 09:00 to 10:40 and from 17:00 to 18:40",
    ),
    ("* 9 * * *", "UTC", "every minute from 09:00 to 09:59"),
    ("0 1-5,13-17 * * *", "UTC", "every hour from 01:00 to 05:00 and from 13:00 to 17:00"),
    ("0,30 8,20 * * *", "UTC", "at 08:00, 08:30, 20:00 and 20:30 every day"),
    ("30 0 8 * * *", "UTC", "at 08:00:30 every day"),
    ("0 9 * JAN-MAR MON-FRI", "UTC", "at 09:00, Monday to Friday in January to March"),
    ("0 0 * * 5-7", "UTC", "at 00:00, Friday to Sunday"),
    ("0 0 * * SAT,SUN", "UTC", "at 00:00 on Saturday and Sunday"),
    ("0 0 * * 1,3,5", "UTC", "at 00:00 on Monday, Wednesday and Friday"),
    ("0 0 * * 1,5L", "UTC", "at 00:00 on Monday and on the last Friday"),
    ("0 0 1,15,L * *", "UTC", "at 00:00 on days 1 and 15 and on the last day of every month"),
    ("0 0 1 */3 *", "UTC", "at 00:00 on day 1 of January, April, July and October"),
    ("0 0 29 2 *", "UTC", "at 00:00 on day 29 of February"),
    # macros
    ("@yearly", "UTC", "at 00:00 on day 1 of January"),
    ("@monthly", "UTC", "at 00:00 on day 1 of every month"),
    ("@weekly", "Etc/UTC", "at 00:00 on Sundays"),
    ("@hourly", "America/New_York", "every hour, America/New_York"),
    # H: the values the parser chose, not the letter
    ("H H * * *", "UTC", f"at {H_HOUR:02}:{H_MINUTE:02} every day"),
    # irregular: spelled out field by field, every value named
    (
        "1,7,13 2,5,19 3,9 2,4 *",
        "UTC",
        "at minutes 1, 7 and 13 of hours 2, 5 and 19 on days 3 and 9 of February and April",
    ),
    ("0-29 9-17 * * *", "UTC", "at minutes 0-29 of hours 9-17"),
    ("*/7 * * * *", "UTC", "at minutes 0 to 56 in steps of 7 of every hour"),
    (
        "*/10 0-4 * * * *",
        "UTC",
        "at seconds 0 to 50 in steps of 10 of minutes 0-4 of every hour",
    ),
    ("44-57 * * * * *", "UTC", "at seconds 44-57 of every minute"),
    ("0,17,46 * 9 * * *", "UTC", "at seconds 0, 17 and 46 of every minute during hour 9"),
    (
        "0 0,2,3,5,7,11,13,17,19 * * *",
        "UTC",
        "at minute 0 of hours 0, 2, 3, 5, 7, 11, 13, 17 and 19",
    ),
]


@pytest.mark.parametrize(("expr", "tz", "expected"), CRON_CASES)
def test_describe_cron(expr: str, tz: str, expected: str) -> None:
    assert describe(make_trigger(cron=expr, tz=tz, job_key=KEY)) == expected


def test_describe_hashed_step_names_its_phase() -> None:
    phase = parse_cron("H/15 * * * *", job_key=KEY).minutes[0]
    assert phase > 1  # KEY hashes to a phase, so the sentence must name it
    text = describe(make_trigger(cron="H/15 * * * *", job_key=KEY))
    assert text == f"every 15 minutes from {phase} minutes past the hour"


def test_describe_too_long_falls_back_to_the_expression() -> None:
    expr = "1,4,6,9,11,14,17,19,22,25 3,5,8,13,21 2,3,5,7,11,13,17,19,23,29,31 * 1-3,5"
    assert describe(make_trigger(cron=expr, tz="Asia/Tokyo")) == f"cron {expr}, Asia/Tokyo"


@pytest.mark.parametrize(
    ("every", "expected"),
    [
        ("30s", "every 30 seconds"),
        ("1s", "every second"),
        ("5m", "every 5 minutes"),
        ("1h", "every hour"),
        ("1h30m", "every 1 hour 30 minutes"),
        ("90", "every 1 minute 30 seconds"),
        ("2d", "every 2 days"),
        ("1d2h3m4s", "every 1 day 2 hours 3 minutes 4 seconds"),
        (timedelta(seconds=1.5), "every 1.5 seconds"),
    ],
)
def test_describe_every(every: str | timedelta, expected: str) -> None:
    # an interval is absolute time: no zone in the sentence
    assert describe(make_trigger(every=every, tz="Europe/Berlin")) == expected


def test_describe_at_in_the_jobs_zone() -> None:
    at = utc(2026, 12, 1, 9)
    assert describe(make_trigger(at=at)) == "once at 2026-12-01 09:00 UTC"
    assert (
        describe(make_trigger(at=at, tz="Europe/Berlin"))
        == "once at 2026-12-01 10:00, Europe/Berlin"
    )
    seconds = utc(2026, 12, 1, 9, 0, 7)
    assert describe(make_trigger(at=seconds)) == "once at 2026-12-01 09:00:07 UTC"


def test_describe_manual() -> None:
    assert describe(make_trigger()) == "manual only (trigger it)"
    assert describe(Trigger("manual")) == "manual only (trigger it)"


# --- never raises, and "every N" claims hold -------------------------------------------------


def _part(lo: int, hi: int, names: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    value = st.integers(lo, hi)
    pair = st.tuples(value, value).map(sorted)
    step = st.integers(1, hi - lo + 1)
    options = [
        st.just("*"),
        step.map(lambda n: f"*/{n}"),
        value.map(str),
        pair.map(lambda p: f"{p[0]}-{p[1]}"),
        st.tuples(pair, step).map(lambda t: f"{t[0][0]}-{t[0][1]}/{t[1]}"),
        st.tuples(value, step).map(lambda t: f"{t[0]}/{t[1]}"),
        st.just("H"),
        step.map(lambda n: f"H/{n}"),
        pair.map(lambda p: f"H({p[0]}-{p[1]})"),
    ]
    if names:
        options.append(st.sampled_from(names))
    return st.one_of(options)


def _field(part: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(part, min_size=1, max_size=3).map(",".join)


_DOW_EXTRA = st.one_of(
    st.integers(0, 7).map(lambda d: f"{d}L"),
    st.tuples(st.integers(0, 7), st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
)
cron_exprs = st.tuples(
    st.one_of(st.none(), _field(_part(0, 59))),
    _field(_part(0, 59)),
    _field(_part(0, 23)),
    st.one_of(_field(st.one_of(_part(1, 31), st.just("L"))), st.just("?")),
    _field(_part(1, 12, ("JAN", "MAR", "DEC"))),
    st.one_of(_field(st.one_of(_part(0, 7, ("MON", "FRI", "SUN")), _DOW_EXTRA)), st.just("?")),
).map(lambda fields: " ".join(f for f in fields if f is not None))
zones = st.sampled_from(["UTC", "Europe/Berlin", "Asia/Kolkata", "America/St_Johns"])


def _trigger(expr: str, tz: str) -> Trigger | None:
    try:
        return make_trigger(cron=expr, tz=tz, job_key=KEY)
    except ScheduleError:
        return None  # the grammar is looser than cron: "30 2" and friends are refused


@settings(max_examples=400, deadline=None)
@given(cron_exprs, zones)
def test_describe_never_raises(expr: str, tz: str) -> None:
    trigger = _trigger(expr, tz)
    if trigger is None:
        return
    text = describe(trigger)
    assert text and text == text.strip() and "  " not in text
    assert text.endswith(tz) != (tz == "UTC")


_EVERY_RE = re.compile(r"every (?:(\d+) )?(second|minute|hour)s?")
_SIZES = {"second": 1, "minute": 60, "hour": 3600}


@settings(max_examples=300, deadline=None)
@given(cron_exprs)
def test_every_n_claims_hold(expr: str) -> None:
    """A bare "every N units" sentence means fires exactly N units apart, all day long."""
    trigger = _trigger(expr, "UTC")
    if trigger is None:
        return
    m = _EVERY_RE.fullmatch(describe(trigger))
    if m is None:
        return
    gap = timedelta(seconds=int(m[1] or 1) * _SIZES[m[2]])
    after = utc(2026, 3, 1)
    fires = fires_between(trigger, after, after + 2 * gap + timedelta(days=1), 100)
    assert fires[0] - after <= gap
    assert all(b - a == gap for a, b in pairwise(fires))


# --- upcoming --------------------------------------------------------------------------------

AFTER = utc(2026, 3, 28, 23, 59)


@pytest.mark.parametrize(
    "trigger",
    [
        make_trigger(cron="0 2 * * *", tz="Europe/Berlin"),  # through the spring-forward gap
        make_trigger(cron="*/15 * * * * *"),
        make_trigger(cron="0 12 * * 5L", tz="America/New_York"),
        make_trigger(cron="0 0 29 2 *"),
        make_trigger(every="1h30m"),
        make_trigger(at=utc(2026, 12, 1, 9)),
    ],
    ids=["berlin-daily", "seconds", "last-friday", "leap-day", "every", "at"],
)
def test_upcoming_matches_fires_between(trigger: Trigger) -> None:
    far = utc(3000, 1, 1)
    assert upcoming(trigger, AFTER, 7) == fires_between(trigger, AFTER, far, 7)
    assert upcoming(trigger, AFTER) == fires_between(trigger, AFTER, far, 5)
    assert all(f.tzinfo is UTC for f in upcoming(trigger, AFTER))


def test_upcoming_every_uses_the_anchor() -> None:
    trigger = make_trigger(every="1h")
    anchor = utc(2026, 6, 1, 10, 7)
    got = upcoming(trigger, utc(2026, 6, 1, 12, 30), 3, anchor=anchor)
    assert got == [utc(2026, 6, 1, 13, 7), utc(2026, 6, 1, 14, 7), utc(2026, 6, 1, 15, 7)]
    assert got == fires_between(trigger, utc(2026, 6, 1, 12, 30), utc(2027, 1, 1), 3, anchor=anchor)
    # no anchor: the Unix epoch grid, as the beat uses
    assert upcoming(trigger, utc(2026, 6, 1, 12, 30), 1) == [utc(2026, 6, 1, 13)]


def test_upcoming_runs_out() -> None:
    assert upcoming(make_trigger(), AFTER) == []
    assert upcoming(make_trigger(at=utc(2026, 1, 1)), AFTER) == []
    assert upcoming(make_trigger(at=utc(2026, 12, 1)), AFTER, 3) == [utc(2026, 12, 1)]
    assert upcoming(make_trigger(cron="* * * * *"), AFTER, 0) == []


def test_upcoming_refuses_bad_arguments() -> None:
    with pytest.raises(ScheduleError):
        upcoming(make_trigger(cron="* * * * *"), AFTER, -1)
    with pytest.raises(ScheduleError):
        upcoming(make_trigger(cron="* * * * *"), datetime(2026, 1, 1))


@settings(max_examples=60, deadline=None)
@given(cron_exprs, zones, st.integers(0, 10**9))
def test_upcoming_matches_fires_between_for_any_cron(expr: str, tz: str, offset: int) -> None:
    trigger = _trigger(expr, tz)
    if trigger is None:
        return
    after = utc(2000, 1, 1) + timedelta(seconds=offset)
    try:
        want = fires_between(trigger, after, utc(3000, 1, 1), 4)
    except ScheduleError:  # e.g. "0#5 in February": no fire in the search horizon
        with pytest.raises(ScheduleError):
            upcoming(trigger, after, 4)
        return
    assert upcoming(trigger, after, 4) == want
