"""Writing what tasks say of their progress (``ctx.progress``; issue 34 §1).

A task's calls only record the latest value on its attempt
(:class:`~redcron.model.progress.Coalescer`); the worker writes it with
``progress.lua``, fenced by the attempt's lease token: the keeper, every tick,
the values due (the first at once, then at most one per heartbeat period, or
at once when flushed: ``done`` reached ``total``), one call per shard for all
of them; the reporter, whatever is still unwritten of the attempts it is about
to report, before their outcome, so the last value is never lost.

The two go through one lock held over taking a value and writing it: a value
the keeper took is in Redis before the reporter looks, so the reporter's
outcome can never overtake (and so fence out) the keeper's write of the last
value.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from redcron.engine import TRANSIENT, Engine, ProgressItem
from redcron.model.progress import Pending
from redcron.worker.execute import Attempt


class ProgressWriter:
    """One worker's progress writes; ``calls`` counts its script calls."""

    def __init__(self, broker: Engine, worker: str) -> None:
        self.broker = broker
        self.worker = worker
        self.lock = threading.Lock()
        self.calls = 0

    def write(
        self, shard: int, attempts: Iterable[Attempt], now: float, every: float | None
    ) -> bool:
        """Write the progress of ``attempts`` (all on ``shard``) that is due at
        ``now`` writing at most ``every`` seconds (None: all that is unwritten:
        the attempts ended).  True if a call was made."""
        with self.lock:
            taken: list[tuple[Attempt, Pending]] = []
            for attempt in attempts:
                c = attempt.progress
                if c is None:
                    continue
                pending = c.take_rest(now) if every is None else c.take(now, every)
                if pending is not None:
                    taken.append((attempt, pending))
            if not taken:
                return False
            items: list[ProgressItem] = [(a.lease.iid, a.lease.epoch, p) for a, p in taken]
            try:
                self.broker.progress(shard, self.worker, items)
            except TRANSIENT:
                for attempt, pending in taken:  # written at the next try
                    assert attempt.progress is not None
                    attempt.progress.restore(pending)
                raise
            self.calls += 1
            return True
