"""What every command shares: ``-A``/``--redis`` options, building the App,
turning errors into one line, and plain-text/JSON output helpers."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar

import click
import redis

from redcron.app import App
from redcron.cli.group import LOG_LEVELS
from redcron.config import DURABILITY
from redcron.errors import (
    BrokerError,
    ConfigError,
    Conflict,
    NotFound,
    RedisUnavailable,
    Rejected,
    ValidationError,
)
from redcron.loader import load_app
from redcron.model import serialize, validation

F = TypeVar("F", bound=Callable[..., Any])

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(processName)s %(name)s: %(message)s"

#: exit codes: 1 = the operation failed (missing, conflict, Redis down),
#: 2 = the invocation was wrong (bad input or config), as click uses for usage errors
EXIT_FAILED = 1
EXIT_USAGE = 2


LOG_FORMATS = ("text", "json")
#: a LogRecord's own attributes: everything else on a record came from ``extra=``
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO-8601 UTC), level, logger, message, the
    fields the log call passed with ``extra=``, and the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": serialize.iso(datetime.fromtimestamp(record.created, UTC)),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """:data:`LOG_FORMAT` (and a traced record's ``trace_id=… span_id=…``), the
    time of day formatted once for the records that share it: the worker's
    lines of one reported batch are copies of one record
    (:mod:`redcron.worker.attempt_log`), and ``strftime`` was a tenth of each."""

    def __init__(self) -> None:
        super().__init__(LOG_FORMAT)
        self._last: tuple[float, str] = (-1.0, "")

    def formatMessage(self, record: logging.LogRecord) -> str:
        # with tracing on, a record of an attempt (its line, its ctx.logger records)
        # joins its trace: ``... trace_id=<32 hex> span_id=<16 hex>``
        text = super().formatMessage(record)
        trace_id = getattr(record, "trace_id", None)
        if trace_id is None:
            return text
        return f"{text} trace_id={trace_id} span_id={getattr(record, 'span_id', '')}"

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        created, text = self._last
        if record.created != created or datefmt is not None:
            text = super().formatTime(record, datefmt)
            if datefmt is None:
                self._last = (record.created, text)
        return text


def setup_logging(level: str, log_format: str = "text") -> None:
    """Configure the root logger; only the CLI does this, never the library."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def logging_options(fn: F) -> F:
    """``--loglevel`` and ``--log-format`` of the long-running commands (worker,
    beat, up), which pass them to :func:`setup_logging`; the admin commands
    take the group's ``--loglevel`` instead."""
    fn = click.option(
        "--log-format",
        type=click.Choice(LOG_FORMATS),
        default="text",
        show_default=True,
        help="Log lines as text, or as one JSON object per line (fields as keys).",
    )(fn)
    return click.option(
        "--loglevel",
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        default="info",
        show_default=True,
    )(fn)


def app_option(fn: F) -> F:
    return click.option(
        "-A",
        "--app",
        "app_path",
        metavar="MODULE:ATTR",
        default=None,
        help="The App to use, e.g. tasks:app, or tasks:make_app() to call a factory "
        "(cwd is on sys.path).",
    )(fn)


def redis_option(fn: F) -> F:
    return click.option(
        "--redis",
        "redis_url",
        metavar="URL",
        default=None,
        envvar="REDCRON_REDIS_URL",
        help="Redis URL; overrides the app's [env: REDCRON_REDIS_URL; else the one in "
        ".redcron/redis.url (a running `redcron up`'s) in this directory or the nearest "
        "parent with one; else redis://127.0.0.1:6379/0, said on stderr; `redcron "
        "--version` shows which].",
    )(fn)


def durability_option(fn: F) -> F:
    return click.option(
        "--durability",
        type=click.Choice(DURABILITY),
        default=None,
        help="strict: every acknowledging write (enqueue, result, fire) waits for a "
        "replica (WAIT) and fails when none confirms in time [default: settings, env "
        "REDCRON_DURABILITY, else normal].",
    )(fn)


def say_on_stderr(level: int, text: str) -> None:
    """Where the CLI sends which Redis it found (``redis_url_notices``): the
    default's warning on stderr as one line, the rest to the log."""
    if level >= logging.WARNING:
        click.echo(f"warning: {text}", err=True)
    else:
        logging.getLogger("redcron.config").log(level, "%s", text)


def build_app(app_path: str | None, redis_url: str | None, durability: str | None = None) -> App:
    """Load ``app_path`` (or a bare ``App()``) and point it at ``redis_url`` (and
    ``durability``) if given.

    The App's connections are closed when the click command ends.
    """
    changes: dict[str, Any] = {
        k: v for k, v in (("redis_url", redis_url), ("durability", durability)) if v is not None
    }
    if app_path is None:
        app = App(redis_url, durability=durability)
    else:
        app = load_app(app_path)
        # replaced even when equal: settings the App did not find itself say
        # nothing about where their URL came from (App.broker)
        if redis_url is not None or any(getattr(app.settings, k) != v for k, v in changes.items()):
            app.settings = dataclasses.replace(app.settings, **changes)
            app.close()  # a broker made at import time still points at the old URL
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(app.close)
    return app


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(code)


def exit_code_for(exc: BaseException) -> int:
    if isinstance(exc, ConfigError | Rejected):
        return EXIT_USAGE
    return EXIT_FAILED


def describe(exc: BaseException) -> str:
    """One line for an expected failure."""
    if isinstance(exc, redis.AuthenticationError):
        return f"Redis refused our credentials: {exc}"
    if isinstance(exc, RedisUnavailable):  # it names the URL and the fix itself
        return str(exc)
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError | BrokerError):
        return f"cannot talk to Redis: {exc}"
    if isinstance(exc, NotFound | Conflict):
        return str(exc)
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# -- output -------------------------------------------------------------------


def iso_ms(value: datetime | None) -> str:
    """A time as ISO-8601 UTC with milliseconds (as ``--json`` prints it); '' when None."""
    return "" if value is None else serialize.iso(value)


def echo_json(value: Any) -> None:
    """Print records (or plain data holding them) as JSON through the one
    serializer the REST API uses too, so field names and formats agree."""
    click.echo(serialize.dumps(value))


def echo_listing(items: Sequence[Any], as_json: bool, empty: str, text: Callable[[], str]) -> None:
    """A list command's output: ``items`` as JSON, the line that says there is
    nothing (``empty``), or the text ``text()`` renders."""
    if as_json:
        echo_json(items)
    elif not items:
        click.echo(empty)
    else:
        click.echo(text())


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A left-aligned plain-text table (no borders, two spaces between columns)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def one_line(text: str, width: int = 60) -> str:
    """The last line of ``text`` (a traceback's is the exception), cut to ``width``."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def split_csv(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(part.strip() for part in value.split(",") if part.strip())


def concurrency_option(
    default: int | None, help_text: str, show: str | None = None
) -> Callable[[F], F]:
    """``-c/--concurrency`` (worker slots), shared by ``worker``, ``up`` and
    ``bench``; None leaves the choice to the worker (``show`` says what it is)."""
    return click.option(
        "-c",
        "--concurrency",
        type=click.IntRange(min=1),
        default=default,
        show_default=show or True,
        help=help_text,
    )


def prefetch_option(help_text: str, show: str) -> Callable[[F], F]:
    """``--prefetch`` (leases held beyond the slots), shared by ``worker`` and
    ``bench throughput``; None leaves it to the worker (``show`` says what it is)."""
    return click.option(
        "--prefetch",
        type=click.IntRange(min=0),
        default=None,
        show_default=show,
        help=help_text,
    )


def pool_option(help_text: str | None = None) -> Callable[[F], F]:
    """``--pool threads|processes`` (where tasks run), shared by ``worker`` and
    ``bench throughput``."""
    return click.option(
        "--pool",
        type=click.Choice(["threads", "processes"]),
        default="threads",
        show_default=True,
        help=help_text,
    )


class FiniteFloatRange(click.FloatRange):
    """A ``click.FloatRange`` that refuses ``nan`` and ``inf``: every comparison
    with NaN is false, so click's own bounds let it through."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        try:
            return validation.finite(number, (param.name if param else None) or "value")
        except ValidationError as exc:
            self.fail(str(exc).partition(": ")[2], param, ctx)


def grace_option(help_text: str) -> Callable[[F], F]:
    """``--grace SECONDS``, shared by ``worker`` and ``up``."""
    return click.option(
        "--grace",
        type=FiniteFloatRange(min=0),
        default=30.0,
        show_default=True,
        metavar="SECONDS",
        help=help_text,
    )
