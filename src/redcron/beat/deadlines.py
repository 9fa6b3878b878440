"""Deadlines: the runs of a job with ``deadline_s`` that are still going past it.

A run's deadline (its nominal fire time + the job's ``deadline_s``; a manual
run's counts from its trigger) is armed in the shard's ``deadlines`` index when
the run is made and disarmed when it ends, both in the script that does it.
Here the beat, for each shard it owns and at most every :data:`SWEEP_EVERY_MS`,
calls ``deadline_sweep.lua``, which takes the due entries off the index and
marks their runs that have not ended late (the run hash's ``late``, the
tenant's late counter, a ``run_late`` event), once per run: a run is marked in
the call that takes its entry off, so two beats overlapping at a handover, or
a beat killed between calls, cannot mark it twice or lose it.  An INFO line
per run marked late.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from redcron.engine import SWEEP_LIMIT, Engine, LateRun
from redcron.schedule.timeutil import from_ms

log = logging.getLogger("redcron.beat.beat")

#: a shard's deadlines are swept at most this often (ms, server clock): a run is
#: marked late within about this much (and the beat's tick) of its deadline
SWEEP_EVERY_MS = 1_000
#: deadline_sweep.lua calls per shard per sweep (each looks at SWEEP_LIMIT):
#: a burst of deadlines due at once is marked over a few ticks, never in one
#: long block of Redis
SWEEP_CALLS = 4


class Deadlines:
    """When each owned shard was last swept, and the sweep itself."""

    def __init__(self, every_ms: int = SWEEP_EVERY_MS) -> None:
        self.every_ms = every_ms
        self._next: dict[int, int] = {}

    def sweep(self, engine: Engine, shards: Iterable[int], now: int) -> list[LateRun]:
        """Sweep the ``shards`` due for it at ``now`` (server ms); returns the runs
        marked late, each logged.  Redis failing raises (the caller gates the
        shard); shards not swept are tried at the next tick."""
        marked: list[LateRun] = []
        for shard in shards:
            if now < self._next.get(shard, 0):
                continue
            for _ in range(SWEEP_CALLS):
                swept = engine.sweep_deadlines(shard)
                for run in swept.late:
                    _log_late(run)
                marked += swept.late
                if swept.looked < SWEEP_LIMIT:
                    break
            self._next[shard] = now + self.every_ms
        return marked

    def forget(self, owned: Iterable[int]) -> None:
        """Drop what is kept about shards no longer ``owned``."""
        keep = set(owned)
        for shard in [s for s in self._next if s not in keep]:
            del self._next[shard]


def _log_late(run: LateRun) -> None:
    late_s = (run.deadline_ms - run.scheduled_for_ms) / 1000
    log.info(
        "run %s of job %s (tenant %s) is late: not ended %gs after %s",
        run.run_id,
        run.job_name,
        run.tenant,
        late_s,
        from_ms(run.scheduled_for_ms).isoformat().replace("+00:00", "Z"),
        extra={"run_id": run.run_id, "tenant": run.tenant, "job": run.job_name, "late": True},
    )
