"""Every state-changing face is audited: a walk of the click group (every
command declares its action with ``@audited`` or is on the read-only or
process lists below) and of the Flask URL map (every POST/PUT/PATCH/DELETE
route has an action name and the after-request hook that records it).  A new
command or route fails here until it says what it records; the lists are
checked for stale entries too.  That each declared command records its action
is tests/integration/test_cli_audit.py (and the API's, test_roles_actions.py)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator

import click
import flask
import pytest

from redcron import App
from redcron.cli.audit import audit_action
from redcron.cli.main import main
from redcron.dashboard import create_app
from redcron.dashboard.api import actions, auth

#: commands that only read (GET's counterpart): no action to record
READ_ONLY = frozenset({
    "admin token list", "audit list", "channels list", "channels log", "dlq list", "inspect",
    "jobs list", "jobs show", "runs list", "runs show", "runs watch", "task list",
    "task show", "tenants list", "tenants show", "tenants token list", "workers list",
    "workers token list",
})  # fmt: skip
#: the processes that are the system (their work is recorded as attempts, runs
#: and deliveries, not as a person's action), and the harnesses that start
#: their own Redis or keep to their own keys (benchmarks, chaos)
PROCESSES = frozenset({"worker", "beat", "up", "dashboard", "notifier", "chaos"})
HARNESS_GROUPS = ("bench",)
#: an action name: ``<noun>.<verb>``, as the API's
ACTION = re.compile(r"[a-z]+\.[a-z_]+")
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the top group loads a command when asked
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*path, name))
        else:
            yield " ".join((*path, name)), cmd


def test_every_command_declares_its_action_or_only_reads() -> None:
    missing = []
    for path, cmd in commands(main):
        action = audit_action(cmd)
        exempt = path in READ_ONLY or path in PROCESSES or path.split()[0] in HARNESS_GROUPS
        if action is None and not exempt:
            missing.append(path)
        assert not (action and exempt), f"{path}: audited and on an exempt list"
        if action:
            assert ACTION.fullmatch(action), f"{path}: {action!r} is no <noun>.<verb>"
    assert not missing, f"state-changing commands without @audited(...): {missing}"


def test_the_exempt_lists_name_only_commands_that_exist() -> None:
    paths = {path for path, _cmd in commands(main)}
    assert READ_ONLY - paths == set() and PROCESSES - paths == set()


def test_each_audited_command_records_what_it_declares() -> None:
    """Its module calls record_cli and names the action it declared (the
    integration test runs them; this catches a declaration with no record)."""
    for path, cmd in commands(main):
        action = audit_action(cmd)
        if action is None:
            continue
        module = inspect.getsource(inspect.getmodule(cmd.callback))  # type: ignore[arg-type]
        assert "record_cli(" in module, f"{path}: its module records nothing"
        assert f'"{action}"' in module, f"{path}: {action!r} is never recorded"


@pytest.fixture(scope="module")
def web() -> flask.Flask:
    # nothing below sends a request: the URL map needs no Redis
    return create_app(App("redis://127.0.0.1:1/0"), admin_token="t")


def hooks_of(web: flask.Flask, endpoint: str) -> list[object]:
    """The after-request functions that run for ``endpoint`` (app-wide and those
    of each blueprint it is nested in)."""
    parts = endpoint.split(".")[:-1]
    scopes: list[str | None] = [None] + [".".join(parts[: i + 1]) for i in range(len(parts))]
    return [f for scope in scopes for f in web.after_request_funcs.get(scope, [])]


def test_every_state_changing_route_is_recorded_under_a_name(web: flask.Flask) -> None:
    """Any POST/PUT/PATCH/DELETE route, of any blueprint (tokens and tenants
    routes added later too), is named in actions.NAMES and runs the hook."""
    missing, unhooked = [], []
    for rule in web.url_map.iter_rules():
        methods = (rule.methods or set()) & UNSAFE
        if not methods or rule.rule.startswith(auth.WORKER_PREFIX):
            continue  # a read; or the worker protocol: leases, not people's actions
        if rule.endpoint in actions.UNRECORDED:
            continue  # logging in and out: the session's own
        if rule.endpoint not in actions.NAMES:
            missing.append(f"{sorted(methods)} {rule.rule} ({rule.endpoint})")
        if actions.after_request not in hooks_of(web, rule.endpoint):
            unhooked.append(rule.rule)
    assert not missing, f"name these in dashboard/api/actions.py NAMES: {missing}"
    assert not unhooked, f"routes the action hook does not run for: {unhooked}"
    assert all(ACTION.fullmatch(name) for name in actions.NAMES.values())


def test_the_route_exemptions_name_routes_that_exist(web: flask.Flask) -> None:
    endpoints = {rule.endpoint for rule in web.url_map.iter_rules()}
    assert actions.UNRECORDED.issubset(endpoints) and actions.DATA_PLANE.issubset(endpoints)
    assert set(actions.NAMES).issubset(endpoints), set(actions.NAMES) - endpoints
