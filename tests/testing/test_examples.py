"""The examples in examples/ that run on the testing mode do what their
docstrings say (no Redis server): exactly-once with SQLite, the ETL DAG, the
tenants' fairness, and examples/testing_mode.py, a user's test module, run
with pytest.  The examples that need processes (command tasks, the HTTP
worker, the tutorial) are run on a real Redis by tests/integration."""

from __future__ import annotations

import importlib.util
import re
import subprocess
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


def test_the_etl_dag_dead_letters_a_branch_blocks_its_downstream_and_replays() -> None:
    night = load("etl_dag").demo()
    # fan-out from extract; inventory's first attempt failed, load waits on it
    assert night.first_pass == {
        "extract": "succeeded",
        "orders": "succeeded",
        "customers": "succeeded",
        "inventory": "retry_wait",
        "load": "pending",
        "report": "pending",
        "archive": "succeeded",
    }
    # retries=2: three attempts, then the DLQ; its downstream never starts,
    # the independent branch (archive) went on
    assert night.attempts == ["failed", "failed", "failed"]
    assert night.counts == (0, 2, 1, 1)
    state, tasks = night.failed_run
    assert state == "failed"
    assert tasks["inventory"] == "dead"
    assert tasks["load"] == tasks["report"] == "upstream_failed"
    assert tasks["archive"] == tasks["orders"] == "succeeded"
    error = "ConnectionError: inventory: source database unreachable"
    assert night.dlq == [("inventory", 3, error)]
    # the replay reopens the run: only the dead task and its downstream run
    state, tasks = night.replayed_run
    assert state == "succeeded" and set(tasks.values()) == {"succeeded"}
    assert night.ran_again == ["inventory", "load", "report"]


def test_the_quiet_tenant_is_not_starved_by_the_backfill_and_the_cap_holds() -> None:
    fair = load("multi_tenant").demo()
    assert fair.total == 135
    # weighted round robin, not arrival order: acme 3, backfill 1, quiet 1 per
    # round; quiet's five tasks, enqueued behind 130, run within the first 25
    assert fair.first_25 == "baaaq" * 5
    assert fair.quiet_positions == [4, 9, 14, 19, 24]
    # leasing all it can, a worker holds at most backfill's cap of its tasks
    assert fair.one_batch == {"backfill": 4, "acme": 30, "quiet": 5}


def test_the_testing_mode_example_is_a_test_module_that_passes() -> None:
    # run as a user runs their tests: pytest on the file, in its own process
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*argv, "examples/testing_mode.py"],
        cwd=EXAMPLES.parent, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    passed = re.search(r"(\d+) passed", done.stdout)
    assert passed is not None and int(passed.group(1)) >= 7, done.stdout
