"""The package's layering, checked on the source with ``ast`` (nothing is imported),
and what importing it does, checked in fresh interpreters.

- ``broker/`` owns Redis I/O: no other module imports ``redis``, bar the few
  listed in ``REDIS_ALLOWED`` with their reason.
- The worker and the beat are separate processes: neither package imports
  the other.
- The beat, the worker, the task context and the dashboard go through broker
  methods: they never reach for ``broker.client`` or a private broker method.
- Importing any module builds no Redis client and reads no ``REDCRON_*``
  variable, so ``redcron --help`` works whatever ``REDCRON_REDIS_URL`` holds.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
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
    # the leaves themselves: nothing above them
    "errors": {"errors"},
    "keys": {"keys", "errors"},
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


# -- what importing does ---------------------------------------------------------------

#: a URL redis-py refuses: a module that built an App at import would fail on it
BAD_ENV = {"REDCRON_REDIS_URL": "http://x", "REDCRON_PREFIX": "not a prefix"}

#: run in a fresh interpreter: every Redis client constructor raises, and every read
#: of a REDCRON_* variable (or a copy of the whole environment from redcron code)
#: is an error, while every module of the package is imported
IMPORT_ALL = textwrap.dedent(
    """
    import importlib, os, sys, sysconfig, traceback
    import redis, redis.cluster, redis.connection, redis.sentinel

    def refuse(self, *args, **kwargs):
        raise AssertionError("a Redis client was built at import")

    for cls in (redis.Redis, redis.cluster.RedisCluster, redis.sentinel.Sentinel,
                redis.connection.ConnectionPool):
        cls.__init__ = refuse

    # third-party and standard modules may look at the environment (wsgiref copies
    # it); ours, and the guard's own test modules, may not
    THEIRS = tuple({p for k, p in sysconfig.get_paths().items() if "lib" in k})

    def ours():
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(
            ("<frozen", "<string>", os.__file__)
        ):
            frame = frame.f_back
        return frame is not None and not frame.f_code.co_filename.startswith(THEIRS)

    class Guarded(os._Environ):
        def __getitem__(self, key):
            if key.startswith("REDCRON_") and ours():
                raise AssertionError(f"{key} read at import")
            return super().__getitem__(key)

        def __iter__(self):
            if ours():
                raise AssertionError("the environment copied at import")
            return super().__iter__()

    env = os.environ
    os.environ = Guarded(env._data, env.encodekey, env.decodekey, env.encodevalue,
                         env.decodevalue)
    failed = []
    for name in sys.argv[1:]:
        try:
            importlib.import_module(name)
        except BaseException:
            failed.append(f"{name}: {traceback.format_exc()}")
    print("\\n".join(failed))
    sys.exit(1 if failed else 0)
    """
)


def test_importing_any_module_builds_no_client_and_reads_no_setting() -> None:
    """Issue 16, item 10: ``cli/bench/measure.py`` built an ``App()`` at import, so
    ``REDCRON_REDIS_URL=http://x redcron --help`` printed a traceback."""
    names = [_module_name(path) for path in _modules()]
    assert "redcron.cli.bench.measure" in names and "redcron.cli.main" in names
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, *names],
        env={**os.environ, **BAD_ENV},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_import_guard_catches_an_app_built_at_import(tmp_path: Path) -> None:
    """The check above would see the old ``app = register(App())``."""
    (tmp_path / "builds_an_app.py").write_text("from redcron import App\napp = App()\n")
    (tmp_path / "reads_env.py").write_text("import os\nURL = os.environ['REDCRON_X']\n")
    for module in ("builds_an_app", "reads_env"):
        proc = subprocess.run(
            [sys.executable, "-c", IMPORT_ALL, module],
            env={**os.environ, **BAD_ENV, "REDCRON_X": "1", "PYTHONPATH": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "AssertionError" in proc.stdout or "ConfigError" in proc.stdout, proc.stdout


#: the console script, as installed beside this interpreter
REDCRON = str(Path(sys.executable).with_name("redcron"))

#: commands whose --help must work whatever the environment holds
HELP = [[], ["worker"], ["beat"], ["dashboard"], ["up"], ["jobs"], ["jobs", "list"],
        ["task", "show"], ["tenants"], ["dlq"], ["doctor"], ["bench"],
        ["bench", "throughput"], ["chaos"], ["workers"], ["inspect"]]  # fmt: skip


@pytest.mark.parametrize("args", HELP, ids=lambda a: " ".join(a) or "redcron")
def test_help_needs_no_redis_whatever_the_environment_holds(args: list[str]) -> None:
    proc = subprocess.run(
        [REDCRON, *args, "--help"],
        env={**os.environ, **BAD_ENV},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stdout.startswith("Usage: "), proc.stdout


def test_a_malformed_url_is_one_line_for_a_command_that_needs_redis() -> None:
    proc = subprocess.run(
        [REDCRON, "jobs", "list"],
        env={**os.environ, "REDCRON_REDIS_URL": "http://x"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "redis_url 'http://x'" in lines[0], proc.stderr
