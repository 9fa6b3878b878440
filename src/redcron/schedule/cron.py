"""Cron expressions: parsing, and wall-clock matching with no time zone involved.

A :class:`Cron` knows nothing about instants or DST; it answers "which naive
wall-clock second comes next". :mod:`redcron.schedule.triggers` maps wall times to
instants in a zone. Syntax (5 fields, or 6 with seconds first)::

    *  a  a-b  */n  a-b/n  a/n  a,b,c     JAN-DEC, SUN-SAT, day-of-week 7 = Sunday
    day-of-month: L (last day)            day-of-week: 5L (last Friday), 1#2 (2nd Monday)
    H, H/n, H(a-b), H(a-b)/n              a value hashed from the job key (Jenkins)
    @yearly @annually @monthly @weekly @daily @midnight @hourly

Day semantics are Vixie cron's: a day-of-month or day-of-week field that
*starts with* ``*`` (``*``, ``*/2``) leaves the other one in charge (both
must match); when neither starts with ``*`` a day matches if either does.
An expression whose day fields select no date of any year (``30 FEB``,
``*/10 FEB 1#5``) is refused here; every other one fires within any 400 years
(:mod:`redcron.schedule.cycle`).
"""

from __future__ import annotations

import calendar
import functools
import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime

from redcron.errors import ValidationError
from redcron.schedule import cycle

__all__ = ["Cron", "ScheduleError", "parse_cron"]


class ScheduleError(ValidationError):
    """A cron expression, interval, time zone or trigger is invalid or never fires."""


# name, low, high: day-of-week allows 7 (= Sunday) on input only
_SPECS = (
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)
_MONTHS = {n.upper(): i for i, n in enumerate(calendar.month_abbr) if n}
_WEEKDAYS = {n: i for i, n in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
# Longest each month can be; February 29 is possible, so "30 2" is the only impossible date
_MAX_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# Jenkins keeps hashed days to 1-28 so that every month has the chosen day
_HASH_RANGE = {"day-of-month": (1, 28), "day-of-week": (0, 6)}
_SYNTAX = "use a number, a range a-b, a step */n or a-b/n, a list a,b, or H"
_RANGE_RE = re.compile(r"^(\w+)(?:-(\w+))?(?:/(\w+))?$")
_HASH_RE = re.compile(r"^H(?:\((\w+)-(\w+)\))?(?:/(\w+))?$")


#: distinct (expression, H seed) pairs :func:`parse_cron` keeps parsed
_PARSED_MAX = 8192


def _fail(pos: int, name: str, message: str) -> ScheduleError:
    return ScheduleError("cron", f"field {pos} ({name}) {message}")


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression; every value tuple is sorted and de-duplicated."""

    expr: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: tuple[int, ...]  # 0 = Sunday
    last_day: bool = False  # day-of-month L
    last_weekdays: tuple[int, ...] = ()  # day-of-week nL
    nth_weekdays: tuple[tuple[int, int], ...] = ()  # day-of-week n#k as (n, k)
    dom_star: bool = True
    dow_star: bool = True
    # Neither the minute nor the hour field starts with "*": DST gaps and repeats
    # treat the job as "at this local time" (fire once) rather than "every so
    # often". Vixie cron and cronie decide the same way (MIN_STAR | HR_STAR), so
    # "*/15 2 * * *" runs in neither a skipped 02:xx hour nor once after it
    fixed_time: bool = False
    # Matching days per month shape (length, weekday of the 1st) and months per
    # year kind (leap, weekday of January 1st): 28 and 14 entries at most, asked
    # for thousands of times by the beat (see schedule/cycle.py)
    _month_cache: dict[tuple[int, int], tuple[int, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    _year_cache: dict[tuple[bool, int], cycle.YearPlan] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        """The days of ``year-month`` the day fields select, ascending (month not checked)."""
        return cycle.days_in(self, year, month)

    def matches(self, wall: datetime) -> bool:
        """Whether the naive wall-clock time ``wall`` (to the second) is selected."""
        return (
            wall.microsecond == 0
            and wall.second in self.seconds
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
            and wall.day in self.days_in(wall.year, wall.month)
        )

    def next_wall(self, after: datetime, until_year: int) -> datetime | None:
        """The first selected naive wall time strictly after ``after``; None past ``until_year``.

        A parsed expression fires within any 400 years (:data:`cycle.CYCLE_YEARS`),
        so ``after.year + 400`` is a horizon that misses nothing.
        """
        return cycle.next_wall(self, after, until_year)


def parse_cron(expr: str, *, job_key: str = "") -> Cron:
    """Parse a 5- or 6-field (seconds first) cron expression or an ``@`` macro.

    ``job_key`` seeds ``H`` fields, so one job always lands on the same
    minute while different jobs spread out. Raises :class:`ScheduleError`
    naming the field, the value and what is allowed.

    Parsed expressions are memoized (a :class:`Cron` is immutable; its
    month/year caches depend on the expression alone): a million jobs share a
    few thousand expressions, and the exactness check (:func:`cycle.fires_ever`)
    costs ~100 us, paid per job at every ``put`` and every beat load otherwise.
    The job key is part of the memo key only when the text may hold ``H``.
    """
    if not isinstance(expr, str):
        raise ScheduleError("cron", f"{expr!r} is not text; give an expression such as '0 2 * * *'")
    return _parse_cached(expr, job_key if "h" in expr.lower() else "")


@functools.lru_cache(maxsize=_PARSED_MAX)
def _parse_cached(expr: str, job_key: str) -> Cron:
    """:func:`parse_cron` of a text (errors are raised, never cached)."""
    bad = next((c for c in expr if not c.isascii()), None)
    if bad is not None:
        # int() and str.isdigit() accept "³", "٣" and fullwidth digits: refuse them all
        # here, so no field parser can take a look-alike for a number
        raise ScheduleError(
            "cron",
            f"'{expr}' holds the non-ASCII character {bad!r} (U+{ord(bad):04X}); "
            "write fields with the digits 0-9 and names such as MON or JAN",
        )
    text = " ".join(expr.split())
    if text.startswith("@"):
        macro = _MACROS.get(text.lower())
        if macro is None:
            every = text.lower().startswith("@every")
            hint = "; for intervals pass every= instead" if every else ""
            raise ScheduleError(
                "cron", f"unknown macro '{text}'; use one of {', '.join(_MACROS)}{hint}"
            )
        tokens = macro.split()
    else:
        tokens = text.split()
    if len(tokens) not in (5, 6):
        raise ScheduleError(
            "cron",
            f"expected 5 fields (minute hour day-of-month month day-of-week) or 6 with "
            f"seconds first, got {len(tokens)} in '{text}'",
        )
    # positions as the user wrote them, so errors point at the right field
    offset = 0 if len(tokens) == 6 else 1
    if offset:
        tokens = ["0", *tokens]
    minute, hour, dom, dow = tokens[1], tokens[2], tokens[3], tokens[5]

    def field_values(index: int) -> tuple[int, ...]:
        return tuple(sorted(_parse_field(tokens[index], index, index + 1 - offset, job_key)))

    # parsed left to right so the first bad field is the one reported
    seconds, minutes, hours = field_values(0), field_values(1), field_values(2)
    dom_pos = 4 - offset
    days, last_day = _parse_dom(dom, dom_pos, job_key)
    months = field_values(4)
    weekdays, last_weekdays, nth = _parse_dow(dow, 6 - offset, job_key)
    cron = Cron(
        expr=text,
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        days=tuple(sorted(days)),
        months=months,
        weekdays=tuple(sorted(weekdays)),
        last_day=last_day,
        last_weekdays=tuple(sorted(last_weekdays)),
        nth_weekdays=tuple(sorted(nth)),
        dom_star=dom[0] in "*?",
        dow_star=dow[0] in "*?",
        fixed_time=not (minute.startswith("*") or hour.startswith("*")),
    )
    _check_possible(cron, dom_pos, tokens)
    return cron


def _check_possible(cron: Cron, dom_pos: int, tokens: list[str]) -> None:
    """Refuse, at parse time, day fields that no date of any year satisfies.

    ``30 2`` gets its own message (the month is too short); the rest (``*/10 FEB
    1#5``: February's fifth Monday is the 29th, never 1, 11 or 21) are found by
    :func:`cycle.fires_ever` over the 14 kinds of year, which is exact: an
    expression that passes fires within every 400 years.
    """
    if cron.dow_star and not cron.last_day:
        longest = max(_MAX_DAYS[m] for m in cron.months)
        if cron.days[0] > longest:
            names = ",".join(calendar.month_abbr[m].upper() for m in cron.months)
            raise _fail(
                dom_pos,
                "day-of-month",
                f"value '{cron.days[0]}' never occurs in month {names} (at most {longest} "
                f"days); use L for the last day of the month",
            )
    if not cycle.fires_ever(cron):
        dom, month, dow = tokens[3], tokens[4], tokens[5]
        raise ScheduleError(
            "cron",
            f"fields {dom_pos}-{dom_pos + 2} (day-of-month '{dom}', month '{month}', "
            f"day-of-week '{dow}') never select the same day in any year (the calendar "
            f"repeats every {cycle.CYCLE_YEARS} years), so '{cron.expr}' would never fire; "
            "a day-of-month or day-of-week field starting with '*' means both must match",
        )


def _parse_dom(token: str, pos: int, job_key: str) -> tuple[set[int], bool]:
    days: set[int] = set()
    last = False
    for part in _split(token, pos, "day-of-month"):
        upper = part.upper()
        if upper == "L":
            last = True
        elif upper == "?":
            days.update(range(1, 32))
        elif "W" in upper or upper.startswith("L"):
            raise _fail(
                pos,
                "day-of-month",
                f"value '{part}' is not supported (W and L-n are not); "
                f"list the days explicitly or use L for the last day",
            )
        else:
            days |= _parse_part(part, 3, pos, job_key)
    return days, last


def _parse_dow(
    token: str, pos: int, job_key: str
) -> tuple[set[int], set[int], set[tuple[int, int]]]:
    weekdays: set[int] = set()
    last: set[int] = set()
    nth: set[tuple[int, int]] = set()
    name = "day-of-week"
    for part in _split(token, pos, name):
        upper = part.upper()
        if upper == "?":
            weekdays.update(range(7))
        elif upper == "L":
            raise _fail(
                pos, name, "value 'L' is ambiguous; write 5L for the last Friday, 0L for Sunday"
            )
        elif upper.endswith("L"):
            last.add(_value(part[:-1], 5, pos) % 7)
        elif "#" in part:
            day, _, k = part.partition("#")
            if not _is_digits(k) or not 1 <= int(k) <= 5:
                raise _fail(
                    pos,
                    name,
                    f"value '{part}' needs a week number 1-5 after '#', e.g. 1#2 (second Monday)",
                )
            nth.add((_value(day, 5, pos) % 7, int(k)))
        else:
            weekdays |= {v % 7 for v in _parse_part(part, 5, pos, job_key)}
    return weekdays, last, nth


def _split(token: str, pos: int, name: str) -> list[str]:
    parts = token.split(",")
    if any(not p for p in parts):
        raise _fail(
            pos, name, f"value '{token}' has an empty list item; separate values with single commas"
        )
    return parts


def _parse_field(token: str, index: int, pos: int, job_key: str) -> set[int]:
    out: set[int] = set()
    for part in _split(token, pos, _SPECS[index][0]):
        out |= _parse_part(part, index, pos, job_key)
    return out


def _parse_part(part: str, index: int, pos: int, job_key: str) -> set[int]:
    name, lo, hi = _SPECS[index]
    star_hi = 6 if index == 5 else hi  # "*" in day-of-week means 0-6; 7 would repeat Sunday
    if part.upper().startswith("H"):
        return _parse_hash(part, index, pos, job_key)
    if part == "*" or part.startswith("*/"):
        start, end = lo, star_hi
        step_text = part[2:] if part != "*" else None
    else:
        m = _RANGE_RE.match(part)
        if m is None:
            raise _fail(pos, name, f"value '{part}' is not understood; {_SYNTAX} ({lo}-{hi})")
        start = _value(m[1], index, pos)
        end = _value(m[2], index, pos) if m[2] else (star_hi if m[3] else start)
        step_text = m[3]
        if start > end:
            raise _fail(
                pos,
                name,
                f"range '{part}' goes backwards; write the low value first, e.g. '{end}-{start}'",
            )
    step = _step(step_text, part, index, pos)
    return set(range(start, end + 1, step))


def _parse_hash(part: str, index: int, pos: int, job_key: str) -> set[int]:
    name, lo, hi = _SPECS[index]
    m = _HASH_RE.match(part.upper())
    if m is None:
        raise _fail(pos, name, f"value '{part}' is not understood; use H, H/n, H(a-b) or H(a-b)/n")
    lo, hi = _HASH_RANGE.get(name, (lo, hi))
    if m[1]:
        start, end = _value(m[1], index, pos), _value(m[2], index, pos)
        if start > end:
            raise _fail(pos, name, f"range in '{part}' goes backwards; write H(low-high)")
        lo, hi = start, end
    # crc32, not hash(): str hashes are salted per process, and every beat
    # replica must agree on the value
    seed = zlib.crc32(f"{job_key}:{name}".encode())
    if m[3] is None:
        return {lo + seed % (hi - lo + 1)}
    step = _step(m[3], part, index, pos)
    return set(range(lo + seed % step, hi + 1, step))


def _step(text: str | None, part: str, index: int, pos: int) -> int:
    name, lo, hi = _SPECS[index]
    if text is None:
        return 1
    if not _is_digits(text) or not 1 <= int(text) <= hi - lo + 1:
        raise _fail(
            pos, name, f"step '{text}' in '{part}' must be a number from 1 to {hi - lo + 1}"
        )
    return int(text)


def _value(text: str, index: int, pos: int) -> int:
    name, lo, hi = _SPECS[index]
    names = _MONTHS if index == 4 else _WEEKDAYS if index == 5 else {}
    if text.isascii() and text.upper() in names:
        return names[text.upper()]
    if not _is_digits(text):
        hint = f" or a name {next(iter(names))}-{list(names)[-1]}" if names else ""
        raise _fail(pos, name, f"value '{text}' is not a number {lo}-{hi}{hint}")
    value = int(text)
    if not lo <= value <= hi:
        raise _fail(pos, name, f"value '{text}' is out of range {lo}-{hi}")
    return value


def _is_digits(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` is also true of "³", and ``int`` reads "٣"."""
    return text.isascii() and text.isdigit()
