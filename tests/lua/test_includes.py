"""Static checks of the Lua layout (no Redis): every helper a file calls comes
from the file itself or an include it names, each include is used, no helper
is defined twice, and in every loaded script each helper is defined above its
first call (a Lua ``local`` is visible only below its definition; a call
above it would reach for a global and fail at run time)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from redcron.engine.scripts import _INCLUDE, SCRIPT_NAMES, full_source, generated

LUA = resources.files("redcron") / "lua"
LIBS = sorted(f"lib/{p.name}" for p in (LUA / "lib").iterdir() if p.name.endswith(".lua"))
FILES = [f"{name}.lua" for name in SCRIPT_NAMES] + LIBS

# comments and string literals, in one left-to-right pass
_STRIP = re.compile(r"--\[\[.*?\]\]|--[^\n]*|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"", re.S)
_CALL = re.compile(r"(?<![\w.:])([A-Za-z_]\w*)\s*\(")
_LOCAL_FN = re.compile(r"\blocal\s+function\s+([A-Za-z_]\w*)")
_LOCAL = re.compile(r"\blocal\s+([A-Za-z_][\w \t,]*?)\s*=(?!=)")
_PARAMS = re.compile(r"\bfunction\b[\w\s.:]*\(([^)]*)\)")
_TOP = re.compile(r"^local function ([A-Za-z_]\w*)|^local ([A-Za-z_][\w, ]*?)\s*=", re.M)
_TOP_ASSIGN = re.compile(r"^([A-Za-z_]\w*)\s*=(?!=)", re.M)
BUILTINS = {
    "redis", "cjson", "cmsgpack", "bit", "struct", "string", "table", "math",
    "tonumber", "tostring", "ipairs", "pairs", "unpack", "select", "next", "type",
    "pcall", "error", "assert",
}  # fmt: skip
KEYWORDS = {"function", "if", "elseif", "while", "until", "return", "and", "or", "not", "in"}


def _text(path: str) -> str:
    return (LUA / path).read_text()


def _code(text: str) -> str:
    return _STRIP.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _includes(path: str) -> list[str]:
    return _INCLUDE.findall(_text(path))


def _top_defs(text: str) -> set[str]:
    names: set[str] = set()
    for fn, loc in _TOP.findall(_code(text)):
        names |= {fn} if fn else {n.strip() for n in loc.split(",")}
    return names


def _defs(code: str) -> set[str]:
    """Locals and function parameters (a callback passed in is called by name)."""
    names = set(_LOCAL_FN.findall(code))
    for params in _PARAMS.findall(code):
        names |= {n.strip() for n in params.split(",") if n.strip()}
    for loc in _LOCAL.findall(code):
        names |= {n.strip() for n in loc.split(",")}
    return names


def _calls(code: str) -> set[str]:
    return set(_CALL.findall(code)) - KEYWORDS


GENERATED = generated()


@pytest.mark.parametrize("path", FILES)
def test_every_helper_a_file_calls_comes_from_it_or_an_include_it_names(path: str) -> None:
    code = _code(_text(path))
    known = _defs(code) | _top_defs(GENERATED) | BUILTINS
    for inc in _includes(path):
        known |= _top_defs(_text(inc))
    assert _calls(code) - known == set(), path


@pytest.mark.parametrize("path", FILES)
def test_every_include_a_file_names_is_used_by_it(path: str) -> None:
    code = _code(_text(path))
    used = _calls(code) | set(re.findall(r"[A-Za-z_]\w*", code))
    for inc in _includes(path):
        assert _top_defs(_text(inc)) & used, (path, inc)


def test_no_helper_is_defined_twice_or_patched_later() -> None:
    where: dict[str, str] = {name: "generated" for name in _top_defs(GENERATED)}
    for path in LIBS:
        code = _code(_text(path))
        for name in _top_defs(code):
            assert name not in where, f"{name} defined in {where[name]} and {path}"
            where[name] = path
        assert _TOP_ASSIGN.findall(code) == [], path  # no `name = ...` after the fact


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_in_each_loaded_script_every_helper_is_defined_above_its_first_call(name: str) -> None:
    defined = set(BUILTINS)
    for n, line in enumerate(_code(full_source(name)).splitlines(), 1):
        defined |= set(_LOCAL_FN.findall(line))  # a recursive call sees its own name
        missing = _calls(line) - defined
        assert not missing, f"{name}.lua (loaded) line {n} calls {missing} before defining it"
        defined |= _defs(line)
