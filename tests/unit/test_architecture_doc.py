"""docs/architecture.md cannot drift from the tree: its tables of modules,
scripts, libraries and records are what ``tests/helpers/docgen.py`` generates
from the module docstrings, the Lua headers and the record docstrings (``make
docs`` rewrites them), its
hand-written tables name only scripts and records that exist, and every
``.py``/``.lua`` file it (or any other doc) names is in the tree.

Everything is read from the tree at test time, so files may move: the check
follows them (only the doc's text must then be regenerated or edited).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import docgen  # tests/helpers
import pytest

DOC = docgen.DOC.read_text()


def _scripts() -> set[str]:
    return {p.stem for p in docgen.LUA.glob("*.lua")}


def _libs() -> set[str]:
    return {
        p.relative_to(docgen.LUA).with_suffix("").as_posix()
        for p in (docgen.LUA / "lib").rglob("*.lua")
    }


def _records() -> set[str]:
    return {name for _module, name in docgen.records(docgen.load_modules())}


def _first_columns(text: str, first_header: str) -> list[list[str]]:
    """The first-column cells of every Markdown table in ``text`` whose first
    header cell is ``first_header``."""
    out: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            current = None
            continue
        first = line.strip().strip("|").split("|")[0].strip()
        if current is None:
            if first == first_header:
                current = []
                out.append(current)
        elif not set(first) <= set("-: "):
            current.append(first)
    return out


def _named(text: str, first_header: str) -> set[str]:
    cells = [c for col in _first_columns(text, first_header) for c in col]
    return {name for c in cells for name in re.findall(r"`([^`]+)`", c)}


def _modules() -> set[str]:
    mods = docgen.load_modules()
    return {m.rel for p in docgen.MODULE_PACKAGES for m in docgen.package_modules(mods, p)}


def _generated(name: str) -> str:
    start, end = docgen.block(DOC, name)
    return DOC[start:end]


def _hand_written() -> str:
    text = DOC
    for name in docgen.TABLES:
        start, end = docgen.block(text, name)
        text = text[:start] + text[end:]
    return text


def test_the_generated_tables_are_up_to_date() -> None:
    assert docgen.render(DOC) == DOC, (
        f"docs/architecture.md is stale: run `{docgen.COMMAND}` "
        "(or .venv/bin/python tests/helpers/docgen.py) and commit the result"
    )


def test_every_script_lib_and_record_is_in_its_table() -> None:
    assert _named(_generated("scripts"), "script") == _scripts()
    assert _named(_generated("libs"), "lib") == _libs()
    assert _named(_generated("records"), "record") == _records()
    assert _named(_generated("modules"), "module") == _modules()


def test_a_new_module_or_a_changed_docstring_makes_the_doc_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # what the check above compares is built from the tree: a module added to a
    # listed package, or a module's docstring changed, is a stale doc until
    # `make docs`
    mods = dict(docgen.load_modules())
    package = docgen.MODULE_PACKAGES[0]
    new = f"{package}.zz_added"
    path = docgen.PACKAGE.parent.joinpath(*new.split(".")).with_suffix(".py")
    mods[new] = docgen.Module(new, path, ast.parse('"""A module the doc does not list yet."""'))
    monkeypatch.setattr(docgen, "load_modules", lambda: mods)
    assert docgen.render(DOC) != DOC

    mods.pop(new)
    first = docgen.package_modules(mods, package)[-1]
    changed = ast.parse('"""What this module holds now."""')
    mods[first.name] = docgen.Module(first.name, first.path, changed)
    assert docgen.render(DOC) != DOC


def test_the_module_tables_find_scripts_and_classes() -> None:
    # a rule of docgen that stopped finding them would empty the columns silently
    mods = docgen.load_modules()
    listed = [m for p in docgen.MODULE_PACKAGES for m in docgen.package_modules(mods, p)]
    leases = next(m for m in listed if m.name.endswith(".leases"))
    assert {"lease", "complete", "fail"} <= set(docgen.scripts_run(leases, _scripts()))
    assert "Leases" in docgen.service_classes(leases)


def test_the_records_found_include_the_doctors_wherever_they_moved() -> None:
    # a rule of docgen.records that stopped finding a kind of record would drop
    # its rows without a word; these stand for each rule (model's exports, a
    # records module, ALSO)
    assert {"TaskRecord", "JobRecord", "DoctorReport", "Finding", "TaskCancel"} <= _records()


def test_the_hand_written_tables_name_only_what_exists() -> None:
    text = _hand_written()
    stale = (_named(text, "script") - _scripts()) | (_named(text, "record") - _records())
    assert not stale, f"docs/architecture.md's tables name what is gone: {sorted(stale)}"


@pytest.mark.parametrize("path", sorted(docgen.LUA.rglob("*.lua")), ids=lambda p: p.name)
def test_each_lua_header_names_its_own_file(path: Path) -> None:
    # a header copied from another script would document that script in the table
    rel = path.relative_to(docgen.LUA).with_suffix("")
    names = {path.stem, rel.as_posix(), rel.relative_to(rel.parts[0]).as_posix()}
    assert docgen.header_name(path.read_text()) in names


DOCS = sorted([*(docgen.ROOT / "docs").glob("*.md"), docgen.ROOT / "README.md"])


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_file_a_doc_names_exists(doc: Path) -> None:
    files = [
        p.relative_to(docgen.ROOT).as_posix()
        for top in ("src", "tests", "examples", "docs", "bench")
        for p in (docgen.ROOT / top).rglob("*")
        if p.suffix in {".py", ".lua"}
    ]
    named = set(re.findall(r"`([\w./-]+\.(?:py|lua))`", doc.read_text()))
    gone = sorted(n for n in named if not any(f == n or f.endswith("/" + n) for f in files))
    assert not gone, f"{doc.name} names files that are not in the tree: {gone}"
