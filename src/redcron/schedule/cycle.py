"""The 400-year Gregorian cycle: which days a cron's day fields select, and the next one.

Which days of a month the day-of-month and day-of-week fields select depends
only on the month's length and the weekday of its 1st; which months of a year
hold a selected day depends only on whether the year is a leap year and the
weekday of its January 1st.  So there are 28 kinds of month and 14 kinds of
year, and every one of the 14 occurs in each 400 years (the Gregorian
calendar repeats exactly every 400 years: 146,097 days, a whole number of
weeks).  Hence:

* an expression fires at all iff one of the 14 year kinds holds a selected
  day (:func:`fires_ever`, checked when the expression is parsed);
* a firing expression fires within any 400 consecutive years, so that is as
  far as :func:`next_wall` has to look;
* the search skips a year in one table lookup (its kind), a month in one
  bisect: "the fifth Monday of February" (next after 2044-02-29 in 2072)
  costs a few dozen cheap steps, never a walk over the days in between.

Pure, as the rest of ``schedule/``; :mod:`redcron.schedule.cron` delegates here.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left
from datetime import date, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # cron.py imports this module for its methods
    from redcron.schedule.cron import Cron

#: years after which the Gregorian calendar repeats, weekdays included
CYCLE_YEARS = 400
_LENGTHS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
#: days before the 1st of each month in a common year
_BEFORE = (0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)

#: a year's selected days: the months holding one (ascending), and their days
YearPlan = tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]


def _jan1(year: int) -> int:
    """Weekday of January 1st, 0 = Sunday (cron's numbering)."""
    return (date(year, 1, 1).weekday() + 1) % 7


def _month_shape(leap: bool, jan1: int, month: int) -> tuple[int, int]:
    """(length, weekday of the 1st) of ``month`` in a year of that kind."""
    extra = 1 if leap and month > 2 else 0
    length = 29 if leap and month == 2 else _LENGTHS[month]
    return length, (jan1 + _BEFORE[month] + extra) % 7


def _day_matches(cron: Cron, day: int, weekday: int, ndays: int) -> bool:
    dom = day in cron.days or (cron.last_day and day == ndays)
    dow = (
        weekday in cron.weekdays
        or (weekday in cron.last_weekdays and day + 7 > ndays)
        or (weekday, (day - 1) // 7 + 1) in cron.nth_weekdays
    )
    if cron.dom_star or cron.dow_star:
        return dom and dow
    return dom or dow


def month_days(cron: Cron, ndays: int, first: int) -> tuple[int, ...]:
    """The days a month of ``ndays`` days starting on weekday ``first`` (0 = Sunday)
    has selected, ascending (the month field is not consulted)."""
    key = (ndays, first)
    found = cron._month_cache.get(key)
    if found is None:
        found = tuple(
            d for d in range(1, ndays + 1) if _day_matches(cron, d, (first + d - 1) % 7, ndays)
        )
        cron._month_cache[key] = found
    return found


def days_in(cron: Cron, year: int, month: int) -> tuple[int, ...]:
    """The days of ``year-month`` the day fields select, ascending (month not checked)."""
    first, ndays = calendar.monthrange(year, month)
    return month_days(cron, ndays, (first + 1) % 7)


def _kind_plan(cron: Cron, leap: bool, jan1: int) -> YearPlan:
    key = (leap, jan1)
    found = cron._year_cache.get(key)
    if found is None:
        months: list[int] = []
        days: list[tuple[int, ...]] = []
        for month in cron.months:
            selected = month_days(cron, *_month_shape(leap, jan1, month))
            if selected:
                months.append(month)
                days.append(selected)
        found = (tuple(months), tuple(days))
        cron._year_cache[key] = found
    return found


def year_plan(cron: Cron, year: int) -> YearPlan:
    """The months of ``year`` that hold a selected day, and those days."""
    return _kind_plan(cron, calendar.isleap(year), _jan1(year))


def fires_ever(cron: Cron) -> bool:
    """Whether any date of any year is selected (all 14 year kinds occur in every
    400 years, so this is exact)."""
    return any(_kind_plan(cron, leap, jan1)[0] for leap in (False, True) for jan1 in range(7))


def next_wall(cron: Cron, after: datetime, until_year: int) -> datetime | None:
    """The first selected naive wall time strictly after ``after``; None past ``until_year``.

    Jumps field by field with bisect over the sorted values, and over years by
    their kind: a yearly job costs a handful of steps, one that fires every
    few decades a table lookup per year in between.
    """
    hours, minutes, seconds = cron.hours, cron.minutes, cron.seconds
    y, mo, d = after.year, after.month, after.day
    h, mi, s = after.hour, after.minute, after.second + 1
    until_year = min(until_year, 9999)
    while y <= until_year:
        months, month_sel = year_plan(cron, y)
        i = bisect_left(months, mo)
        if i == len(months):
            y, mo, d, h, mi, s = y + 1, 1, 1, 0, 0, 0
            continue
        if months[i] != mo:
            mo, d, h, mi, s = months[i], 1, 0, 0, 0
        days = month_sel[i]
        i = bisect_left(days, d)
        if i == len(days):
            mo, d, h, mi, s = mo + 1, 1, 0, 0, 0
            continue
        if days[i] != d:
            d, h, mi, s = days[i], 0, 0, 0
        i = bisect_left(hours, h)
        if i == len(hours):
            d, h, mi, s = d + 1, 0, 0, 0
            continue
        if hours[i] != h:
            h, mi, s = hours[i], 0, 0
        i = bisect_left(minutes, mi)
        if i == len(minutes):
            h, mi, s = h + 1, 0, 0
            continue
        if minutes[i] != mi:
            mi, s = minutes[i], 0
        i = bisect_left(seconds, s)
        if i == len(seconds):
            mi, s = mi + 1, 0
            continue
        return datetime(y, mo, d, h, mi, seconds[i])
    return None
