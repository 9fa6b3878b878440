"""The pure parts of the checkout's ``python -m bench.compare``: the order of
each round, INFO commandstats parsed and differenced, medians and ratios, the
table, the --systems list, the notes for a peer that cannot run, and the
command run as ``python -m`` from the checkout.  No Redis."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import compare_stats as cs
from bench.compare import parse_procs, parse_systems
from bench.peers import SYSTEMS, _proc, bullmq_peer

ROOT = Path(__file__).resolve().parents[2]


def test_each_round_runs_every_system_once_rotated() -> None:
    order = cs.round_order(["a", "b", "c"], 4)
    assert order == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert all(sorted(r) == ["a", "b", "c"] for r in order)
    # over as many rounds as systems, each runs first once and last once
    assert {r[0] for r in order[:3]} == {r[-1] for r in order[:3]} == {"a", "b", "c"}
    assert cs.round_order(["a"], 2) == [["a"], ["a"]]
    assert cs.round_order([], 3) == []


def test_commandstats_parse_as_redis_py_returns_them_and_as_text() -> None:
    parsed = {
        "cmdstat_get": {"calls": 3, "usec": 12, "usec_per_call": 4.0},
        "cmdstat_evalsha": {"calls": 2, "usec": 50, "usec_per_call": 25.0},
        "redis_version": "7.0.15",
    }
    assert cs.parse_commandstats(parsed) == {"get": (3, 12.0), "evalsha": (2, 50.0)}
    text = (
        "# Commandstats\r\n"
        "cmdstat_get:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n"
        "cmdstat_client|setname:calls=1,usec=2,usec_per_call=2.00\r\n"
    )
    assert cs.commandstats_text(text) == {"get": (3, 12.0), "client|setname": (1, 2.0)}


def test_command_usec_is_the_delta_less_the_benchmarks_own_calls() -> None:
    before = {"incr": (100, 100.0), "evalsha": (10, 500.0), "get": (5, 5.0)}
    after = {
        "incr": (300, 300.0),  # 200 calls, 200 us: all the body's
        "evalsha": (30, 1500.0),  # 1000 us, the system's
        "get": (15, 25.0),  # 10 calls, 20 us: 4 were the benchmark's polls
        "hset": (7, 14.0),  # new since before
    }
    got = cs.command_usec(before, after, {"incr": 200, "get": 4})
    assert got == pytest.approx(1000 + 20 * 6 / 10 + 14)
    # never more taken out than the command spent
    assert cs.command_usec(before, after, {"incr": 10**6}) == pytest.approx(1000 + 20 + 14)
    # a RESETSTAT in between (counts went down): that command is left out
    assert cs.command_usec({"get": (50, 80.0)}, {"get": (3, 1.0)}) == 0


def test_medians_over_rounds_skip_rounds_without_the_figure() -> None:
    rounds = [
        {"drain_per_s": 900, "latency_p99_ms": 2.0, "enqueue_bulk_per_s": None},
        {"drain_per_s": 1100, "latency_p99_ms": 1.0, "enqueue_bulk_per_s": None},
        {"drain_per_s": 1000, "latency_p99_ms": 3.0, "enqueue_bulk_per_s": None},
    ]
    med = cs.medians(rounds)
    assert set(med) == set(cs.FIGURES)
    assert med["drain_per_s"] == 1000 and med["latency_p99_ms"] == 2.0
    assert med["enqueue_bulk_per_s"] is None and med["worker_cpu_us_per_task"] is None


def test_ratios_are_redcron_over_the_peer_where_both_have_the_figure() -> None:
    ours = {"drain_per_s": 6000, "latency_p50_ms": 1.5, "enqueue_bulk_per_s": 20000}
    peer = {"drain_per_s": 2400, "latency_p50_ms": 1.0, "enqueue_bulk_per_s": None}
    got = cs.ratios(ours, peer)
    assert got["drain_per_s"] == 2.5 and got["latency_p50_ms"] == 1.5
    assert got["enqueue_bulk_per_s"] is None  # the peer has no bulk API
    assert cs.ratios({"drain_per_s": 1}, {"drain_per_s": 0})["drain_per_s"] is None
    tiny = cs.ratios({"latency_p50_ms": 1.0}, {"latency_p50_ms": 496.0})["latency_p50_ms"]
    assert tiny == 0.002  # not 0.0


def test_the_table_lists_medians_ratios_and_skipped_peers() -> None:
    fig = dict.fromkeys(cs.FIGURES, 1.0) | {"drain_per_s": 6000.0}
    result = {
        "systems": {
            "redcron": {"median": fig},
            "huey": {"median": fig | {"drain_per_s": 3000.0, "enqueue_bulk_per_s": None}},
            "celery": {"skipped": "celery is not installed (pip install -e '.[bench]')"},
        },
        "ratios": {"huey": cs.ratios(fig, fig | {"drain_per_s": 3000.0})},
    }
    lines = cs.table(result).splitlines()
    assert lines[0].split()[0] == "system" and "drain/s" in lines[0]
    assert lines[1].startswith("redcron") and "6,000" in lines[1]
    assert lines[2].startswith("huey") and " - " in lines[2] + " "
    assert lines[3].startswith("redcron/huey") and "2.0x" in lines[3]
    assert lines[4] == "celery: skipped: celery is not installed (pip install -e '.[bench]')"
    assert len({len(line) for line in lines[:4]}) == 1  # aligned columns


def test_systems_keep_the_table_order_and_unknown_names_are_refused() -> None:
    assert parse_systems("huey, redcron,HUEY") == ["redcron", "huey"]
    assert parse_systems(",".join(reversed(SYSTEMS))) == list(SYSTEMS)
    with pytest.raises(ValueError, match="unknown sidekiq; choose from redcron,celery"):
        parse_systems("redcron,sidekiq")
    with pytest.raises(ValueError, match="none given"):
        parse_systems(" , ")


def test_a_missing_python_peer_names_the_extra() -> None:
    note = _proc.missing_python("no_such_peer_module_xyz", "nosuch")
    assert note == "nosuch is not installed (pip install -e '.[bench]')"


def test_bullmq_is_skipped_with_a_note_without_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bullmq_peer.shutil, "which", lambda name: None)
    assert bullmq_peer.missing() == "node and npm are not on PATH (BullMQ runs on Node)"


def test_the_bullmq_cache_folder_follows_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "/tmp/xdg-cache")
    assert str(bullmq_peer.cache_dir()) == "/tmp/xdg-cache/redcron/bench-node"


def test_procs_rows_are_parsed_once_each_and_bad_counts_name_the_flag() -> None:
    assert parse_procs("2, 1,2") == [1, 2]
    for bad in ("0", "65", "two", " , "):
        with pytest.raises(ValueError, match="--procs: give counts from 1 to 64"):
            parse_procs(bad)


def test_the_table_adds_the_procs_rows_against_redcron_and_each_peer() -> None:
    figures = {f: 1.0 for f in cs.FIGURES}
    result = {
        "systems": {
            "redcron": {"median": figures},
            "redcron --procs 2": {"median": figures},
            "bullmq": {"median": figures},
        },
        "ratios": {"bullmq": cs.ratios(figures, figures)},
        "procs_ratios": {
            "redcron --procs 2": {
                "redcron": cs.ratios(figures, figures),
                "bullmq": cs.ratios(figures, figures),
            }
        },
    }
    lines = cs.table(result).splitlines()
    assert [line.split("  ")[0].strip() for line in lines[4:]] == [
        "redcron/bullmq",
        "redcron --procs 2/redcron",
        "redcron --procs 2/bullmq",
    ]


def test_it_runs_from_the_checkout_as_python_m_bench_compare() -> None:
    """Issue 31, item 2: the peers side by side left the wheel for the checkout's
    bench/; ``python -m bench.compare`` (make bench-compare) runs it there."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.compare", "--help"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Usage: python -m bench.compare [OPTIONS]"), proc.stdout
    assert "--systems" in proc.stdout and "Celery" in proc.stdout


def test_the_peers_workers_find_the_checkouts_bench_package() -> None:
    # a Python peer's worker is ``python -c "from bench.peers.<x> import run_worker"``:
    # the checkout's root goes on its PYTHONPATH, whatever the benchmark's directory
    assert str(ROOT) == _proc.ROOT
    assert (Path(_proc.ROOT) / "bench" / "peers" / "__init__.py").is_file()
