"""The package's layering, checked on the source with ``ast`` (nothing is imported).

- ``broker/`` owns Redis I/O: no other module imports ``redis``, bar the few
  listed in ``REDIS_ALLOWED`` with their reason.
- The worker and the beat are separate processes: neither package imports
  the other.
- The beat, the worker, the task context and the dashboard go through broker
  methods: they never reach for ``broker.client`` or a private broker method.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "redcron"

#: modules outside broker/ that may import redis, and why; fix code rather than grow this
REDIS_ALLOWED = {
    "redcron/cli/common.py": "turns redis connection and auth errors into one-line CLI messages",
    "redcron/cli/bench/measure.py": "the yardstick: bare INCRs measure Redis itself",
}

#: packages and modules that talk to Redis only through broker methods
BROKER_USERS = ("redcron/beat/", "redcron/worker/", "redcron/context.py", "redcron/dashboard/")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every module ``path`` imports, anywhere in it (functions and TYPE_CHECKING
    blocks too), as (line, absolute dotted name).  ``from a import b`` yields
    both ``a`` and ``a.b``: ``b`` may be a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def _is(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def test_the_module_walk_finds_the_package() -> None:
    names = {_rel(p) for p in _modules()}
    assert {"redcron/broker/broker.py", "redcron/beat/beat.py", "redcron/worker/worker.py"} <= names


@pytest.mark.parametrize("allowed", sorted(REDIS_ALLOWED))
def test_every_allowed_redis_importer_exists_and_still_needs_it(allowed: str) -> None:
    # an exception nobody uses any more is dropped, not kept "just in case"
    path = SRC / allowed
    assert path.is_file(), f"{allowed} is listed in REDIS_ALLOWED but does not exist"
    assert any(_is(name, "redis") for _line, name in _imports(path)), (
        f"{allowed} no longer imports redis: remove it from REDIS_ALLOWED"
    )


def test_only_the_broker_imports_redis() -> None:
    bad = [
        f"{_rel(path)}:{line} imports {name}"
        for path in _modules()
        if not _rel(path).startswith("redcron/broker/") and _rel(path) not in REDIS_ALLOWED
        for line, name in _imports(path)
        if _is(name, "redis")
    ]
    assert not bad, (
        "Redis I/O belongs in redcron/broker/ (exception types: redcron.broker.retry):\n"
        + "\n".join(bad)
    )


@pytest.mark.parametrize(("package", "other"), [("worker", "beat"), ("beat", "worker")])
def test_worker_and_beat_do_not_import_each_other(package: str, other: str) -> None:
    bad = [
        f"{_rel(path)}:{line} imports {name}"
        for path in sorted((PACKAGE / package).rglob("*.py"))
        for line, name in _imports(path)
        if _is(name, f"redcron.{other}")
    ]
    assert not bad, f"redcron.{package} must not depend on redcron.{other}:\n" + "\n".join(bad)


def _broker_reaches(path: Path) -> Iterator[tuple[int, str]]:
    """``<...>broker.client`` and ``<...>broker._private`` in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if name.lstrip("_") == "broker" and (node.attr == "client" or node.attr.startswith("_")):
            yield node.lineno, f"{name}.{node.attr}"


def test_beat_worker_and_context_use_broker_methods_only() -> None:
    bad = [
        f"{_rel(path)}:{line} uses {what}"
        for path in _modules()
        if _rel(path).startswith(BROKER_USERS)
        for line, what in sorted(_broker_reaches(path))
    ]
    assert not bad, (
        "talk to Redis through a public broker method (add one in redcron/broker/):\n"
        + "\n".join(bad)
    )


#: modules every layer may use: leaves with no I/O of their own
BASE = {"errors", "keys", "serde", "clock", "config", "redact", "lifeline"}

#: what each part of the package may import (top-level names under redcron/);
#: ``__init__`` is the package root (``from redcron import App``).  The CLI,
#: the bench, the embedded server and chaos (the scenario runner and its checker) are
#: faces and tools: they may use anything
#: (the dashboard too, but through App and store methods: see BROKER_USERS).
LAYERS: dict[str, set[str]] = {
    # pure: time arithmetic, and data with its validation (no Redis, no processes)
    "schedule": {"schedule", "model", *BASE},
    "model": {"model", "schedule", *BASE},
    # all Redis I/O
    "broker": {"broker", "model", "schedule", *BASE},
    # the user's entry point and the task context
    "app": {"app", "broker", "model", "schedule", "context", *BASE},
    "context": {"context", "broker", "model", *BASE},
    "loader": {"loader", "app", *BASE},
    # processes: the broker's clients, never each other
    "worker": {"worker", "broker", "model", "schedule", "app", "context", "loader", *BASE},
    "beat": {"beat", "broker", "model", "schedule", "app", *BASE},
    # the leaves themselves: nothing above them (errors checks numbers with
    # model.validation: a documented import cycle inside a function)
    "errors": {"errors", "model"},
    "keys": {"keys"},
    "serde": {"serde", "errors"},
    "clock": {"clock"},
    "redact": {"redact"},
    "lifeline": {"lifeline"},
    "config": {"config", "errors", "redact"},
}


def _part(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _top(name: str) -> str | None:
    """The top-level part of redcron an imported name belongs to (None: not ours)."""
    if not _is(name, "redcron") or name == "redcron":
        return None
    head = name.split(".")[1]
    known = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    return head if head in known else "__init__"


def test_every_part_is_placed_in_a_layer_or_is_a_face() -> None:
    faces = {"cli", "dashboard", "embedded", "chaos", "__init__", "lua", "__pycache__"}
    parts = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    assert parts - faces - set(LAYERS) == set(), "place new modules in LAYERS (or among faces)"


@pytest.mark.parametrize("part", sorted(LAYERS))
def test_each_part_imports_only_what_its_layer_allows(part: str) -> None:
    paths = sorted((PACKAGE / part).rglob("*.py")) or [PACKAGE / f"{part}.py"]
    bad = [
        f"{_rel(path)}:{line} imports {name}"
        for path in paths
        for line, name in _imports(path)
        if (top := _top(name)) is not None and top not in LAYERS[part]
    ]
    assert not bad, (
        f"redcron.{part} may import only {sorted(LAYERS[part])} (see docs/architecture.md):\n"
        + "\n".join(bad)
    )
