"""``redcron chaos --cluster``, short: the chaos scenario (workers SIGKILLed and
SIGSTOPped, beats SIGKILLed) on a 3-master Redis Cluster of its own with 12
shards, one master SIGKILLed and restarted; every invariant holds, only that
master's shards paused, and their work resumed once it was back.

Marked ``cluster`` by tests/cluster/conftest.py, and ``chaos``/``slow`` like
tests/chaos/test_scenario.py.
"""

from __future__ import annotations

import pytest

from redcron.chaos import plan, run_scenario

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(180)]

SEED = 11
DURATION = 20.0
TASKS = 800


def test_a_master_killed_pauses_only_its_shards_and_breaks_no_invariant() -> None:
    report = run_scenario(plan(SEED, DURATION, TASKS, cluster=True), say=print)
    print(report)
    assert report.violations == (), "\n".join(report.violations)
    assert report.invariant_violations == 0 and report.lost == 0 and report.stuck == 0
    assert report.cluster and report.redis_restarts == 1
    assert report.tasks == TASKS
    assert report.fires_expected > 0 and report.missing_fires == 0
    assert report.duplicates_in_window == 0
    outage = report.outage
    assert outage is not None and outage.shards
    assert outage.finishes_live > 0  # and no live master that was working paused (judge)
    assert outage.finishes_dead == 0
    assert outage.finishes_after > 0
