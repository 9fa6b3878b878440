"""The package's layering, checked on the source with ``ast`` (nothing is imported).

- ``broker/`` owns Redis I/O: no other module imports ``redis``, bar the few
  listed in ``REDIS_ALLOWED`` with their reason.
- The worker and the beat are separate processes: neither package imports
  the other.
- The beat, the worker and the task context go through broker methods: they
  never reach for ``broker.client`` or a private broker method.
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
BROKER_USERS = ("redcron/beat/", "redcron/worker/", "redcron/context.py")


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
