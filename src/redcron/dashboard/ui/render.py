"""What every page shares: rendering (whole, or only its live part), paging,
and the Jinja filters that format times, durations and counts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any, Generic, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import flask
from markupsafe import Markup, escape
from werkzeug.wrappers import Response

from redcron.dashboard.ui import session
from redcron.dashboard.ui.charts import format_seconds
from redcron.model import RunRecord
from redcron.model.retry_rule import attempts_long, attempts_short
from redcron.store import Page

T = TypeVar("T")

#: what a page view answers (a page, or a redirect after a form)
Reply = Response

#: request header app.js sends when it refreshes a page's live part
LIVE_HEADER = "X-Redcron-Live"
#: rows per page of every list
PER_PAGE = 50
#: how often pages refresh their live part (ms)
REFRESH_MS = 1500


def is_live() -> bool:
    return flask.request.headers.get(LIVE_HEADER) == "1"


def page(template: str, title: str, status: int = 200, **context: Any) -> Reply:
    """Render ``ui/<template>``: the whole page, or only its ``live`` block when
    app.js asks for a refresh."""
    html = flask.render_template(
        f"ui/{template}", title=title, live_only=is_live(), refresh_ms=REFRESH_MS, **context
    )
    response: Reply = flask.make_response(html, status)
    return response


def go(endpoint: str, anchor: str | None = None, **values: Any) -> Reply:
    """303 See Other to a page (after a form): a reload does not post again."""
    return flask.redirect(flask.url_for(endpoint, _anchor=anchor, **values), code=303)


@dataclass(frozen=True)
class Pager(Generic[T]):
    """One page of a list: its rows and where the others are."""

    rows: Sequence[T]
    number: int
    per_page: int
    total: int | None  # None: unknown (a list read only as far as needed)
    more: bool

    @property
    def first(self) -> int:
        return (self.number - 1) * self.per_page + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1 if self.rows else 0

    @property
    def pages(self) -> int | None:
        return max(1, math.ceil(self.total / self.per_page)) if self.total is not None else None


@dataclass(frozen=True)
class Keyed(Generic[T]):
    """One page of a keyed list (``?after=`` / ``?before=`` a cursor): its rows,
    the cursors of the next and previous pages, and where it sits (None: not
    counted).  The pager macro ``keyed`` draws its links."""

    rows: Sequence[T]
    next: str | None
    prev: str | None
    offset: int | None = None
    total: int | None = None

    @property
    def first(self) -> int:
        return (self.offset or 0) + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1 if self.rows else 0


def keyed(found: Page[Any], rows: Sequence[T]) -> Keyed[T]:
    """A :class:`Keyed` page of ``rows`` (what the page shows of ``found``'s items),
    with ``found``'s cursors and counts."""
    return Keyed(rows, found.next_cursor, found.prev_cursor, found.offset, found.total)


def after_cursor() -> str | None:
    """The ``after`` query argument: show the page after this cursor."""
    return flask.request.args.get("after") or None


def before_cursor() -> str | None:
    """The ``before`` query argument: show the page before this cursor."""
    return flask.request.args.get("before") or None


def page_number() -> int:
    try:
        number = int(flask.request.args.get("page", "1"))
    except ValueError:
        number = 1
    return max(1, min(number, 100_000))


def paginate(items: Sequence[T], per_page: int = PER_PAGE, exact: bool = True) -> Pager[T]:
    """The requested page (``?page=N``) of ``items``; ``exact``: ``items`` is the
    whole list (else it was read only one row past the page, and the total is unknown)."""
    number = page_number()
    start = (number - 1) * per_page
    rows = items[start : start + per_page]
    more = len(items) > start + per_page
    return Pager(rows, number, per_page, len(items) if exact else None, more)


def wanted(per_page: int = PER_PAGE) -> int:
    """Rows to read to show the requested page and know whether another follows."""
    return page_number() * per_page + 1


def url_with(**changes: Any) -> str:
    """This page's URL with some query arguments changed (None removes one)."""
    args = flask.request.args.to_dict()
    for key, value in changes.items():
        if value is None:
            args.pop(key, None)
        else:
            args[key] = str(value)
    values: dict[str, Any] = {**(flask.request.view_args or {}), **args}
    return flask.url_for(flask.request.endpoint or "ui.overview.index", **values)


def when(value: datetime | None, empty: str = "—") -> Markup:
    """A ``<time>`` in UTC that app.js shows in the browser's zone (UTC on hover)."""
    if value is None:
        return Markup(escape(empty))
    utc = value.astimezone(UTC)
    iso = utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    text = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    return Markup('<time datetime="{}" title="{}">{}</time>').format(iso, text, text)


def in_zone(value: datetime | None, zone: str, empty: str = "—") -> str:
    """``value`` as wall-clock time in ``zone`` (a job's), e.g.
    "2026-03-29 02:30:00 CEST"; an unknown zone shows UTC."""
    if value is None:
        return empty
    try:
        tz: tzinfo = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        tz = UTC
    return value.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S %Z")


def run_time(run: RunRecord) -> datetime | None:
    """The time a run is for: its fire time, or when it was made (a manual run)."""
    return run.scheduled_for or run.created_at


def duration(seconds: float | None, empty: str = "—") -> str:
    return empty if seconds is None else format_seconds(seconds)


def between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def ago(value: datetime | None, now: datetime) -> str:
    if value is None:
        return "never"
    seconds = (now - value).total_seconds()
    return f"{duration(abs(seconds))} ago" if seconds >= 0 else f"in {duration(-seconds)}"


def error_line(error: str | None) -> str:
    """The line of an error that says what happened (a traceback's last), for a
    table cell or a graph's tooltip."""
    lines = [line for line in (error or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def error_block(error: str | None, folded: bool = False) -> Markup:
    """An error as written: one line as text, several (a Python traceback) in a
    ``<pre class="traceback">`` that keeps its lines and indentation.
    ``folded``: the traceback behind its last line (``<details>``), for a table."""
    if not error:
        return Markup("")
    if "\n" not in error.strip():
        return Markup('<span class="error">{}</span>').format(error.strip())
    pre = Markup('<pre class="traceback">{}</pre>').format(error.rstrip())
    if not folded:
        return pre
    return Markup(
        '<details class="traceback"><summary class="error">{}</summary>{}</details>'
    ).format(error_line(error), pre)


def state_badge(state: str | None) -> Markup:
    text = state or "unknown"
    return Markup('<span class="badge state-{}">{}</span>').format(text, text)


def may_act() -> bool:
    """Whether the logged-in person may change state (an operator): a viewer's
    pages show no button or form that would (and the POST handlers refuse)."""
    who = flask.g.get("identity")
    return bool(who is not None and who.may_change)


def install(web: flask.Flask) -> None:
    """The filters and globals every template may use."""
    web.jinja_env.filters.update(
        when=when,
        duration=duration,
        badge=state_badge,
        error_block=error_block,
        error_line=error_line,
        attempts=lambda t: attempts_short(t, " / "),
        attempts_long=attempts_long,
    )
    web.jinja_env.globals.update(
        csrf_token=session.csrf_token,
        may_act=may_act,
        url_with=url_with,
        between=between,
        ago=ago,
        local=in_zone,
        run_time=run_time,
    )
