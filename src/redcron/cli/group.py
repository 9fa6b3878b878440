"""The ``redcron`` group's own machinery, light enough to load before any
command: a group that loads a command's module only when that command is
asked for (:class:`LazyGroup`), and turns redcron and Redis errors into one
line (:class:`RedcronGroup`).

``redcron --help`` and ``redcron --version`` import this module, click and
the settings, and nothing of the App, the broker, Redis, Flask or the
benchmarks (``tests/unit/test_cli_startup.py``).
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

from redcron.errors import RedcronError

LOG_LEVELS = ("debug", "info", "warning", "error")


def _expected(exc: BaseException) -> bool:
    """A failure the CLI reports as one line: a redcron error or a Redis one.
    redis is not imported here: only a command that talks to Redis loads it,
    and when nothing loaded it, no Redis error can have been raised."""
    if isinstance(exc, RedcronError):
        return True
    redis = sys.modules.get("redis")
    return redis is not None and isinstance(exc, redis.RedisError)


class RedcronGroup(click.Group):
    """A group that turns redcron and Redis errors into one line on stderr."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            if not _expected(exc):
                raise
            # the command that failed has loaded it: every family uses it
            from redcron.cli.common import describe, exit_code_for, fail

            logging.getLogger("redcron.cli").debug("command failed", exc_info=True)
            fail(describe(exc), exit_code_for(exc))


@dataclass(frozen=True)
class Lazy:
    """A command of a :class:`LazyGroup`, before its module is loaded.

    Attributes:
        target: where the command is, ``"module:attr"``.
        summary: the first paragraph of its help, which the group's ``--help``
            lists (cut to the terminal as click cuts it) without loading the
            module; ``tests/unit/test_cli_startup.py`` checks it is the
            command's own.
    """

    target: str
    summary: str

    def load(self) -> click.Command:
        module, _, attr = self.target.partition(":")
        command = getattr(importlib.import_module(module), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        return command

    def stand_in(self, name: str) -> click.Command:
        """A command that lists as the real one does, for ``--help``."""
        return click.Command(name, help=self.summary)


class LazyGroup(RedcronGroup):
    """A group whose commands are imported on first use (click's lazy group
    pattern): listing them (``--help``) imports nothing, running one imports
    its module only.

    ``lazy`` maps a command's name to where it is and what ``--help`` says
    about it (:class:`Lazy`).
    """

    def __init__(self, *args: Any, lazy: Mapping[str, Lazy], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.lazy[cmd_name].load(), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click's, but a command not loaded yet is listed from its summary."""
        listed = [
            (name, self.commands.get(name) or self.lazy[name].stand_in(name))
            for name in self.list_commands(ctx)
        ]
        listed = [(name, cmd) for name, cmd in listed if not cmd.hidden]
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _cmd in listed)
        with formatter.section("Commands"):
            formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in listed])
