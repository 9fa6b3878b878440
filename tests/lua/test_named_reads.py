"""The Lua reads wide hashes through the readers and index constants generated
from model/fields.py, never by a typed position (no Redis)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from redcron.model.fields import LUA_READS, TOKEN, TOKEN_READS, constant, lua_readers

LUA = resources.files("redcron") / "lua"
FILES = sorted(
    [p.name for p in LUA.iterdir() if p.name.endswith(".lua")]
    + [f"lib/{p.name}" for p in (LUA / "lib").iterdir() if p.name.endswith(".lua")]
)
_COMMENT = re.compile(r"--\[\[.*?\]\]|--[^\n]*", re.S)
_DEF = re.compile(r"local (\w+) = (?:read_(\w+)\()?")


def _code(path: str) -> str:
    return _COMMENT.sub("", (LUA / path).read_text())


@pytest.mark.parametrize("path", FILES)
def test_a_generated_read_is_indexed_only_by_its_own_constants(path: str) -> None:
    code = _code(path)
    # every definition of a local: the nearest one above an index says what it holds
    defs = [(m.start(), m.group(1), m.group(2)) for m in _DEF.finditer(code)]
    for var in {v for _, v, read in defs if read in LUA_READS}:
        for m in re.finditer(rf"(?<![\w.]){var}\[([^\]]+)\]", code):
            above = [read for pos, v, read in defs if v == var and pos < m.start()]
            if above and above[-1] in LUA_READS:
                own = {constant(above[-1], f) for f in LUA_READS[above[-1]]}
                assert m.group(1) in own, f"{path}: {var}[{m.group(1)}] on a read_{above[-1]}()"


def test_every_read_is_used_and_every_reader_called_exists() -> None:
    code = "\n".join(_code(p) for p in FILES)
    called = set(re.findall(r"\bread_(\w+)\(", code)) - {"group"}
    assert called == set(LUA_READS)


def test_the_token_reads_start_with_the_token() -> None:
    for read in TOKEN_READS:
        assert LUA_READS[read][: len(TOKEN)] == TOKEN, read
    assert "local TOKEN_STATE, TOKEN_WORKER, TOKEN_EPOCH = 1, 2, 3" in lua_readers()


def test_the_constants_are_the_positions_of_their_fields() -> None:
    text = lua_readers()
    for read, fields in LUA_READS.items():
        names = ", ".join(constant(read, f) for f in fields)
        numbers = ", ".join(str(i) for i in range(1, len(fields) + 1))
        assert f"local {names} = {numbers}" in text
        assert f"redis.call('HMGET', key, {', '.join(repr(f) for f in fields)})" in text
