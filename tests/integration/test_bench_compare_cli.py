"""The checkout's ``python -m bench.compare`` against the test server: the
shape of its JSON and its table, redcron alone (CI, which installs no peer)
and beside one cheap peer when the bench extra is installed; a missing peer is
a note, not a crash.  The figures themselves are the benchmark's, never
asserted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bench.compare import main
from bench.compare_stats import FIGURES
from bench.peers import huey_peer

SMALL = ["--tasks", "200", "--samples", "10", "--rounds", "1"]


def _run(redis_url: str, *args: str) -> Result:
    return CliRunner().invoke(main, [*SMALL, *args, "--redis", redis_url])


def _json(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def test_redcron_alone_reports_every_figure(redis_url: str) -> None:
    out = _json(_run(redis_url, "--systems", "redcron", "--json"))
    assert out["tasks"] == 200 and out["rounds"] == 1 and out["body"] == "incr"
    assert out["order"] == [["redcron"]]
    assert out["redis"]["version"]
    entry = out["systems"]["redcron"]
    assert {"version", "config", "guarantee"} <= set(entry)
    assert len(entry["rounds"]) == 1
    assert set(entry["median"]) == set(FIGURES)
    assert entry["median"]["drain_per_s"] > 0
    assert entry["median"]["enqueue_bulk_per_s"] > 0  # enqueue_many
    assert out["ratios"] == {}


def test_beside_a_peer_the_ratios_are_redcron_over_it(redis_url: str) -> None:
    pytest.importorskip("huey", reason="the bench extra is not installed")
    result = _run(redis_url, "--systems", "huey,redcron", "--json")
    out = _json(result)
    assert out["order"] == [["redcron", "huey"]]
    huey = out["systems"]["huey"]
    assert "errors" not in huey, huey
    assert huey["median"]["drain_per_s"] > 0
    assert huey["median"]["enqueue_bulk_per_s"] is None  # no bulk API
    assert set(out["ratios"]) == {"huey"}
    assert set(out["ratios"]["huey"]) == set(FIGURES)
    assert "bench compare: round 1/1: huey" in result.stderr


def test_a_missing_peer_is_skipped_with_a_note(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(huey_peer, "missing", lambda: "huey is not installed (pip install x)")
    result = _run(redis_url, "--systems", "redcron,huey")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["system", "enq", "1/s"]
    assert lines[1].startswith("redcron ")
    assert lines[-1] == "huey: skipped: huey is not installed (pip install x)"
    assert "huey: skipped" in result.stderr


def test_an_unknown_system_is_refused(redis_url: str) -> None:
    result = _run(redis_url, "--systems", "redcron,sidekiq")
    assert result.exit_code == 2
    assert "unknown sidekiq" in result.output


def test_procs_adds_a_redcron_row_measured_with_worker_processes(redis_url: str) -> None:
    out = _json(_run(redis_url, "--systems", "redcron", "--procs", "1,2", "--json"))
    assert out["order"] == [["redcron", "redcron --procs 2"]]
    row = out["systems"]["redcron --procs 2"]
    assert "errors" not in row, row
    assert row["config"].startswith("redcron worker --procs 2")
    assert row["median"]["drain_per_s"] > 0 and row["median"]["worker_cpu_us_per_task"] > 0
    assert set(out["procs_ratios"]) == {"redcron --procs 2"}
    assert set(out["procs_ratios"]["redcron --procs 2"]) == {"redcron"}


def test_bad_procs_name_the_flag(redis_url: str) -> None:
    result = _run(redis_url, "--procs", "0")
    assert result.exit_code == 2 and "--procs" in result.output, result.output
