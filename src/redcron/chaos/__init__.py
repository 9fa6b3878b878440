"""``redcron chaos``: one reproducible chaos scenario (processes killed, frozen and
restarted, the Redis server killed once) and a checker of the invariants after it.

``plan(seed, duration, tasks)`` draws the scenario, ``run_scenario`` plays it
against an embedded Redis and returns the checker's :class:`ChaosReport`.
"""

from redcron.chaos.checker import ChaosReport
from redcron.chaos.runner import run_scenario
from redcron.chaos.scenario import Scenario, plan

__all__ = ["ChaosReport", "Scenario", "plan", "run_scenario"]
