"""The engine's one Protocol (``redcron/engine/api.py``) is exactly what the
processes and ``App`` call on the broker (issue 31 §1).

mypy checks that :class:`Broker` implements :class:`Engine`
(``redcron/engine/__init__.py``'s ``_a_broker_is_an_engine``); here, on the
source with ``ast``: the worker, the beat, the notifier, the task context and
the App call on their broker only members of ``Engine``, and each member is
called by one of them (a member nothing calls is dropped, not kept "just in
case"); and ``Broker`` defines each member with the Protocol's parameters.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path

from redcron.engine import Broker, Engine

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "redcron"
#: the users of the Protocol: the processes, the task context and the App
USERS = ("worker", "beat", "notify", "app", "context.py")
#: the names the users give their engine (``self.broker``, ``app.broker``, a
#: beat's ``engine`` parameter, the App's own ``_broker``)
HOLDERS = {"broker", "_broker", "engine"}


def members() -> set[str]:
    tree = ast.parse((PACKAGE / "engine" / "api.py").read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine"]
    return {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}


def calls() -> Iterator[tuple[str, int, str]]:
    """(module, line, member) for each ``<holder>.<member>`` in the users."""
    for user in USERS:
        here = PACKAGE / user
        for path in sorted(here.rglob("*.py")) if here.is_dir() else [here]:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.Attribute):
                    continue
                owner = node.value
                name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                if name in HOLDERS:
                    yield path.relative_to(PACKAGE).as_posix(), node.lineno, node.attr


def test_the_processes_call_only_engine_members() -> None:
    known = members()
    bad = [f"{mod}:{line} uses .{attr}" for mod, line, attr in calls() if attr not in known]
    assert not bad, "add the call to Engine (engine/api.py) and Broker, or go through it:\n" + (
        "\n".join(bad)
    )


def test_every_engine_member_is_called_by_a_process_or_the_app() -> None:
    used = {attr for _mod, _line, attr in calls()}
    assert members() - used == set(), "an Engine member nothing calls: drop it"


def test_the_broker_defines_each_member_with_the_protocols_parameters() -> None:
    for name in sorted(members()):
        want = getattr(Engine, name)
        if isinstance(want, property):
            continue  # settings and shards: an attribute and a property of Core
        have = getattr(Broker, name)
        assert list(inspect.signature(have).parameters) == list(
            inspect.signature(want).parameters
        ), name


def test_the_users_type_against_the_protocol_not_the_broker() -> None:
    bad = []
    for user in USERS:
        here = PACKAGE / user
        for path in sorted(here.rglob("*.py")) if here.is_dir() else [here]:
            if path == PACKAGE / "app" / "__init__.py":
                continue  # the App builds the Broker: the one user that names it
            text = path.read_text(encoding="utf-8")
            if "Broker" in {
                alias.name
                for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.ImportFrom)
                for alias in node.names
            }:
                bad.append(path.relative_to(PACKAGE).as_posix())
    assert not bad, bad
