"""An ``-A`` module that raises while importing: the error names its file and
line at the default log level, in one line (no Redis: loading fails first)."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from redcron.cli.main import main
from redcron.errors import ConfigError
from redcron.loader import load_app

CRASHES = """\
    from redcron import App

    app = App("redis://127.0.0.1:1/0")


    def settings():
        return {}["TIMEZONE"]


    TZ = settings()
"""


@pytest.fixture
def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Write a module into a fresh cwd; returns its (unique) name."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    names: list[str] = []

    def write(source: str) -> str:
        name = f"rc_crash_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        names.append(name)
        return name

    yield write
    for name in names:
        sys.modules.pop(name, None)


def test_the_error_names_the_file_line_and_source(write_module: Callable[[str], str]) -> None:
    name = write_module(CRASHES)
    with pytest.raises(ConfigError) as err:
        load_app(f"{name}:app")
    message = str(err.value)
    assert f'at {name}.py:7 (`return {{}}["TIMEZONE"]`)' in message
    assert "KeyError: 'TIMEZONE'" in message
    assert isinstance(err.value.__cause__, KeyError)  # kept for --loglevel debug


def test_a_syntax_error_names_its_line(write_module: Callable[[str], str]) -> None:
    name = write_module("from redcron import App\napp = App(\n")
    with pytest.raises(ConfigError) as err:
        load_app(name)
    assert f"at {name}.py:2 (`app = App(`): SyntaxError: '(' was never closed" in str(err.value)


def test_a_missing_import_inside_the_module_names_its_line(
    write_module: Callable[[str], str],
) -> None:
    name = write_module("import rc_no_such_dependency_xyz\n")
    with pytest.raises(ConfigError) as err:
        load_app(name)
    assert f"at {name}.py:1 (`import rc_no_such_dependency_xyz`)" in str(err.value)


def test_the_cli_prints_it_in_one_line_at_the_default_level(
    write_module: Callable[[str], str],
) -> None:
    name = write_module(CRASHES)
    result = CliRunner().invoke(main, ["dlq", "list", "-A", f"{name}:app"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert lines[0].startswith(f"error: app '{name}:app': importing '{name}' failed at {name}.py:7")
