"""The chaos scenario of issue 11, short: the same plan as ``redcron chaos`` (workers
SIGKILLed and SIGSTOPped about every 2 s, beats SIGKILLed, the Redis server killed
once) over a shorter run with fewer tasks, then the checker (``redcron.chaos``).

It starts its own embedded Redis (AOF, ``appendfsync always``): it must kill it.
"""

from __future__ import annotations

import pytest

from redcron.chaos import plan, run_scenario

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(150)]

SEED = 11
DURATION = 24.0
TASKS = 1_200


def test_the_chaos_scenario_breaks_no_invariant() -> None:
    report = run_scenario(plan(SEED, DURATION, TASKS), say=print)
    print(report)
    assert report.violations == (), "\n".join(report.violations)
    assert report.invariant_violations == 0
    assert report.lost == 0
    assert report.redis_restarts == 1
    assert report.kills > 0 and report.worker_kills > 0 and report.beat_kills > 0
    assert report.tasks == TASKS
    assert report.fires_expected > 0 and report.missing_fires == 0
    assert report.duplicates_in_window == 0
    assert report.stuck == 0
