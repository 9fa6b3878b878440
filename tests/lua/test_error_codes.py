"""Every error code a script can return has its exception in errors.CODES, and
the table holds no code that no script returns (callers match classes, never text)."""

from __future__ import annotations

import re
from importlib import resources

from redcron.errors import CODES, ScriptError, ShardLeaseLost, from_script_error

# err('CODE', ...), batch_refuse(batch, 'CODE', ...), refuse('CODE', ...)
_RETURNED = re.compile(r"\b(?:err|refuse)\([^)'\n]*'([A-Z_]+)'")


def _codes_in_lua() -> set[str]:
    root = resources.files("redcron") / "lua"
    files = [*root.iterdir(), *(root / "lib").iterdir()]
    return {
        code for f in files if f.name.endswith(".lua") for code in _RETURNED.findall(f.read_text())
    }


def test_the_code_table_matches_the_codes_scripts_return() -> None:
    assert _codes_in_lua() == set(CODES)


def test_a_code_maps_to_its_class_and_an_unknown_one_to_script_error() -> None:
    exc = from_script_error("STALE shard lease lost (epoch 3 is not the owner)")
    assert isinstance(exc, ShardLeaseLost)
    assert str(exc) == "shard lease lost (epoch 3 is not the owner)"
    assert type(from_script_error("WHAT is this")) is ScriptError
