"""Fire times: cron in a time zone (with Vixie cron's DST rules), intervals, one-shots.

Pure: every function takes the current time as an argument and nothing here
reads a clock, so the beat and the tests agree to the microsecond.

Cron expressions are matched against *wall-clock* time in the trigger's zone
and each matching wall time is turned into instants:

* a normal wall time is one instant;
* a repeated wall time (the hour after a fall-back) is two instants:
  "wildcard" jobs, whose minute or hour field starts with ``*`` (as Vixie
  cron and cronie decide), fire at both; fixed-time jobs only at the first
  (they already ran "at 01:30" today);
* a skipped wall time (spring-forward gap) is no instant for wildcard jobs
  (``*/15 2 * * *`` does not run on that day, as in cron) and, for
  fixed-time jobs, the first instant after the gap, so a daily 02:30 job
  still runs on that day, once, however many of its times fell in the gap.

Wall order is not instant order around a fall-back (01:45 first time comes
before 01:00 second time), so near a change of UTC offset the answer is the
smallest instant over a window of wall times; elsewhere one bisect jump in
the wall-clock fields gives the answer directly.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from redcron.schedule.cron import Cron, ScheduleError, parse_cron
from redcron.schedule.cycle import CYCLE_YEARS

__all__ = [
    "Cron",
    "ScheduleError",
    "Trigger",
    "check_timezone",
    "fires_between",
    "make_trigger",
    "next_fire",
    "parse_cron",
    "parse_every",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# How far ahead (and behind) of a moment we look for a change of UTC offset.
# It bounds the fall-backs handled exactly: every one since 1970 is 3 h or
# less except Antarctica/Vostok's 7 h in 1994.
_NEAR = timedelta(hours=3)
# Years a cron search spans: the whole Gregorian cycle. parse_cron refuses an
# expression that selects no day in it, so a parsed one always fires within it
# ("0 0 * FEB 1#5", the fifth Monday of February, has gaps of 28 and 40 years)
_HORIZON_YEARS = CYCLE_YEARS
_UTC_ZONE = ZoneInfo("UTC")
# [0-9], not \d: \d and int() also take other scripts' digits (Arabic-Indic, fullwidth)
_EVERY_RE = re.compile(r"([0-9]+)([dhms])")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_MAX_EVERY_S = 36_500 * 86_400
EXAMPLES = {"cron": "'0 2 * * *'", "every": "'5m'"}


@dataclass(frozen=True)
class Trigger:
    """What a job fires on; build one with :func:`make_trigger`."""

    kind: str  # "cron" | "every" | "at" | "manual"
    cron: Cron | None = None
    every: timedelta | None = None
    at: datetime | None = None  # aware, UTC
    tz: ZoneInfo = _UTC_ZONE


#: no IANA zone name is longer (the longest today has 32 characters)
MAX_ZONE_NAME = 64


def check_timezone(name: str) -> ZoneInfo:
    """The zone called ``name`` (IANA, e.g. ``Europe/Berlin``) or a ScheduleError."""
    if isinstance(name, str) and len(name) <= MAX_ZONE_NAME:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):
            # OSError: a name the file system refuses (too long a path part...)
            pass
        # only on the error path: listing zones reads the whole tz database
        close = difflib.get_close_matches(name, sorted(available_timezones()), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
    else:
        hint = ""
    shown = str(name) if len(str(name)) <= MAX_ZONE_NAME else f"{str(name)[:MAX_ZONE_NAME]}..."
    raise ScheduleError(
        "tz", f"unknown time zone '{shown}'; use an IANA name such as Europe/Berlin{hint}"
    )


def parse_every(text: str) -> timedelta:
    """``"30s"``, ``"5m"``, ``"2h"``, ``"1d"``, ``"1h30m"`` or bare seconds ``"90"``; >= 1 s."""
    compact = "".join(str(text).split()).lower()
    if compact.isascii() and compact.isdigit():
        seconds = int(compact)
    else:
        parts = _EVERY_RE.findall(compact)
        units = [unit for _, unit in parts]
        if (
            not parts
            or "".join(n + u for n, u in parts) != compact
            or units != sorted(set(units), key="dhms".index)
        ):
            raise ScheduleError(
                "every",
                f"'{text}' is not an interval; use whole numbers with units d, h, m, s "
                f"from largest to smallest, e.g. 30s, 5m, 1h30m, or plain seconds such as 90",
            )
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)
    # clamped, as timedelta() overflows on a huge count; _check_every refuses it
    return _check_every(timedelta(seconds=min(seconds, _MAX_EVERY_S + 1)), text)


def _check_every(every: timedelta, text: object) -> timedelta:
    # next fire times (datetimes) would overflow long before such an interval meant anything
    if every > timedelta(seconds=_MAX_EVERY_S):
        raise ScheduleError(
            "every", f"interval '{text}' is longer than 100 years; use 36500d or less"
        )
    if every < timedelta(seconds=1):
        raise ScheduleError("every", f"interval '{text}' is shorter than 1 second; use 1s or more")
    return every


def make_trigger(
    *,
    cron: str | None = None,
    every: str | timedelta | None = None,
    at: datetime | None = None,
    tz: str = "UTC",
    job_key: str = "",
) -> Trigger:
    """Validate one schedule (cron, every or at; none means manual) into a Trigger.

    A naive ``at`` is a wall time in ``tz``; if that wall time repeats or is
    skipped by DST it means the same instant a fixed-time cron job would use.
    An empty ``cron`` or ``every`` is an error, not "unset": ``cron: ""`` in a job
    file is far more often a lost expression than a wish for a manual job.
    """
    for name, value in (("cron", cron), ("every", every)):
        if isinstance(value, str) and not value.strip():
            raise ScheduleError(
                name,
                f"{value!r} is empty; give a schedule such as "
                f"{EXAMPLES[name]}, or leave {name} out (null) for a manual job",
            )
    given = [
        name for name, value in (("cron", cron), ("every", every), ("at", at)) if value is not None
    ]
    if len(given) > 1:
        raise ScheduleError(
            given[0], f"{' and '.join(given)} are set together; a job takes at most one of them"
        )
    zone = check_timezone(tz)
    if cron is not None:
        return Trigger("cron", cron=parse_cron(cron, job_key=job_key), tz=zone)
    if every is not None:
        interval = every if isinstance(every, timedelta) else parse_every(every)
        return Trigger("every", every=_check_every(interval, every), tz=zone)
    if at is not None:
        if at.tzinfo is None:
            instant = min(_instants(at.replace(microsecond=0), zone, fixed=True))
            instant += timedelta(microseconds=at.microsecond)
        else:
            instant = at.astimezone(UTC)
        return Trigger("at", at=instant, tz=zone)
    return Trigger("manual", tz=zone)


def next_fire(
    trigger: Trigger, after: datetime, *, anchor: datetime | None = None
) -> datetime | None:
    """The first fire instant strictly after ``after``, as an aware UTC datetime.

    None for manual triggers and for an ``at`` already past. ``every`` fires
    on the grid ``anchor + k * every`` for every integer k (default anchor:
    the Unix epoch), so the answer needs no stored state and survives
    restarts; the interval is absolute time, untouched by DST.
    """
    if after.tzinfo is None or after.utcoffset() is None:
        raise ScheduleError(
            "after", f"naive datetime {after.isoformat()}; pass an aware one, e.g. in UTC"
        )
    if trigger.kind == "cron" and trigger.cron is not None:
        return _next_cron(trigger.cron, trigger.tz, after.astimezone(UTC))
    if trigger.kind == "every" and trigger.every is not None:
        origin = EPOCH if anchor is None else anchor
        if origin.tzinfo is None:
            raise ScheduleError("anchor", f"naive datetime {origin.isoformat()}; pass an aware one")
        steps = (after - origin) // trigger.every + 1  # floor, so after itself is excluded
        return (origin + steps * trigger.every).astimezone(UTC)
    if trigger.kind == "at" and trigger.at is not None:
        return trigger.at if trigger.at > after else None
    return None


def fires_between(
    trigger: Trigger,
    start: datetime,
    end: datetime,
    limit: int,
    *,
    anchor: datetime | None = None,
) -> list[datetime]:
    """Fire instants in ``(start, end]``, ascending, at most ``limit`` (the earliest ones)."""
    if limit < 0:
        raise ScheduleError("limit", f"limit {limit} is negative; pass 0 or more")
    if end.tzinfo is None:
        raise ScheduleError("end", f"naive datetime {end.isoformat()}; pass an aware one")
    out: list[datetime] = []
    current = start
    while len(out) < limit:
        fire = next_fire(trigger, current, anchor=anchor)
        if fire is None or fire > end:
            break
        out.append(fire)
        current = fire
    return out


def _next_cron(cron: Cron, tz: ZoneInfo, after: datetime) -> datetime:
    local = after.astimezone(tz)
    wall = local.replace(tzinfo=None)
    candidate = cron.next_wall(wall, wall.year + _HORIZON_YEARS)
    if candidate is None:
        raise _dead(cron, after)
    now_offset = local.utcoffset()
    soon_offset = (after + _NEAR).astimezone(tz).utcoffset()
    offset = candidate.replace(tzinfo=tz).utcoffset()
    assert now_offset is not None and soon_offset is not None and offset is not None
    # Fast path: no offset change just ahead (so no second pass over wall
    # times already behind us) and an ordinary candidate: its one instant wins
    if now_offset == soon_offset and offset == candidate.replace(tzinfo=tz, fold=1).utcoffset():
        return (candidate - offset).replace(tzinfo=UTC)
    # A fall-back just ahead replays the last (now - soon) of wall time
    lookback = max(now_offset - soon_offset, timedelta(0))
    return _scan(cron, tz, after, wall - lookback)


def _scan(cron: Cron, tz: ZoneInfo, after: datetime, start: datetime) -> datetime:
    """Smallest instant > after over the matching wall times from ``start`` on.

    Wall times past the best one map to later instants, except when the best
    lies in the second pass of a fall-back: first-pass wall times up to the
    size of that fall-back later can still map earlier, so scan that far.
    """
    best: datetime | None = None
    stop: datetime | None = None
    wall = cron.next_wall(start - timedelta(microseconds=1), start.year + _HORIZON_YEARS)
    while wall is not None and (stop is None or wall <= stop):
        for instant in _instants(wall, tz, fixed=cron.fixed_time):
            if instant > after and (best is None or instant < best):
                best = instant
                local = best.astimezone(tz)
                earlier, current = (best - _NEAR).astimezone(tz).utcoffset(), local.utcoffset()
                assert earlier is not None and current is not None
                stop = local.replace(tzinfo=None) + max(earlier - current, timedelta(0))
        wall = cron.next_wall(wall, wall.year + _HORIZON_YEARS)
    if best is None:
        raise _dead(cron, after)
    return best


def _instants(wall: datetime, tz: ZoneInfo, *, fixed: bool) -> list[datetime]:
    """The UTC instants a naive wall time stands for, under the module's DST rules."""
    before = wall.replace(tzinfo=tz).utcoffset()
    later = wall.replace(tzinfo=tz, fold=1).utcoffset()
    assert before is not None and later is not None  # ZoneInfo always has an offset
    if before == later:
        return [(wall - before).replace(tzinfo=UTC)]
    if before > later:  # repeated: fold=0 is the first pass, with the older, larger offset
        first = (wall - before).replace(tzinfo=UTC)
        return [first] if fixed else [first, (wall - later).replace(tzinfo=UTC)]
    return [_gap_end(wall, tz, before, later)] if fixed else []


def _gap_end(wall: datetime, tz: ZoneInfo, before: timedelta, later: timedelta) -> datetime:
    """The transition instant that skipped ``wall``: the first real instant after the gap."""
    # wall - later is still on the old offset, wall - before already on the new
    # one; tzdata transitions fall on whole seconds, so bisect on seconds
    lo = int(((wall - later).replace(tzinfo=UTC) - EPOCH).total_seconds())
    hi = int(((wall - before).replace(tzinfo=UTC) - EPOCH).total_seconds())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return EPOCH + timedelta(seconds=hi)


def _dead(cron: Cron, after: datetime) -> ScheduleError:
    # parse_cron refuses expressions that never fire, so only the end of the
    # datetime range (year 9999) gets here
    return ScheduleError(
        "cron",
        f"'{cron.expr}' has no fire time within {_HORIZON_YEARS} years after "
        f"{after.isoformat()} (nor before the year 9999 ends)",
    )
