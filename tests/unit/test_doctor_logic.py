"""The pure comparisons of ``redcron doctor`` (no Redis)."""

from __future__ import annotations

import pytest

from redcron import doctor
from redcron.doctor import (
    RunCounts,
    instance_problem,
    run_progress,
    run_recount,
)
from redcron.engine.scripts import full_source


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"state": "ready", "queue": "q", "tenant": "t", "priority": "low"}, None),
        ({"state": "succeeded"}, None),  # terminal: no routing needed
        ({}, "has no state field"),
        ({"state": "garbage"}, "has state 'garbage', which is not a task state"),
        ({"state": "ready", "queue": "q"}, "is ready but has no tenant, priority"),
        ({"state": "dead", "queue": "q", "tenant": "t", "priority": "urgent"}, "priority"),
        ({"state": "leased", "queue": "q", "tenant": "t", "priority": "high"}, "deadline"),
    ],
)
def test_instance_problem(fields: dict[str, str], problem: str | None) -> None:
    got = instance_problem(fields)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got


def test_run_recount_counts_as_the_scripts_do() -> None:
    states = ["succeeded", "dead", "upstream_failed", "cancelled", "ready", "pending"]
    assert run_recount(states) == RunCounts(6, 4, 1, 2, 1)
    assert run_recount([]) == RunCounts(0, 0, 0, 0, 0)


def test_run_progress() -> None:
    # a task ready: moves on
    assert run_progress({"a": ("ready", []), "b": ("pending", ["a"])}) == (True, [])
    # fan-in that did not happen: b's only dependency succeeded, b still pending
    assert run_progress({"a": ("succeeded", []), "b": ("pending", ["a"])}) == (False, ["b"])
    # a pending task whose dependency failed can never run, nothing else is live
    assert run_progress({"a": ("dead", []), "b": ("pending", ["a"])}) == (False, [])
    # a pending chain behind a live task still moves on
    graph = {"a": ("leased", []), "b": ("pending", ["a"]), "c": ("pending", ["b"])}
    assert run_progress(graph) == (True, [])
    # every task ended
    assert run_progress({"a": ("succeeded", [])}) == (False, [])


@pytest.mark.parametrize("name", doctor.SCRIPTS)
def test_repair_scripts_load_and_name_their_keys_in_the_header(name: str) -> None:
    source = full_source(name)
    assert "KEYS[1] shard prefix" in source
    assert "Returns:" in source and "Upholds:" in source
