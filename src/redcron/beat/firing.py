"""Firing: sending the planned fire.lua calls of one shard and settling their
results, with a log line per fire time done.

``fire.lua`` compares the schedule score and the job version before it
creates the run ``<job_id>@<N>`` and stores the next fire time, and refuses a
beat whose shard lease is stale.  Each fire time is judged on its own: one
overdue by at most ``catchup_window`` is fired (a failover loses nothing);
only the older ones follow the job's catch-up policy (invariant 2).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from redcron.beat import parking
from redcron.beat.ownership import Ownership
from redcron.beat.planning import Call, Planner
from redcron.engine import Engine, ErrorReply, FireArgs, Park
from redcron.errors import ShardLeaseLost, from_script_error
from redcron.keys import run_id
from redcron.model.serialize import iso
from redcron.schedule.timeutil import from_ms
from redcron.serde import text as _s

# one logger for the whole beat, so its records keep the name operators filter on
log = logging.getLogger("redcron.beat.beat")

#: statuses of fire.lua that mean "this fire time is done"
_DONE = {"created", "skipped", "buffered", "waiting", "exists", "skipped_all", "rejected"}
_COUNTED = {"created", "skipped", "buffered", "waiting", "rejected"}


class Firer:
    """Fires the due jobs of the shards a beat owns.

    Args:
        shards: the beat's shard ownership (fires carry its epochs; a refused
            one drops the shard).
        planner: reads and plans the due jobs, and caches what fires stored.
        batch: schedule entries read per round trip.
    """

    def __init__(self, shards: Ownership, planner: Planner, batch: int) -> None:
        self.shards = shards
        self.planner = planner
        self.batch = batch
        #: some fire made progress (or the time budget ran out): tick again at once
        self.busy = False
        #: pages a shard fires before the next shard's turn (None: all it has)
        self.turn_pages: int | None = None
        #: shards whose turn ended with due rows left (they fire again this tick)
        self.more: set[int] = set()
        self._sender: ThreadPoolExecutor | None = None

    def close(self) -> None:
        if self._sender is not None:
            self._sender.shutdown()
            self._sender = None

    def fire_shard(self, engine: Engine, shard: int, now: int, budget: float) -> int:
        """Fire the due jobs of one shard, a page of ``batch`` schedule rows at a time.

        The fires of one page are sent by the sender thread while this one reads
        and plans the next, so Redis and Python work at the same time.  Jobs in
        flight are skipped by id when the next page is read (their fire may not
        have landed yet); a fire planned twice would only come back ``stale``.
        With :attr:`turn_pages` set, the shard's turn ends after that many pages
        and, when rows were left, it goes into :attr:`more`: the beat then
        gives the other shards their turn before this one's next, so a burst's
        fires interleave over the shards (their tenants) instead of one shard's
        tenants all waiting for another's.
        """
        fired = 0
        pages = 0
        self.more.discard(shard)
        flight: Future[list[Any]] | None = None
        flying: list[Call] = []
        while True:
            busy = {call.job_id for call in flying}
            due = engine.due(shard, now, self.batch + len(busy))
            pages += 1
            last = len(due) < self.batch + len(busy) or time.monotonic() > budget
            if not last and self.turn_pages is not None and pages >= self.turn_pages:
                self.more.add(shard)
                last = True
            todo = [row for row in due if row.job_id not in busy]
            calls = self.planner.plan(engine, shard, todo, now)
            if flight is not None:
                fired += self._settle(engine, shard, flying, flight.result())
            if not calls or shard not in self.shards.owned:
                break
            if self._sender is None:
                self._sender = ThreadPoolExecutor(1, thread_name_prefix="redcron-beat-send")
            flight = self._sender.submit(self._send, engine, shard, self.shards.owned[shard], calls)
            flying = calls
            if last:
                fired += self._settle(engine, shard, flying, flight.result())
                break
        self.busy = self.busy or time.monotonic() > budget
        return fired

    def _send(self, engine: Engine, shard: int, epoch: str, calls: list[Call]) -> list[Any]:
        """Send the fires (runs in the sender thread).  One result per call, in
        order; a refused batch (STALE) yields its error for each of its fires."""
        return engine.fire(
            shard,
            [
                FireArgs(c.job_id, c.fire.expected, c.version, c.fire.fire_ms, c.fire.next_ms,
                         c.fire.next_due, epoch, c.fire.trigger, c.fire.skipped,
                         run_id(c.job_id, c.fire.fire_ms))
                for c in calls
            ],
        )  # fmt: skip

    def _settle(self, engine: Engine, shard: int, calls: list[Call], results: list[Any]) -> int:
        """Account for fire.lua results; returns the fires done.  Any progress
        makes the beat tick again at once (a chain may have more due).

        A job hash no run can be made from (fire.lua's ``malformed``) is parked.
        Fires that failed with a script error (one fire's error aborts its whole
        fire_batch call) are sent again one at a time (:meth:`_isolate`).
        """
        fired = 0
        parks: list[Park] = []
        again: list[Call] = []
        for call, res in zip(calls, results, strict=True):
            jid, f = call.job_id, call.fire
            if isinstance(res, ErrorReply):
                if isinstance(from_script_error(str(res)), ShardLeaseLost):
                    self.shards.drop(shard)
                    break
                if parking.job_fault(str(res)):
                    again.append(call)
                    continue
                log.warning("job %s: fire %d failed: %s", jid, f.fire_ms, res)
                continue
            status = _s(res[0])
            if status == "malformed":
                why = _s(res[1])
                parks.append(Park(jid, call.version, f.expected, why, self.planner.tenant_of(jid)))
                continue
            if status in _DONE:
                self.busy = True
                if f.next_ms is not None and f.next_due is not None:
                    self.planner.stored(jid, f.next_due, f.next_ms, call.version)
                fired += status in _COUNTED
                self._log_fire(call, _s(res[1]), status, int(res[2]) if len(res) > 2 else None)
            elif status == "version":
                self.planner.forget(jid)
        if parks:
            self.planner.park(engine, shard, parks)
        if again:
            fired += self._isolate(engine, shard, again)
        return fired

    def _isolate(self, engine: Engine, shard: int, calls: list[Call]) -> int:
        """Send fires that failed together one at a time; returns the fires done.

        The others of the failed call are made; a job whose fire fails alone is
        parked, but only when some fire succeeded alone: when every one fails,
        the fault is the server's or a script's, not one job's data, and parking
        them all would stop every tenant the other way.  Later fires of a chain
        whose earlier fire failed are not sent (they could only come back stale).
        """
        fired = 0
        failed: dict[str, tuple[Call, Any]] = {}
        succeeded = False
        for call in calls:
            if call.job_id in failed or shard not in self.shards.owned:
                continue
            res = self._send(engine, shard, self.shards.owned[shard], [call])
            if not isinstance(res[0], ErrorReply):
                succeeded = True
                fired += self._settle(engine, shard, [call], res)
                continue
            if isinstance(from_script_error(str(res[0])), ShardLeaseLost):
                self.shards.drop(shard)
                break
            log.warning("job %s: fire %d failed: %s", call.job_id, call.fire.fire_ms, res[0])
            failed[call.job_id] = (call, res[0])
        if failed and succeeded:
            self.planner.park(engine, shard, [
                Park(c.job_id, c.version, c.fire.expected, f"fire failed: {err}",
                     self.planner.tenant_of(c.job_id))
                for c, err in failed.values()
                if parking.job_fault(str(err))
            ])  # fmt: skip
        elif failed:
            log.warning(
                "shard %d: all %d fires sent one at a time failed: taken for a server or "
                "script fault, not one job's; none parked",
                shard,
                len(failed),
            )
        return fired

    def _log_fire(self, call: Call, run_id: str, status: str, recorded: int | None) -> None:
        """A line per fire time done: what fired, how late, and what became of it.

        The fields also travel as the record's attributes (``extra``), so that
        ``--log-format json`` carries them as keys.
        """
        f = call.fire
        spec = self.planner.spec_of(call.job_id)
        nominal = iso(from_ms(f.fire_ms))
        lag = None if recorded is None else recorded - f.fire_ms
        fields = {
            "job": spec.name if spec else None,
            "job_id": call.job_id,
            "tenant": spec.tenant if spec else None,
            "fire_time": nominal,
            "lag_ms": lag,
            "run_id": run_id or None,
            "status": status,
            "trigger": f.trigger,
        }
        log.info(
            "job %s %s (tenant %s) fire %s (%s): %s, run %s, lag %s",
            fields["job"] or "?",
            call.job_id,
            fields["tenant"] or "?",
            nominal,
            f.trigger,
            status,
            run_id or "-",
            "?" if lag is None else f"{lag}ms",
            extra=fields,
        )
