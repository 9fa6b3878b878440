"""An ``-A`` module that raises while importing: the error names its file and
line at the default log level, in one line (no Redis: loading fails first)."""

from __future__ import annotations

from collections.abc import Callable

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


def test_the_error_names_the_file_line_and_source(module_dir: Callable[[str], str]) -> None:
    name = module_dir(CRASHES)
    with pytest.raises(ConfigError) as err:
        load_app(f"{name}:app")
    message = str(err.value)
    assert f'at {name}.py:7 (`return {{}}["TIMEZONE"]`)' in message
    assert "KeyError: 'TIMEZONE'" in message
    assert isinstance(err.value.__cause__, KeyError)  # kept for --loglevel debug


def test_a_syntax_error_names_its_line(module_dir: Callable[[str], str]) -> None:
    name = module_dir("from redcron import App\napp = App(\n")
    with pytest.raises(ConfigError) as err:
        load_app(name)
    assert f"at {name}.py:2 (`app = App(`): SyntaxError: '(' was never closed" in str(err.value)


def test_a_missing_import_inside_the_module_names_its_line(
    module_dir: Callable[[str], str],
) -> None:
    name = module_dir("import rc_no_such_dependency_xyz\n")
    with pytest.raises(ConfigError) as err:
        load_app(name)
    assert f"at {name}.py:1 (`import rc_no_such_dependency_xyz`)" in str(err.value)


def test_the_cli_prints_it_in_one_line_at_the_default_level(
    module_dir: Callable[[str], str],
) -> None:
    name = module_dir(CRASHES)
    result = CliRunner().invoke(main, ["dlq", "list", "-A", f"{name}:app"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert lines[0].startswith(f"error: app '{name}:app': importing '{name}' failed at {name}.py:7")
