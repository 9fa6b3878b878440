"""Every state the Lua writes or compares is a state model/states.py defines.

The scripts spell states as text ('ready', 'succeeded'); the state *sets* are
generated from Python, but a literal typed in a script is not, and a typo in
one ('succeded') would be a check that never matches.  This scans every
script and library (no Redis) for the places a state is spelled:

- an HSET pair ``'state', '<s>'``;
- a comparison with a state read: ``f[TI_LEASE_STATE] == '<s>'`` (a generated read),
  ``f[i] ~= '<s>'`` where ``f`` is an HMGET whose i-th field is ``state``,
  ``HGET(..., 'state') == '<s>'``, or a variable named ``state`` / ``st``;
- an assignment to such a variable (``local state, loc = 'pending', ''``,
  ``mark = 'cancelled'``);
- a set of states (``{leased = true}``);
- a literal argument of the helpers that take a state (``make_terminal``,
  ``run_task_ended``, ``record_skipped``), or returned by the helpers that
  return one (``end_attempt``, ``cancel_instance``).
Attempt outcomes (succeeded, failed, timed_out, lost, cancelled) are not
states and are not checked here.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

from redcron.model.fields import LUA_READS
from redcron.model.states import RunState, TaskState

LUA = resources.files("redcron") / "lua"
FILES = sorted(
    [p.name for p in LUA.iterdir() if p.name.endswith(".lua")]
    + [f"lib/{p.name}" for p in (LUA / "lib").iterdir() if p.name.endswith(".lua")]
)
KNOWN = {s.value for s in TaskState} | {s.value for s in RunState}

_COMMENT = re.compile(r"--\[\[.*?\]\]|--[^\n]*", re.S)
_LIT = r"'([^'\\\n]*)'"
_HMGET = re.compile(r"local (\w+) = redis\.call\('HMGET',\s*[^,]+,((?:\s*'[^']*'\s*,?)+)\)")
_READ = re.compile(r"local (\w+) = read_(\w+)\(")
_INDEXED = re.compile(r"\b(\w+)\[(\d+)\]\s*[=~]=\s*" + _LIT)
_PATTERNS = [
    re.compile(r"\b\w+\[[A-Z0-9_]*_STATE\]\s*[=~]=\s*" + _LIT),  # f[TI_LEASE_STATE]
    re.compile(r"'state'\)\s*[=~]=\s*" + _LIT),
    re.compile(r"(?<![.\w])(?:state|st|mark)\s*[=~]=\s*" + _LIT),
    re.compile(r"(?<![.\w])state\s+or\s+" + _LIT),
    re.compile(r"\bstates\[\w+\]\s*[=~]?=\s*" + _LIT),  # doctor_run: task -> state
    re.compile(r"^\s*loc, state = [^,\n]+,\s*" + _LIT, re.M),
    re.compile(r"^\s*(?:local\s+)?(?:state|mark)\b(?:\s*,\s*\w+)*\s*=(?!=)\s*" + _LIT, re.M),
    re.compile(r"\b(?:make_terminal|run_task_ended)\([^()]*?" + _LIT),
    re.compile(r"\brecord_skipped\((?:[^()]|\([^()]*\))*,\s*'(\w+)'\)"),
]
_HSET_STATE = re.compile(r"'state',\s*" + _LIT)
_CALL = re.compile(r"redis\.p?call\('(\w+)'")
#: files whose functions return a state as a bare literal (end_attempt, cancel_instance)
RETURNS_STATES = {"lib/attempts.lua", "lib/cancel_instance.lua"}
_RETURN = re.compile(r"^\s*return\s+" + _LIT, re.M)
_SET = re.compile(r"\{\s*(\w+\s*=\s*true(?:\s*,\s*\w+\s*=\s*true)*)\s*\}")


def _code(path: str) -> str:
    return _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), (LUA / path).read_text())


def state_literals(path: str) -> list[tuple[int, str]]:
    """(line, literal) for every state spelled in one Lua file."""
    return literals_in(_code(path), returns_states=path in RETURNS_STATES)


def literals_in(code: str, returns_states: bool = False) -> list[tuple[int, str]]:
    """(line, literal) for every state spelled in Lua ``code`` (comments removed)."""
    found: list[tuple[int, int, str]] = []  # (offset, line, literal)

    def add(pos: int, lit: str) -> None:
        found.append((pos, code.count("\n", 0, pos) + 1, lit))

    for pattern in _PATTERNS:
        for m in pattern.finditer(code):
            add(m.start(1), m.group(1))
    if returns_states:
        for m in _RETURN.finditer(code):
            add(m.start(1), m.group(1))
    for m in _HSET_STATE.finditer(code):
        calls = _CALL.findall(code, 0, m.start())
        if calls and calls[-1] in ("HSET", "HMSET"):
            add(m.start(1), m.group(1))
    for m in _SET.finditer(code):
        names = re.findall(r"(\w+)\s*=", m.group(1))
        if KNOWN & set(names):  # a set of states (not of priorities...): all must be
            for name in names:
                add(m.start(1), name)
    # positional reads: the nearest HMGET above that defined the variable says
    # which position holds the state
    reads: list[tuple[int, str, list[str]]] = [
        (m.start(), m.group(1), re.findall(r"'([^']*)'", m.group(2))) for m in _HMGET.finditer(code)
    ]
    reads += [
        (m.start(), m.group(1), list(LUA_READS[m.group(2)]))
        for m in _READ.finditer(code)
        if m.group(2) in LUA_READS
    ]
    reads.sort()
    for m in _INDEXED.finditer(code):
        var, idx = m.group(1), int(m.group(2))
        defs = [fields for pos, v, fields in reads if v == var and pos < m.start()]
        if defs and idx <= len(defs[-1]) and defs[-1][idx - 1] == "state":
            add(m.start(3), m.group(3))
    seen: set[tuple[int, str]] = set()
    out: list[tuple[int, str]] = []
    for pos, line, lit in sorted(found):
        if (pos, lit) not in seen:
            seen.add((pos, lit))
            out.append((line, lit))
    return out


@pytest.mark.parametrize("path", FILES)
def test_every_state_literal_is_a_known_state(path: str) -> None:
    unknown = [(line, lit) for line, lit in state_literals(path) if lit not in KNOWN]
    assert unknown == [], f"{path}: not a state of model/states.py: {unknown}"


def test_the_scan_finds_the_states_the_scripts_spell() -> None:
    """A scan that matched nothing would pass vacuously: it must see the known
    spellings, one of each kind above, and about a hundred in all."""
    assert {lit for _, lit in state_literals("start.lua")} == {"leased", "running"}
    assert {lit for _, lit in state_literals("lib/take.lua")} >= {"ready", "leased", "queued"}
    assert "leased" in {lit for _, lit in state_literals("start.lua")}  # {leased = true}
    assert "pending" in {lit for _, lit in state_literals("lib/runs.lua")}  # g[1] == 'pending'
    assert "rejected" in {lit for _, lit in state_literals("lib/fire.lua")}  # record_skipped
    assert sum(len(state_literals(p)) for p in FILES) >= 90


def test_a_typo_is_caught() -> None:
    code = """
local f = read_ti_token(ti)
if f[TOKEN_STATE] == 'succeded' then end
local g = redis.call('HMGET', ti, 'loc', 'state')
if g[2] ~= 'redy' then redis.call('HSET', ti, 'loc', 'x', 'state', 'runing') end
"""
    assert [lit for _, lit in literals_in(code)] == ["succeded", "redy", "runing"]
