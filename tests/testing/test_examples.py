"""The examples in examples/ that run on the testing mode do what their
docstrings say (no Redis server)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"examples.{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_idem_key_with_sqlite_charges_once_across_a_re_run(tmp_path: Path) -> None:
    example = load("idempotent_sqlite")
    # attempt 1 commits then "dies"; attempt 2 runs with the same idem_key
    assert example.demo(tmp_path) == [(42, 1999)]
