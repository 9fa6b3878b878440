"""Schedules in words, and the next few fire times, for the dashboard's Jobs page.

:func:`describe` reads the parsed :class:`~redcron.schedule.triggers.Trigger`, not
the text the user typed, so an ``H`` field reads as the value the parser chose
and a sentence can only say what the beat will do. Day fields follow
:mod:`redcron.schedule.cron` (Vixie cron): when neither day-of-month nor
day-of-week starts with ``*`` a day matches if *either* does ("on day 1 or on
Monday"); otherwise both must.

Only a few shapes get a tidy sentence ("every 15 minutes from 09:00 to 17:45,
Monday to Friday"); anything else is spelled out field by field ("at minutes 0,
10 and 45 of hours 9-17"), and a description too long to read becomes
``cron <expr>``: plainer, never a sentence that says something the job won't do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from itertools import pairwise
from zoneinfo import ZoneInfo

from redcron.schedule.cron import Cron
from redcron.schedule.triggers import ScheduleError, Trigger, fires_between

__all__ = ["describe", "upcoming"]

# English, not calendar.month_name: that one follows the process's LC_TIME
_MONTHS = (
    "",
    *("January", "February", "March", "April", "May", "June", "July", "August"),
    *("September", "October", "November", "December"),
)
_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_ORDINALS = ("", "first", "second", "third", "fourth", "fifth")
_ALL_SECONDS = tuple(range(60))
_ALL_MINUTES = _ALL_SECONDS
_ALL_HOURS = tuple(range(24))
_ALL_DAYS = tuple(range(1, 32))
_ALL_MONTHS = tuple(range(1, 13))
_ALL_WEEKDAYS = tuple(range(7))
# Zones that are UTC under another name: an "at" in them reads "... UTC", and
# nothing gets a zone suffix
_UTC_NAMES = frozenset(
    {"UTC", "Etc/UTC", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu"}
)
# Past this a "sentence" is a wall of numbers; the expression itself reads better
_MAX_LEN = 160
_UNITS = ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))
# no end: upcoming() is fires_between() bounded by count alone
_END_OF_TIME = datetime.max.replace(tzinfo=UTC)


def describe(trigger: Trigger) -> str:
    """A job's schedule as a person would say it, e.g. ``"at 02:00 every day, Europe/Berlin"``.

    Cron schedules end with the zone unless it is UTC; ``every`` intervals are
    absolute time and name none; ``at`` reads in the job's zone.
    """
    if trigger.kind == "cron" and trigger.cron is not None:
        text = _describe_cron(trigger.cron)
        return text if _is_utc(trigger.tz) else f"{text}, {trigger.tz}"
    if trigger.kind == "every" and trigger.every is not None:
        every = trigger.every
        return _every(every.days * 86400 + every.seconds, every.microseconds)
    if trigger.kind == "at" and trigger.at is not None:
        local = trigger.at.astimezone(trigger.tz)
        when = f"{local:%Y-%m-%d %H:%M}"
        if local.microsecond:
            when += f":{local.second:02}.{local.microsecond:06}"
        elif local.second:
            when += f":{local.second:02}"
        return f"once at {when} UTC" if _is_utc(trigger.tz) else f"once at {when}, {trigger.tz}"
    return "manual only (trigger it)"


def upcoming(
    trigger: Trigger, after: datetime, count: int = 5, *, anchor: datetime | None = None
) -> list[datetime]:
    """The next ``count`` fire instants strictly after ``after``, aware UTC, ascending.

    Fewer when the trigger runs out (manual, an ``at`` already past). ``anchor``
    is the phase of an ``every`` grid, as in :func:`next_fire`; the beat passes
    none (the Unix epoch), so leave it out to show what the beat will do.
    Raises :class:`ScheduleError` as :func:`next_fire` does (naive times, a search
    that runs past the year 9999).
    """
    if count < 0:
        raise ScheduleError("count", f"count {count} is negative; pass 0 or more")
    return fires_between(trigger, after, _END_OF_TIME, count, anchor=anchor)


def _is_utc(tz: ZoneInfo) -> bool:
    return str(tz) in _UTC_NAMES


def _describe_cron(c: Cron) -> str:
    with_seconds = c.seconds != (0,)

    def clock(t: int) -> str:
        text = f"{t // 3600:02}:{t // 60 % 60:02}"
        return f"{text}:{t % 60:02}" if with_seconds else text

    time, at_times = _time(c, clock)
    months = None if c.months == _ALL_MONTHS else _named(c.months, _MONTHS, lambda m: m)
    day, kind = _days(c)
    if kind == "daily":
        text = time + (" every day" if at_times else "") + (f" in {months}" if months else "")
    elif kind == "monthly":
        text = f"{time}{day} of {months or 'every month'}"
    else:  # weekly or mixed: "of every month" would misread as "the first Monday of ..."
        text = time + day + (f" in {months}" if months else "")
    return text if len(text) <= _MAX_LEN else f"cron {c.expr}"


def _time(c: Cron, clock: Callable[[int], str]) -> tuple[str, bool]:
    """The times of day, and whether they are a short list of clock times ("at 08:00")."""
    offsets = [m * 60 + s for m in c.minutes for s in c.seconds]  # within the hour, ascending
    if len(offsets) == 1:
        return _once_an_hour(offsets[0], c, clock)
    times = len(offsets) * len(c.hours)
    if c.hours != _ALL_HOURS and times <= 4:
        return "at " + _join([clock(h * 3600 + o) for h in c.hours for o in offsets]), True
    step = _step(offsets)
    # evenly spaced across hour boundaries too: the hour holds a whole number of steps
    if step and 3600 % step == 0 and len(offsets) == 3600 // step:
        every = _every(step)
        if c.hours == _ALL_HOURS:
            if offsets[0] == 0:
                return every, False
            unit = "minute" if 60 % step == 0 else "hour"
            return f"{every} from {_amount(offsets[0])} past the {unit}", False
        runs = _runs(c.hours)
        if len(runs) <= 3:
            windows = [
                f"from {clock(a * 3600 + offsets[0])} to {clock(b * 3600 + offsets[-1])}"
                for a, b in runs
            ]
            return f"{every} {_join(windows)}", False
    if times <= 6:
        return "at " + _join([clock(h * 3600 + o) for h in c.hours for o in offsets]), True
    return _fields(c), False


def _once_an_hour(offset: int, c: Cron, clock: Callable[[int], str]) -> tuple[str, bool]:
    hours = c.hours
    if hours == _ALL_HOURS:
        return ("every hour" if offset == 0 else f"at {_amount(offset)} past every hour"), False
    step = _step(hours)
    if step and (len(hours) >= 4 or (step == 1 and len(hours) >= 3)):
        whole_day = hours[0] == 0 and 24 % step == 0 and len(hours) == 24 // step
        if whole_day and offset == 0:
            return f"every {step} hours", False
        every = "every hour" if step == 1 else f"every {step} hours"
        first, last = clock(hours[0] * 3600 + offset), clock(hours[-1] * 3600 + offset)
        return f"{every} from {first} to {last}", False
    if len(hours) <= 6:
        return "at " + _join([clock(h * 3600 + offset) for h in hours]), True
    runs = _runs(hours)
    if len(runs) <= 3:
        parts = [
            f"from {clock(a * 3600 + offset)} to {clock(b * 3600 + offset)}"
            if a != b
            else f"at {clock(a * 3600 + offset)}"
            for a, b in runs
        ]
        return f"every hour {_join(parts)}", False
    return _fields(c), False


def _fields(c: Cron) -> str:
    """The time fields one by one: "at minutes 0-29 of hours 9-17", "every second during ..."."""
    parts = [] if c.seconds == (0,) else [_field(c.seconds, _ALL_SECONDS, "second")]
    parts.append(_field(c.minutes, _ALL_MINUTES, "minute"))
    if c.minutes != _ALL_MINUTES or c.hours != _ALL_HOURS:  # not "of every minute of every hour"
        parts.append(_field(c.hours, _ALL_HOURS, "hour"))
    text = parts[0]
    for before, part in pairwise(parts):
        text += (" during " if before.startswith("every") else " of ") + part
    return text if text.startswith("every") else f"at {text}"


def _field(values: tuple[int, ...], full: tuple[int, ...], unit: str) -> str:
    if values == full:
        return f"every {unit}"
    return f"{unit if len(values) == 1 else unit + 's'} {_numbers(values)}"


def _days(c: Cron) -> tuple[str, str]:
    """The day phrase (with its leading space or comma) and its kind.

    Kinds: "daily" (every day), "monthly" (days of the month: takes "of every
    month"), "weekly" (plain weekdays), "mixed" (both, as a Vixie either-or).
    """
    dom_full, dow_full = c.days == _ALL_DAYS, c.weekdays == _ALL_WEEKDAYS
    if c.dom_star or c.dow_star:  # both must match; a full field is no constraint
        if dom_full and dow_full:
            return "", "daily"
        if dow_full:
            return " on " + " and on ".join(_dom_items(c)), "monthly"
        if dom_full:
            return _weekly(c)
        dows = _join(_dow_items(c, "or"), "or")
        return f" on {' and on '.join(_dom_items(c))} (only if it is {dows})", "mixed"
    if dom_full or dow_full:
        return "", "daily"
    either = " or on ".join(_dom_items(c) + _dow_items(c, "or"))
    return f" on {either}", "mixed" if c.weekdays else "monthly"


def _weekly(c: Cron) -> tuple[str, str]:
    if not c.last_weekdays and not c.nth_weekdays:
        if len(c.weekdays) == 1:
            return f" on {_WEEKDAYS[c.weekdays[0]]}s", "weekly"
        names = _weekday_names(c.weekdays)
        if " to " in names and "," not in names and " and " not in names:
            return f", {names}", "weekly"  # one range: ", Monday to Friday"
        return f" on {names}", "weekly"
    kind = "mixed" if c.weekdays else "monthly"
    return " on " + " and on ".join(_dow_items(c)), kind


def _dom_items(c: Cron) -> list[str]:
    items = []
    if c.days and c.days != _ALL_DAYS:
        items.append(f"{'day' if len(c.days) == 1 else 'days'} {_numbers(c.days)}")
    if c.last_day:
        items.append("the last day")
    return items


def _dow_items(c: Cron, conjunction: str = "and") -> list[str]:
    items = [_weekday_names(c.weekdays, conjunction)] if c.weekdays else []
    items += [f"the last {_WEEKDAYS[d]}" for d in c.last_weekdays]
    items += [f"the {_ORDINALS[k]} {_WEEKDAYS[d]}" for d, k in c.nth_weekdays]
    return items


def _weekday_names(days: Sequence[int], conjunction: str = "and") -> str:
    # Monday first, so Friday-Sunday reads as a range
    return _named(days, _WEEKDAYS, lambda d: (d - 1) % 7, conjunction)


def _named(
    values: Sequence[int],
    names: Sequence[str],
    position: Callable[[int], int],
    conjunction: str = "and",
) -> str:
    """Names in display order; three or more in a row as "Monday to Friday"."""
    by_position = {position(v): v for v in values}
    items = []
    for a, b in _runs(sorted(by_position)):
        first, last = names[by_position[a]], names[by_position[b]]
        if b - a >= 2:
            items.append(f"{first} to {last}")
        else:
            items += [first] if a == b else [first, last]
    return _join(items, conjunction)


def _numbers(values: Sequence[int]) -> str:
    """ "5", "1 and 15", "0-29", "0, 10 and 45", "1 to 31 in steps of 2"."""
    step = _step(values)
    if step and step > 1 and len(values) >= 4:
        return f"{values[0]} to {values[-1]} in steps of {step}"
    items = []
    for a, b in _runs(values):
        if b - a >= 2:
            items.append(f"{a}-{b}")
        else:
            items += [str(a)] if a == b else [str(a), str(b)]
    return _join(items)


def _every(seconds: int, microseconds: int = 0) -> str:
    """ "every minute", "every 15 minutes", "every 1 hour 30 minutes"."""
    amount = _amount(seconds, microseconds)
    return "every " + (amount[2:] if amount.startswith("1 ") and " " not in amount[2:] else amount)


def _amount(seconds: int, microseconds: int = 0) -> str:
    """ "1 minute", "90 s" as "1 minute 30 seconds", "1.5 seconds"; always with numbers."""
    parts = []
    for size, unit in _UNITS:
        n, seconds = divmod(seconds, size)
        if size == 1 and microseconds:
            number = f"{n}.{microseconds:06}".rstrip("0")
            parts.append(f"{number} seconds")
        elif n:
            parts.append(f"{n} {unit}" + ("s" if n != 1 else ""))
    return " ".join(parts)


def _step(values: Sequence[int]) -> int | None:
    """The common difference when ``values`` (two or more, ascending) are evenly spaced."""
    if len(values) < 2:
        return None
    step = values[1] - values[0]
    ok = all(b - a == step for a, b in pairwise(values))
    return step if ok else None


def _runs(values: Sequence[int]) -> list[tuple[int, int]]:
    """Ascending ``values`` as (first, last) runs of consecutive numbers."""
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def _join(items: Sequence[str], conjunction: str = "and") -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {conjunction} {items[-1]}"
