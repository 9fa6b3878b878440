"""``redcron audit list``: who did what (the action record,
:mod:`redcron.store.actions`), and how the CLI's own state-changing commands
add to it.

Named ``audit`` for the people reading it; the stream is ``actions`` (the
chaos checker's attempt audit, ``worker --audit``, is another stream).  The
CLI is the local admin: every command that changes state records what it
did once it succeeded, as ``cli:<user>`` (the operating-system user running
it): tokens, tenant settings and resets, jobs (apply, pause, resume, trigger,
delete), runs (cancel, retry), tasks (cancel), the DLQ (replay, discard),
channels, and ``doctor --repair``.  A command that fails is not recorded.

Each such command declares its action with :func:`audited`, and
``tests/unit/test_audit_coverage.py`` walks the click group: a command that
neither declares an action nor is on its list of read-only commands and
processes fails it, as an API route or form without an action name does.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from redcron.cli.common import (
    app_option,
    build_app,
    echo_listing,
    iso_ms,
    one_line,
    redis_option,
    table,
)
from redcron.engine import Core
from redcron.model import validation
from redcron.store import OPERATOR, Action, ActionLog, Actor, record_action


def cli_actor() -> Actor:
    """The person running the CLI: ``cli:<user>`` (``cli:unknown`` when the
    system names none)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container)
        user = "unknown"
    return Actor(f"cli:{user}", "cli", OPERATOR, "cli")


#: ids one CLI record names at most (a ``dlq replay --all`` may act on 100,000);
#: the detail says how many there were
RECORD_IDS = 100
#: the attribute :func:`audited` puts on a command's callback
AUDIT_ATTR = "redcron_audit_action"

C = TypeVar("C", bound=Callable[..., Any])


def audited(action: str) -> Callable[[C], C]:
    """Declare that a command changes state and records ``action`` (with
    :func:`record_cli`) once it succeeded; put it next to the ``def``."""

    def mark(callback: C) -> C:
        setattr(callback, AUDIT_ATTR, action)
        return callback

    return mark


def audit_action(command: click.Command) -> str | None:
    """The action ``command`` declared with :func:`audited` (None: none)."""
    return getattr(command.callback, AUDIT_ATTR, None)


def record_cli(
    broker: Core, action: str, tenant: str | None, ids: Sequence[str] = (), detail: str = ""
) -> None:
    """Record a CLI command that changed state (it succeeded: outcome ``ok``).
    Past :data:`RECORD_IDS` ids, the first are kept and the detail counts them."""
    if len(ids) > RECORD_IDS:
        more = f"{len(ids)} ids, the first {RECORD_IDS} listed"
        detail = f"{detail}; {more}" if detail else more
        ids = ids[:RECORD_IDS]
    record_action(broker, cli_actor(), action, tenant, ids, "ok", None, detail)


def actions_table(found: Sequence[Action]) -> str:
    rows = [
        (
            iso_ms(a.at),
            a.who,
            f"{a.kind} {a.role}".strip(),
            a.via,
            a.action,
            a.tenant or "",
            " ".join(a.ids),
            a.outcome + (f" ({a.status})" if a.status else ""),
            one_line(a.detail, 40),
        )
        for a in found
    ]
    return table(("at", "who", "as", "via", "action", "tenant", "ids", "outcome", "detail"), rows)


@click.group()
def audit() -> None:
    """Who did what: state-changing actions through the API, the dashboard and the CLI."""


@audit.command("list")
@click.option("--tenant", help="Only this tenant's actions (default: every action).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="Newest actions to show.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of text.")
@app_option
@redis_option
def list_cmd(
    tenant: str | None, limit: int, as_json: bool, app_path: str | None, redis_url: str | None
) -> None:
    """Recorded actions, newest first: when, who (a token id, `admin`, `cli:<user>`),
    what, on which ids, and the outcome (ok, refused, error)."""
    if tenant is not None:
        validation.name("tenant", tenant)
    found = ActionLog(build_app(app_path, redis_url).broker).page(tenant, limit).actions
    echo_listing(found, as_json, "no action recorded", lambda: actions_table(found))
