"""The state sets Lua scripts use are generated from redcron.model.states (one definition)."""

from __future__ import annotations

import re

from redcron.engine.scripts import SCRIPT_NAMES, full_source
from redcron.model.states import (
    RUN_ACTIVE,
    RUN_TERMINAL,
    TASK_LEASED,
    TASK_TERMINAL,
    RunState,
    TaskState,
    lua_state_tables,
)


def lua_sets(src: str) -> dict[str, set[str]]:
    return {
        name: set(re.findall(r"(\w+) = true", body))
        for name, body in re.findall(r"^local (\w+) = \{(.*)\}$", src, re.MULTILINE)
    }


def test_generated_lua_tables_match_the_python_sets() -> None:
    assert lua_sets(lua_state_tables()) == {
        "TASK_TERMINAL": {s.value for s in TASK_TERMINAL},
        "TASK_LEASED": {s.value for s in TASK_LEASED},
        "RUN_ACTIVE": {s.value for s in RUN_ACTIVE},
        "RUN_TERMINAL": {s.value for s in RUN_TERMINAL},
    }


def test_every_script_gets_the_tables_it_uses_as_generated() -> None:
    generated = lua_state_tables().splitlines()[1:]  # after the "generated" comment
    used = 0
    for name in SCRIPT_NAMES:
        text = full_source(name)
        for line in generated:
            table = line.split()[1]  # "local NAME = {...}"
            if re.search(rf"\b{table}\[", text):
                assert line in text.splitlines(), (name, table)
                used += 1
    assert used > 0


def test_terminal_sets() -> None:
    # every end of an instance a result() waiter must see, including the ones a
    # run marks on its downstream
    assert {
        TaskState.SUCCEEDED,
        TaskState.DEAD,
        TaskState.CANCELLED,
        TaskState.UPSTREAM_FAILED,
        TaskState.SKIPPED,
    } <= TASK_TERMINAL
    assert not TASK_TERMINAL & {TaskState.PENDING, TaskState.READY, TaskState.HELD}
    assert not TASK_TERMINAL & TASK_LEASED
    assert set(RunState) == RUN_ACTIVE | RUN_TERMINAL
    assert not RUN_ACTIVE & RUN_TERMINAL


def test_states_are_plain_text() -> None:
    # stored as is in Redis hashes: an operator reads them with redis-cli
    assert TaskState.UPSTREAM_FAILED == "upstream_failed"
    assert f"{RunState.QUEUED}" == "queued"
