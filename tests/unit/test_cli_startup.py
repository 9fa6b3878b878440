"""What starting ``redcron`` loads (issue 31 §3): each command family's module
is imported when that command runs, and ``import redcron`` loads the App on
first use, so ``redcron --help`` and ``--version`` load neither the App nor
Redis, and no command loads Flask, the benchmarks or the doctor unless it is
one of them.  Checked on ``sys.modules`` in a fresh interpreter, never on
times; and the tables that make it possible (the group's summaries, the
packages' lazy names) are checked against what they stand for.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import click
import pytest

import redcron
import redcron.store
from redcron.cli.group import LazyGroup
from redcron.cli.main import COMMANDS, main

SRC = Path(__file__).resolve().parents[2] / "src"

#: run in a fresh interpreter: ``redcron <argv[1] as JSON>`` in-process, watching
#: for a Redis client or pool being built (a profile hook: importing redis first to
#: patch it would load what is checked), then print what it loaded and built as
#: JSON on the last line
RUN = textwrap.dedent(
    """
    import json, sys
    from redcron.cli.main import main

    INITS = {"Redis.__init__", "RedisCluster.__init__", "ConnectionPool.__init__"}
    built = []

    def watch(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_qualname in INITS and "redis" in code.co_filename:
            built.append(code.co_qualname)

    sys.setprofile(watch)
    code = main(json.loads(sys.argv[1]), prog_name="redcron", standalone_mode=False)
    sys.setprofile(None)
    print(json.dumps({"code": code, "modules": sorted(sys.modules), "built": built}))
    """
)

#: loaded by no command but its own: the dashboard (Flask), the benchmarks, the doctor
NEVER = ("flask", "werkzeug", "redcron.dashboard", "redcron.cli.bench", "redcron.doctor")
#: loaded by no --help or --version: the App, the broker, Redis
NOT_TO_START = ("redis", "redcron.app", "redcron.engine", "redcron.store", "redcron.cli.common")


def run(args: list[str], code: str = RUN) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def loaded(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in packages)]


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]], ids=" ".join)
def test_help_and_version_load_no_app_no_redis(args: list[str]) -> None:
    out = run(args)
    assert out["code"] == 0
    assert loaded(out["modules"], NEVER + NOT_TO_START) == []
    assert out["built"] == []


@pytest.mark.parametrize(
    "args",
    [["task", "show", "--help"], ["task", "--help"], ["jobs", "list", "--help"], ["up", "--help"]],
    ids=" ".join,
)
def test_a_command_loads_no_flask_no_benchmarks_no_doctor_and_no_client(args: list[str]) -> None:
    out = run(args)
    assert out["code"] == 0
    assert loaded(out["modules"], NEVER) == []
    assert out["built"] == []


def test_the_check_sees_what_a_command_loads_and_builds() -> None:
    # the doctor's own command loads the doctor, and `bench` the benchmarks
    assert loaded(run(["doctor", "--help"])["modules"], ("redcron.doctor",))
    assert loaded(run(["bench", "--help"])["modules"], ("redcron.cli.bench",))
    # a command that talks to Redis builds a client (here to a port nothing serves)
    out = run(["jobs", "list", "--redis", "redis://127.0.0.1:1/0"])
    assert out["code"] == 1 and out["built"], out["built"]


def test_import_redcron_loads_no_app() -> None:
    out = run([], "import json, sys, redcron; print(json.dumps({'modules': sorted(sys.modules)}))")
    assert loaded(out["modules"], NEVER + NOT_TO_START) == []


def test_the_app_loads_no_doctor_no_audit_no_action_record() -> None:
    out = run(
        [],
        "import json, sys\nfrom redcron import App\nApp()\n"
        "print(json.dumps({'modules': sorted(sys.modules)}))",
    )
    assert "redcron.app" in out["modules"]
    lazy = ("redcron.doctor", "redcron.store.audit", "redcron.store.actions")
    assert loaded(out["modules"], NEVER + lazy) == []


# -- the tables behind it ----------------------------------------------------------------


def test_the_group_lists_every_command_it_has() -> None:
    assert isinstance(main, LazyGroup)
    assert main.list_commands(click.Context(main)) == sorted(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_summary_lists_as_its_command(name: str) -> None:
    """``redcron --help`` lists a command from its summary in COMMANDS, before
    loading it: at every width, the line must be the command's own."""
    real = COMMANDS[name].load()
    assert real.name == name
    stand_in = COMMANDS[name].stand_in(name)
    assert stand_in.hidden == real.hidden
    own = " ".join((real.help or "").split("\n\n")[0].split())
    for limit in range(10, 200):
        assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit), (
            f"COMMANDS[{name!r}] in redcron/cli/main.py: its summary should be {own!r}"
        )


def test_help_lists_the_same_before_and_after_the_commands_load() -> None:
    group = LazyGroup(
        name="redcron",
        lazy=COMMANDS,
        params=main.params,
        help=main.help,
        context_settings=main.context_settings,
    )

    def listing() -> str:
        ctx = click.Context(group, info_name="redcron", terminal_width=80, **main.context_settings)
        return group.get_help(ctx)

    before = listing()
    assert group.commands == {}  # listing loaded nothing
    for name in COMMANDS:
        group.get_command(click.Context(group), name)
    assert sorted(group.commands) == sorted(COMMANDS)
    assert listing() == before


def _type_checking_imports(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (module, its name there) of the ``if TYPE_CHECKING:`` block of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.unparse(stmt)
                for alias in stmt.names:
                    out[alias.asname or alias.name] = (stmt.module, alias.name)
    return out


@pytest.mark.parametrize(
    ("package", "path"),
    [
        (redcron, SRC / "redcron" / "__init__.py"),
        (redcron.store, SRC / "redcron/store/__init__.py"),
    ],
    ids=["redcron", "redcron.store"],
)
def test_the_lazy_names_are_the_typed_ones_and_exported(package: Any, path: Path) -> None:
    lazy = {
        name: where if isinstance(where, tuple) else (where, name)
        for name, where in package._LAZY.items()
    }
    assert lazy == _type_checking_imports(path)
    assert set(lazy) <= set(package.__all__)
    for name, (module, attr) in lazy.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), attr)
        assert name in dir(package)
    with pytest.raises(AttributeError):
        package.no_such_name  # noqa: B018
