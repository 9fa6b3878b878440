"""Parking: one job the beat cannot plan or fire leaves the schedule with a reason.

DESIGN §8a: one job's failure (an expression, a malformed record, a zone gone
from tzdata) parks that job; it never stops a process that serves every
tenant.  ``job_park.lua`` moves the job from the schedule to the shard's
``attention`` ZSET (``parked:<job id>``) and records ``parked_reason`` and
``parked_at`` in its hash, compare-and-set on the version and score the beat
read (a job fixed meanwhile is not parked for its old fault).  It stays
there, retried by no tick, until it is updated (``job_put``: any put, even of
the same spec) or resumed (``job_pause``), which put it back on the schedule;
the beat logs one WARNING per job it parks.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from redcron.engine import UNAVAILABLE_CODES, Engine, Park

log = logging.getLogger("redcron.beat.beat")

#: error replies that say something about the server, not about one job's data:
#: the server-state ones (engine/replies.py) and those of its settings
_SERVER_STATE = (*sorted(UNAVAILABLE_CODES), "OOM", "MISCONF", "NOSCRIPT", "NOPERM", "NOAUTH")


def job_fault(message: str) -> bool:
    """Whether a fire's error reply is a script error about that job's data (a
    Lua runtime error on what its hash holds) rather than the server's state."""
    text = message.lstrip()
    return "user_script" in text and not text.startswith(_SERVER_STATE)


def park(engine: Engine, shard: int, parks: Sequence[Park]) -> list[str]:
    """Park jobs of one shard, one WARNING each; returns the ids handled (parked,
    or changed since they were read: the next tick reads them again)."""
    done = []
    for p, parked in zip(parks, engine.job_park(shard, parks), strict=True):
        done.append(p.job_id)
        if parked:
            log.warning(
                "job %s (tenant %s) parked, not fired: %s; it stays off the schedule "
                "until it is updated (jobs apply / PUT) or resumed",
                p.job_id,
                p.tenant or "?",
                p.reason,
                extra={"job_id": p.job_id, "tenant": p.tenant or None, "parked": p.reason},
            )
        else:
            log.debug("job %s changed since it was read; not parked", p.job_id)
    return done
