"""schedule.cycle: the next fire over the whole 400-year Gregorian cycle, against a
brute-force search, and refusal at parse of expressions that never fire.

Pure: explicit datetimes only.  The brute force walks (year, month, day) with
``calendar`` arithmetic and its own reading of Vixie cron's day rules, so it
shares no code with the engine.
"""

from __future__ import annotations

import calendar
import time
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from redcron.schedule.cron import Cron
from redcron.schedule.cycle import CYCLE_YEARS, fires_ever
from redcron.schedule.triggers import ScheduleError, make_trigger, next_fire, parse_cron

# -- the expressions: day-of-month, month and day-of-week restricted together ------

_dom_part = st.one_of(
    st.integers(1, 31).map(str),
    st.tuples(st.integers(1, 31), st.integers(0, 12)).map(
        lambda t: f"{t[0]}-{min(31, t[0] + t[1])}"
    ),
    st.just("L"),
)
dom_fields = st.one_of(
    st.just("*"),
    st.integers(2, 31).map(lambda n: f"*/{n}"),
    st.lists(_dom_part, min_size=1, max_size=3).map(",".join),
)
month_fields = st.one_of(
    st.just("*"),
    st.sampled_from(["FEB", "2", "2,8", "JAN-MAR", "*/5", "4,6,9,11", "DEC"]),
    st.lists(st.integers(1, 12), min_size=1, max_size=3).map(lambda v: ",".join(map(str, v))),
)
_dow_part = st.one_of(
    st.integers(0, 7).map(str),  # 7 is Sunday too
    st.tuples(st.integers(0, 7), st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
    st.integers(0, 7).map(lambda n: f"{n}L"),
    st.tuples(st.integers(0, 5), st.integers(0, 2)).map(lambda t: f"{t[0]}-{t[0] + t[1]}"),
)
dow_fields = st.one_of(
    st.just("*"),
    st.integers(2, 6).map(lambda n: f"*/{n}"),
    st.lists(_dow_part, min_size=1, max_size=3).map(",".join),
)
time_fields = st.tuples(
    st.sets(st.integers(0, 59), min_size=1, max_size=2),
    st.sets(st.integers(0, 23), min_size=1, max_size=2),
).map(lambda t: f"{','.join(map(str, sorted(t[0])))} {','.join(map(str, sorted(t[1])))}")

day_exprs = st.builds(
    lambda tm, dom, mon, dow: f"{tm} {dom} {mon} {dow}",
    time_fields,
    dom_fields,
    month_fields,
    dow_fields,
)
# and the sparse corner, which uniform fields rarely reach: February (or a
# 30-day month) with a fifth weekday, and day-of-month steps that may miss it;
# most of these fire once in decades, some never
sparse_exprs = st.builds(
    lambda tm, dom, mon, dow: f"{tm} {dom} {mon} {dow}",
    time_fields,
    st.sampled_from(["*", "*/2", "*/3", "*/4", "*/7", "*/10", "*/14", "*/28", "29", "L"]),
    st.sampled_from(["2", "FEB", "2,4", "2,11", "4,6,9,11"]),
    st.one_of(
        st.integers(0, 7).map(lambda n: f"{n}#5"),
        st.tuples(st.integers(0, 6), st.integers(0, 6)).map(lambda t: f"{t[0]}#5,{t[1]}#5"),
        st.integers(0, 7).map(lambda n: f"{n}L"),
    ),
)
exprs = st.one_of(day_exprs, sparse_exprs)
afters = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2400, 12, 31))

# -- the brute force -----------------------------------------------------------------


def _values(field: str, lo: int, hi: int, star_hi: int) -> set[int]:
    out: set[int] = set()
    for part in field.split(","):
        if part == "*":
            out |= set(range(lo, star_hi + 1))
        elif part.startswith("*/"):
            out |= set(range(lo, star_hi + 1, int(part[2:])))
        elif "-" in part:
            a, b = part.split("-")
            out |= set(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return out


_MONTH_NAMES = {"JAN": "1", "FEB": "2", "MAR": "3", "DEC": "12"}


class _Brute:
    """Vixie cron's day rules read straight from the fields."""

    def __init__(self, expr: str) -> None:
        minute, hour, dom, month, dow = expr.split()
        for name, num in _MONTH_NAMES.items():
            month = month.replace(name, num)
        self.minutes = sorted(_values(minute, 0, 59, 59))
        self.hours = sorted(_values(hour, 0, 23, 23))
        self.months = _values(month, 1, 12, 12)
        self.both = dom.startswith("*") or dow.startswith("*")
        parts = dom.split(",")
        self.last_day = "L" in parts
        self.doms = _values(",".join(p for p in parts if p != "L") or "0", 1, 31, 31)
        self.dows: set[int] = set()
        self.last_dows: set[int] = set()
        self.nth: set[tuple[int, int]] = set()
        for part in dow.split(","):
            if "#" in part:
                n, k = part.split("#")
                self.nth.add((int(n) % 7, int(k)))
            elif part.endswith("L"):
                self.last_dows.add(int(part[:-1]) % 7)
            else:
                self.dows |= {v % 7 for v in _values(part, 0, 7, 6)}

    def day(self, y: int, m: int, d: int) -> bool:
        ndays = calendar.monthrange(y, m)[1]
        wd = (date(y, m, d).weekday() + 1) % 7  # 0 = Sunday
        dom = d in self.doms or (self.last_day and d == ndays)
        dow = (
            wd in self.dows
            or (wd in self.last_dows and d + 7 > ndays)
            or (wd, (d - 1) // 7 + 1) in self.nth
        )
        return (dom and dow) if self.both else (dom or dow)

    def next(self, after: datetime) -> datetime | None:
        """First selected minute strictly after ``after`` within 400 years of it."""
        for y in range(after.year, after.year + CYCLE_YEARS + 1):
            for m in range(after.month if y == after.year else 1, 13):
                if m not in self.months:
                    continue
                start = after.day if (y, m) == (after.year, after.month) else 1
                for d in range(start, calendar.monthrange(y, m)[1] + 1):
                    if not self.day(y, m, d):
                        continue
                    for h in self.hours:
                        for mi in self.minutes:
                            t = datetime(y, m, d, h, mi)
                            if t > after:
                                return t
        return None


# -- the properties ----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(exprs, afters)
@example("0 0 * FEB 1#5", datetime(2044, 2, 29))  # next: 2072
@example("0 0 * 2 1#5", datetime(2072, 2, 29))  # next: 2112, over the non-leap 2100
@example("0 0 */10 FEB 1#5", datetime(2000, 1, 1))  # never
@example("0 0 29 2 0#5", datetime(2000, 1, 1))  # OR: every Feb 29
@example("0 0 */15 2 1L", datetime(2000, 1, 1))  # never: last Monday is the 22nd-29th
@example("0 0 * 2 0#5,1#5", datetime(2096, 3, 1))
def test_next_fire_equals_brute_force(expr: str, after: datetime) -> None:
    brute = _Brute(expr)
    try:
        cron = parse_cron(expr)
    except ScheduleError as exc:
        assert "never" in str(exc)
        # refused: no day in a whole cycle (every year kind occurs in any 400 years)
        assert brute.next(datetime(2000, 1, 1)) is None, expr
        return
    got = cron.next_wall(after, after.year + CYCLE_YEARS)
    assert got == brute.next(after), expr
    # the instant layer (UTC here) agrees, so a job on it keeps firing
    assert got is not None
    fire = next_fire(make_trigger(cron=expr), after.replace(tzinfo=UTC))
    assert fire == got.replace(tzinfo=UTC)


def test_fires_ever_is_exact_for_the_fifth_weekday_of_february() -> None:
    # every weekday is some leap February's fifth one, but only on the 29th
    for wd in range(7):
        assert fires_ever(parse_cron(f"0 0 * 2 {wd}#5"))
        assert fires_ever(parse_cron(f"0 0 29 2 {wd}#5"))
    with pytest.raises(ScheduleError, match="never select the same day"):
        parse_cron("0 0 */3 2 3#5")  # 1, 4, ... 28: never the 29th


def test_cache_stays_small_over_a_long_search() -> None:
    cron = parse_cron("0 0 * 2 1#5")
    assert cron.next_wall(datetime(2000, 1, 1), 2400) == datetime(2016, 2, 29)
    assert cron.next_wall(datetime(2016, 3, 1), 2416) == datetime(2044, 2, 29)
    # one entry per month shape and year kind, not per (year, month) visited
    assert len(cron._month_cache) <= 28 and len(cron._year_cache) <= 14


# -- the cost (a measurement, printed; not an assert on time) ------------------------------

WORST = (
    "0 0 * 2 1#5",  # fires every 28 or 40 years
    "59 23 * FEB 6#5",
    "0 0 29 2 *",  # every 4 or 8 years
    "0 0 31 * 1#5",
    "*/5 * * * *",
)


def test_next_fire_cost_is_measured(capsys: pytest.CaptureFixture[str]) -> None:
    """Print the cost of a next-fire right after a fire (cold caches, then warm)."""
    lines = []
    for expr in WORST:
        trigger = make_trigger(cron=expr, tz="Europe/Berlin")
        after = datetime(2072, 3, 1, tzinfo=UTC)
        n = 200
        start = time.perf_counter()
        for _ in range(n):
            cold = make_trigger(cron=expr, tz="Europe/Berlin")
            next_fire(cold, after)
        cold_us = (time.perf_counter() - start) / n * 1e6
        start = time.perf_counter()
        for _ in range(n):
            got = next_fire(trigger, after)
        warm_us = (time.perf_counter() - start) / n * 1e6
        assert got is not None and got > after
        lines.append(f"{expr!r:22} next {got:%Y-%m-%d}: {cold_us:7.0f} us parse+search, "
                     f"{warm_us:6.0f} us search")  # fmt: skip
    with capsys.disabled():
        print("\nnext fire after 2072-03-01 (Europe/Berlin):\n  " + "\n  ".join(lines))


def test_horizon_is_the_cycle() -> None:
    # a parsed expression fires within any 400 years: a far-away anchor still finds it
    cron: Cron = parse_cron("0 0 * 2 1#5")
    after = datetime(2400, 3, 1)
    got = cron.next_wall(after, after.year + CYCLE_YEARS)
    assert got is not None and got - after < timedelta(days=366 * 41)
