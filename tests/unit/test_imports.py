"""The package's layering, as DESIGN.md §2 draws it, checked on the source with
``ast`` (nothing is imported), and what importing it does, checked in fresh
interpreters.

DESIGN.md §2: faces (``cli/``, ``dashboard/``, ``chaos/``) -> processes
(``worker/``, ``beat/``, ``notify/``) -> the client API (``App``) -> the
control plane (``store/``) -> the data path (``engine/``) -> the model (specs,
states, settings, ``keys.py``) and ``schedule/`` (pure time); the doctor is a
tool over the engine and the store.  Each layer imports only those below it;
workers and beats never import each other; the model and ``schedule/`` import
no Redis.  Enforced here:

- ``LAYERS``: what each top-level part may import.  The engine imports
  neither the store nor anything above it; the store imports the engine, never
  the reverse; neither imports a face, a process or the doctor.  ``model`` may
  use ``schedule`` (a JobSpec builds its Trigger), never the reverse; the
  leaves (``errors``, ``keys``...) import nothing above them.
- The engine, the store and the doctor own Redis I/O (``REDIS_OWNERS``): no
  other module imports ``redis``, bar the few in ``REDIS_ALLOWED``, each with
  its reason.
- The worker and the beat are separate processes: neither imports the other.
- The processes, the task context and ``App`` import the names
  ``redcron.engine`` and ``redcron.store`` export, never a submodule; they type
  against ``redcron.engine.Engine``, the one Protocol of the data path
  (``tests/unit/test_engine_api.py``).  Only ``redcron.engine``'s
  ``__init__`` imports the facade module (``engine/broker.py``); only the App,
  the testing mode and the faces name ``Broker``, to build one.
- The faces (and the chaos tool) reach Redis only through ``App`` and the
  names ``redcron.engine``, ``redcron.store`` and ``redcron.doctor`` export
  (``__all__``), never a submodule, bar ``FACE_ALLOWED``; the processes, the
  task context and the faces use broker methods, never ``broker.client`` or a
  private broker method, bar ``CLIENT_ALLOWED``.
- Importing any module builds no Redis client and reads no ``REDCRON_*``
  variable, so ``redcron --help`` works whatever ``REDCRON_REDIS_URL`` holds.
- The checkout's ``bench/`` (the peers side by side, not in the wheel) may
  import redcron; redcron never imports it.

Every allowlist entry must still be needed: one that nothing uses fails.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = SRC / "redcron"
#: the checkout's benchmarks against other systems: outside the wheel, above it
BENCH = ROOT / "bench"

#: the packages that own Redis I/O: the data path, the control plane, and the
#: doctor, which reads and repairs keys below their methods
REDIS_OWNERS = ("redcron/engine/", "redcron/store/", "redcron/doctor/")
#: modules outside REDIS_OWNERS that may import redis, and why; fix code rather than grow this
REDIS_ALLOWED = {
    "redcron/cli/common.py": "turns redis connection and auth errors into one-line CLI messages",
    "redcron/cli/bench/fixtures.py": "the bench.incr body: one bare INCR, as peers are measured",
    "redcron/cli/bench/throughput.py": "the yardstick: bare INCRs measure Redis itself",
    "redcron/embedded_cluster.py": (
        "assembles a local cluster (CLUSTER ADDSLOTS, MEET, INFO) before any broker can connect"
    ),
}

#: the faces: they reach Redis through App and the exports of redcron.engine,
#: redcron.store and redcron.doctor only
FACES = ("redcron/cli/", "redcron/dashboard/", "redcron/chaos/")

#: (module, submodule) a face may import past its package's exports, and why
FACE_ALLOWED: dict[tuple[str, str], str] = {}

#: the processes, the task context and the App: the users of the engine's Protocol
PROCESSES = (
    "redcron/beat/",
    "redcron/worker/",
    "redcron/notify/",
    "redcron/context.py",
    "redcron/app/",
)

#: packages and modules that talk to Redis only through broker methods
BROKER_USERS = ("redcron/beat/", "redcron/worker/", "redcron/notify/", "redcron/context.py", *FACES)

#: modules of BROKER_USERS that may use ``broker.client`` or a private broker
#: method, and why
CLIENT_ALLOWED = {
    "redcron/cli/bench/fixtures.py": "the benchmarks wait on instance states and delete their keys",
    "redcron/cli/bench/throughput.py": "the drain span is read from the instance hashes",
    "redcron/cli/bench/trigger.py": "the fire count and run creation times, read bare",
    "redcron/cli/bench/midnight.py": (
        "the due instances' fire, lease and end times, beat owners and workers, read bare"
    ),
    "redcron/cli/bench/fairness.py": "lease times, tenants set up bare, EVALSHA cost from INFO",
    "redcron/cli/bench/soak.py": "the soak benchmark reads memory use and counts keys",
    "redcron/cli/bench/leases.py": (
        "Redis CPU and script time from INFO, deadlines and reap times read bare"
    ),
}


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
    assert {"redcron/engine/broker.py", "redcron/beat/beat.py", "redcron/worker/worker.py"} <= names


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
        if not _rel(path).startswith(REDIS_OWNERS) and _rel(path) not in REDIS_ALLOWED
        for line, name in _imports(path)
        if _is(name, "redis")
    ]
    assert not bad, (
        "Redis I/O belongs in redcron/engine/ (exception types: redcron.engine.retry):\n"
        + "\n".join(bad)
    )


@pytest.mark.parametrize("part", ["model", "schedule"])
def test_the_model_and_schedule_import_no_redis(part: str) -> None:
    # DESIGN §2 in so many words; also implied by the two tests above
    bad = [
        f"{_rel(path)}:{line} imports {name}"
        for path in sorted((PACKAGE / part).rglob("*.py"))
        for line, name in _imports(path)
        if _is(name, "redis") or _is(name, "redcron.engine") or _is(name, "redcron.store")
    ]
    assert not bad, f"redcron.{part} is pure: no Redis\n" + "\n".join(bad)


@pytest.mark.parametrize(("package", "other"), [("worker", "beat"), ("beat", "worker")])
def test_worker_and_beat_do_not_import_each_other(package: str, other: str) -> None:
    bad = [
        f"{_rel(path)}:{line} imports {name}"
        for path in sorted((PACKAGE / package).rglob("*.py"))
        for line, name in _imports(path)
        if _is(name, f"redcron.{other}")
    ]
    assert not bad, f"redcron.{package} must not depend on redcron.{other}:\n" + "\n".join(bad)


#: the packages whose exports (``__all__``) the faces import, never a submodule
EXPORTING = ("engine", "store", "doctor")


def _exports(package: str) -> set[str]:
    """``redcron.<package>.__all__``, read from the source."""
    init = PACKAGE / package / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{_rel(init)} defines no __all__")


def _reaches_past(path: Path, packages: Sequence[str]) -> Iterator[tuple[int, str]]:
    """The modules of ``packages`` that ``path`` imports past their exports."""
    for package in packages:
        exports, dotted = _exports(package), f"redcron.{package}"
        for line, name in _imports(path):
            if not _is(name, dotted) or name == dotted:
                continue
            rest = name.removeprefix(dotted + ".")
            if "." in rest or rest not in exports:
                yield line, name


def _face_reaches(path: Path) -> Iterator[tuple[int, str]]:
    return _reaches_past(path, EXPORTING)


@pytest.mark.parametrize("package", EXPORTING)
def test_no_export_is_named_like_a_module_of_its_package(package: str) -> None:
    # else "from redcron.engine import jobs" would pass for an export
    here = PACKAGE / package
    modules = {p.stem for p in here.iterdir() if p.suffix == ".py" or p.is_dir()}
    assert _exports(package) & modules == set()


def test_the_faces_reach_engine_store_and_doctor_only_through_their_package_names() -> None:
    """Issue 17, item 5: the CLI and the dashboard imported broker submodules
    32 times, past App; a store moved between modules broke them."""
    bad = [
        f"{_rel(path)}:{line} imports {name}"
        for path in _modules()
        if _rel(path).startswith(FACES)
        for line, name in _face_reaches(path)
        if (_rel(path), name) not in FACE_ALLOWED
        and not any(_is(name, allowed) for (mod, allowed) in FACE_ALLOWED if mod == _rel(path))
    ]
    assert not bad, (
        "a face imports App or 'from redcron.<engine|store|doctor> import <name>'; export "
        "the name in that package's __init__.py __all__:\n" + "\n".join(bad)
    )


def test_the_processes_the_context_and_the_app_import_only_package_names() -> None:
    """Issue 31 §1: the processes and ``App`` use the engine's Protocol and
    records (and the store's exports), never the modules behind them."""
    bad = [
        f"{_rel(path)}:{line} imports {name}"
        for path in _modules()
        if _rel(path).startswith(PROCESSES)
        for line, name in _reaches_past(path, ("engine", "store"))
    ]
    assert not bad, (
        "import 'from redcron.engine import <name>' (or redcron.store); export the "
        "name in that package's __init__.py __all__:\n" + "\n".join(bad)
    )


#: the parts that build a Broker (the App, the testing mode, the faces), and the
#: engine's __init__, which exports it
BUILDERS = ("redcron/app/__init__.py", "redcron/testing/", "redcron/engine/__init__.py", *FACES)


def test_nothing_but_the_engines_init_imports_the_facade_module() -> None:
    """Issue 31 §1: 21 broker modules imported ``broker/broker.py`` (the
    facade), a type-only cycle through it; the engine and the store type
    against ``engine.core.Core``, the processes against ``Engine``."""
    bad = [
        f"{_rel(path)}:{line} imports {name}"
        for path in _modules()
        for line, name in _imports(path)
        if (_is(name, "redcron.engine.broker") and _rel(path) != "redcron/engine/__init__.py")
        or (name == "redcron.engine.Broker" and not _rel(path).startswith(BUILDERS))
    ]
    assert not bad, "type against redcron.engine.Engine (or engine.core.Core):\n" + "\n".join(bad)


def test_every_face_exception_is_still_needed() -> None:
    # none today: the soak benchmark's key scan became an engine export
    for module, target in sorted(FACE_ALLOWED):
        path = SRC / module
        assert path.is_file(), f"{module} is listed in FACE_ALLOWED but does not exist"
        assert any(_is(name, target) for _line, name in _face_reaches(path)), (
            f"{module} no longer imports {target}: remove it from FACE_ALLOWED"
        )


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


def test_processes_context_and_faces_use_broker_methods_only() -> None:
    bad = [
        f"{_rel(path)}:{line} uses {what}"
        for path in _modules()
        if _rel(path).startswith(BROKER_USERS) and _rel(path) not in CLIENT_ALLOWED
        for line, what in sorted(_broker_reaches(path))
    ]
    assert not bad, (
        "talk to Redis through a public broker method (add one in redcron/engine/):\n"
        + "\n".join(bad)
    )


@pytest.mark.parametrize("allowed", sorted(CLIENT_ALLOWED))
def test_every_client_exception_is_still_needed(allowed: str) -> None:
    path = SRC / allowed
    assert path.is_file(), f"{allowed} is listed in CLIENT_ALLOWED but does not exist"
    assert any(True for _ in _broker_reaches(path)), (
        f"{allowed} no longer uses broker.client: remove it from CLIENT_ALLOWED"
    )


#: the leaves: no I/O of their own, usable by every layer
LEAVES = {"errors", "keys", "serde", "clock", "config", "redact", "lifeline", "urls", "slots"}
#: the bottom of DESIGN §2: the model (with keys.py and the settings) and schedule/
BOTTOM = {"model", "schedule", *LEAVES}

#: what each part of the package may import (top-level names under redcron/),
#: layer by layer from the bottom of DESIGN §2; ``__init__`` is the package
#: root (``from redcron import App``).  A face's or a process's "engine",
#: "store" and "doctor" mean the package's exports only
#: (test_the_faces_reach_engine_store_and_doctor_only_through_their_package_names,
#: test_the_processes_the_context_and_the_app_import_only_package_names).
LAYERS: dict[str, set[str]] = {
    # the leaves: nothing above them
    "errors": {"errors"},
    "keys": {"keys", "errors"},
    "serde": {"serde", "errors"},
    "clock": {"clock"},
    "redact": {"redact"},
    "lifeline": {"lifeline"},
    # the slot-moving script the broker's move-shard and the test cluster share
    "slots": {"slots"},
    "urls": {"urls", "errors", "redact"},
    "config": {"config", "errors", "redact", "urls"},
    # the bottom, pure: time arithmetic on plain values (a trigger, a jitter),
    # and data with its validation; model -> schedule, never the reverse
    "schedule": {"schedule", *LEAVES},
    "model": {"model", "schedule", *LEAVES},
    # the data path on Redis, where correctness lives: the client core, the
    # scripts, enqueue, leases, maintenance, the beat's store, DLQ, cancel, jobs;
    # it imports neither the store nor anything above it
    "engine": {"engine", *BOTTOM},
    # the control plane on Redis (tokens, logins, audit, channels, outbox,
    # tenants, listings, stats, metrics): over the engine, never under it
    "store": {"store", "engine", *BOTTOM},
    # finds and repairs what the invariants forbid: a tool over both
    "doctor": {"doctor", "engine", "store", *BOTTOM},
    # the client API: App, the task context, the loader of a user's App
    "context": {"context", "engine", *BOTTOM},
    "app": {"app", "context", "engine", "store", *BOTTOM},
    "loader": {"loader", "app", *LEAVES},
    "__init__": {"app", "context", *BOTTOM},
    # processes: the engine's clients (its Protocol and records; the worker's
    # registry entry and audit and the notifier's channels are the store's), never
    # each other
    "worker": {"worker", "app", "context", "loader", "engine", "store", *BOTTOM},
    "beat": {"beat", "app", "engine", *BOTTOM},
    # the notifier: a process of its own (docs/architecture.md, "The notifier")
    "notify": {"notify", "app", "engine", "store", *BOTTOM},
    # tools the CLI and the tests start: the bundled redis-server, a local cluster
    # (in the wheel because user-facing commands start it: `redcron chaos --cluster`
    # and `redcron bench throughput/fairness/leases/midnight --cluster`, `bench scale`;
    # issue 31 kept it for them)
    "embedded": {"embedded", *LEAVES},
    "embedded_cluster": {"embedded_cluster", "embedded", *LEAVES},
    # the testing mode (TestApp): the App on a fake Redis, run in-process by
    # the worker's executors and a beat's tick; nothing imports it
    "testing": {"testing", "worker", "beat", "app", "context", "engine", "store", *BOTTOM},
    # faces: everything below them; the dashboard never imports the CLI
    "dashboard": {"dashboard", "app", "engine", "store", *BOTTOM},
    # the chaos scenario, its runner (starts workers, an embedded Redis) and checker
    "chaos": {
        "chaos", "worker", "app", "context", "embedded", "embedded_cluster", "engine", "store",
        "doctor",
        *BOTTOM,
    },
    # the CLI launches everything: `redcron up` starts a worker, a beat, the
    # dashboard and an embedded Redis; `redcron chaos` runs the scenario
    "cli": {
        "cli", "dashboard", "chaos", "embedded", "embedded_cluster", "worker", "beat", "notify",
        "app",
        "context",
        "loader", "engine", "store", "doctor", *BOTTOM,
    },
}  # fmt: skip


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


def test_every_part_is_placed_in_a_layer() -> None:
    not_code = {"lua", "__pycache__"}
    parts = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    assert parts - not_code - set(LAYERS) == set(), "place new modules in LAYERS"


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
        f"redcron.{part} may import only {sorted(LAYERS[part])} (DESIGN.md §2, "
        "docs/architecture.md):\n" + "\n".join(bad)
    )


def test_the_package_never_imports_the_checkouts_bench() -> None:
    """Issue 31, item 2: the peers' adapters and the comparison left the wheel for
    the checkout's ``bench/``; an import of it from redcron would fail once
    installed.  ``bench`` imports redcron (its fixtures), never the reverse."""
    assert (BENCH / "compare.py").is_file() and not (PACKAGE / "cli" / "bench" / "peers").exists()
    bad = [
        f"{_rel(path)}:{line} imports {name}"
        for path in _modules()
        for line, name in _imports(path)
        if _is(name, "bench")
    ]
    assert not bad, "redcron must not import the checkout's bench/:\n" + "\n".join(bad)


def test_the_layers_point_down() -> None:
    """No two parts may import each other (a cycle would make "below" meaningless)."""
    both = sorted(
        f"{a} <-> {b}" for a in LAYERS for b in LAYERS[a] if a < b and a in LAYERS.get(b, set())
    )
    assert not both, both


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
    """Issue 16, item 10: ``cli/bench/measure.py`` (the benchmark App is now in
    ``cli/bench/fixtures.py``) built an ``App()`` at import, so
    ``REDCRON_REDIS_URL=http://x redcron --help`` printed a traceback."""
    names = [_module_name(path) for path in _modules()]
    assert "redcron.cli.bench.fixtures" in names and "redcron.cli.main" in names
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
        ["bench", "throughput"], ["chaos"], ["workers"],
        ["inspect"]]  # fmt: skip


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
