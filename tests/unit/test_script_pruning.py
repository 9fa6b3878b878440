"""The loader keeps what a script uses of its libraries, in order, and nothing else."""

from __future__ import annotations

from redcron.engine.scripts import SCRIPT_NAMES, _expand, _prune, _units, full_source, source

LIB = """\
--[[ a library
  with a block comment ]]
if redis.replicate_commands then pcall(redis.replicate_commands) end
local PRIORITIES = {high = 1,
  low = 2}
local function unused(x)
  return x
end
local function helper(x)
  return PRIORITIES[x]
end
local hook = function(x)
  return helper(x)
end
local function uses_hook(x)
  hook(x)
end
"""


def test_pruning_keeps_what_is_used_transitively_in_order() -> None:
    body = ["local n = uses_hook(ARGV[1])", "return n"]
    lines = [(line, True) for line in LIB.splitlines()] + [(line, False) for line in body]
    out = _prune(_units(lines))
    assert "local function unused" not in out
    assert "a library" not in out  # library comments go
    for kept in ("pcall(redis.replicate_commands)", "local PRIORITIES = {high = 1,\n  low = 2}",
                 "local function helper", "local hook = function(x)\n  return helper(x)\nend",
                 "local function uses_hook", *body):  # fmt: skip
        assert kept in out
    # in their original order
    assert (
        out.index("local PRIORITIES") < out.index("local function helper") < out.index("local hook")
    )


def test_a_script_that_does_not_use_a_helper_still_gets_its_own_code() -> None:
    lines = [(line, True) for line in LIB.splitlines()] + [("return 1", False)]
    assert _prune(_units(lines)).strip().endswith("return 1")
    assert "helper" not in _prune(_units(lines))


def test_every_script_is_smaller_than_its_library_and_keeps_its_own_lines() -> None:
    for name in SCRIPT_NAMES:
        pruned = full_source(name)
        assert len(pruned) < len(source(name)) + 4000, name
        for line, lib in _expand(name):
            if not lib and line.strip() and not line.lstrip().startswith("--"):
                assert line in pruned, (name, line)
