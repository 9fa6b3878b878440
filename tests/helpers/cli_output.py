"""Reading what a CLI command printed.  Imported by name (``tests/helpers`` is
on ``sys.path``, see ``tests/conftest.py``)."""

from __future__ import annotations

from click.testing import Result


def one_error_line(result: Result) -> str:
    """The single ``error: ...`` line a failing command printed (no traceback)."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    return lines[0]
