"""The broker: every operation on Redis, as one object.

:class:`Broker` is a :class:`~redcron.engine.core.Core` (client, scripts,
script execution, meta, durability) that holds one object per protocol; callers
go to the part (``broker.leases.lease(...)``), which is the Python that calls
``lua/<name>.lua``, one hop from the script:

============================  ====================================================================
module                        scripts
============================  ====================================================================
``engine/enqueue.py``         enqueue, enqueue_check (:class:`Enqueuer`)
``engine/leases.py``          lease, start, heartbeat, complete, fail, release
``engine/maintenance.py``     promote, reap (with the lock and ``recent`` pruning)
``engine/dlq.py``             dlq_replay, dlq_discard, dlq_prune, dlq_unindex (:class:`DlqStore`)
``engine/inspect.py``         watch; counts read without a script
``engine/beat.py``            beat_own, fire, fire_batch, job_park (:class:`BeatStore`)
``engine/cancel.py``          cancel (run_cancel, run_retry: ``engine/jobs.py``)
``store/tenants.py``         tenant_unpark
============================  ====================================================================

``Broker.cancel`` is the one method of its own (docs/architecture.md, "The
broker").  ``shard_of_id``, ``fields_of``, ``time_ms`` and ``PAYLOADS`` live in
:mod:`redcron.engine.core` and are importable from here too.
"""

from __future__ import annotations

import redis

from redcron.config import Settings
from redcron.engine.beat import BeatStore
from redcron.engine.cancel import TaskCancel, cancel
from redcron.engine.core import PAYLOADS, Core, fields_of, shard_of_id, time_ms
from redcron.engine.dlq import DlqStore
from redcron.engine.enqueue import Enqueuer
from redcron.engine.inspect import Inspection
from redcron.engine.leases import (
    FailResult,
    Lease,
    LeaseRequest,
    Leases,
)
from redcron.engine.maintenance import Maintenance

#: ``Broker`` and what callers import from this module by name (the helpers
#: live in ``core``, the rows in ``leases``)
__all__ = [
    "PAYLOADS",
    "Broker",
    "FailResult",
    "Lease",
    "LeaseRequest",
    "fields_of",
    "shard_of_id",
    "time_ms",
]


class Broker(Core):
    """All Redis operations of one deployment (one key prefix)."""

    def __init__(self, settings: Settings, client: redis.Redis | None = None) -> None:
        super().__init__(settings, client)
        self.enqueuer = Enqueuer(self)
        self.leases = Leases(self)
        self.maintenance = Maintenance(self)
        self.dlq = DlqStore(self)
        self.inspection = Inspection(self)
        self.beat = BeatStore(self)

    def cancel(self, iid: str, now: int | None = None) -> TaskCancel:
        """End a task ``cancelled`` wherever it is (see :mod:`redcron.engine.cancel`)."""
        return cancel(self, iid, now)
