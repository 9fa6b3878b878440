"""Keeping: the keeper thread, which looks after the leases the worker holds.

Every 50 ms it sends 'running' marks and enforces timeouts; every TTL/6 it
heartbeats all leases (one call per shard), kills revoked work and renews the
worker's entry in the workers registry; and it runs promote/reap at most once
per shard per interval across all workers (a short lock).  A shard whose call
fails (its cluster master down) is left alone for its gate delay; the others,
and the registry entry, go on.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import socket
import time
from collections.abc import Callable, Sequence

from redcron.engine import (
    LEASED_PUBLISHED,
    LEASED_REPUBLISH_S,
    TRANSIENT,
    TTL_LEASES,
    Registration,
)
from redcron.worker.crew import Role, registered_tasks
from redcron.worker.execute import Attempt, Outcome
from redcron.worker.ledger import token

# the worker's logger: operators and tests filter on it, wherever the line is written
log = logging.getLogger("redcron.worker.worker")


class Keeper(Role):
    """The keeper of one worker over its ``shards``."""

    def run(self, shards: list[int]) -> None:
        """Keep the leases until the drain is over and nothing is held."""
        ledger = self.ledger
        hb_every = self.lease_ttl_ms / 1000 / 6
        next_hb = 0.0  # at once: nothing to renew yet, but the registry entry is published
        next_maint = 0.0
        next_pub = 0.0  # "running now" re-published on a change, at most every 5 s
        published: list[str] = []
        while not ledger.reporter_done.is_set():
            now = time.monotonic()
            self._enforce_timeouts(now)
            up = self.gate.open(shards, now)
            self._per_shard(up, "running marks", self._mark_running)
            told = self._told()
            if told:  # one scan a tick; nothing more unless a task called ctx.progress
                write = functools.partial(self._write_progress, told, now=now, every=hb_every)
                self._per_shard([s for s in up if s in told], "progress", write)
            leased = self.ledger.leased(LEASED_PUBLISHED)
            if now >= next_hb:
                self._per_shard(up, "heartbeat", self._heartbeat)
                self._publish(leased)  # renewed with the leases
                next_hb, next_pub, published = now + hb_every, now + LEASED_REPUBLISH_S, leased
            elif leased != published and now >= next_pub:
                self._publish(leased)
                next_pub, published = now + LEASED_REPUBLISH_S, leased
            if now >= next_maint:
                self._per_shard(up, "maintenance", self._maintain)
                next_maint = now + self.settings.maintenance_interval * (0.5 + random.random() / 2)
            if ledger.stopping.is_set() and not ledger.active:
                break
            time.sleep(0.05)
        self._register(remove=True)

    def _per_shard(self, shards: list[int], what: str, call: Callable[[int], bool]) -> None:
        """``call`` each shard (True: it talked to Redis); a shard that fails (its
        cluster master down; on one server, every shard) is left alone for its
        gate delay, the others go on."""
        for shard in shards:
            try:
                talked = call(shard)
            except TRANSIENT as exc:
                self.gate.failed(shard, exc, what, time.monotonic())
            else:
                if talked:
                    self.gate.ok(shard)

    def _maintain(self, shard: int) -> bool:
        """Promote/reap ``shard``, and apply its follow-ups, each if no other worker
        or beat did within the interval (a lock each: a beat busy firing leaves
        the follow-ups to the workers)."""
        interval = self.settings.maintenance_interval
        engine = self.broker
        if engine.try_lock(shard, self.id, interval):
            engine.maintain(shard, follow=False)
        if engine.try_lock(shard, self.id, interval, "followups"):
            engine.follow_all(shard)
        return True

    def _publish(self, leased: Sequence[str]) -> None:
        """:meth:`_register`, an outage of its key's master logged (the entry is
        renewed next time)."""
        try:
            self._register(leased)
        except TRANSIENT as exc:
            self._outage.failed(exc, "worker registry")

    def _register(self, leased: Sequence[str] = (), remove: bool = False) -> None:
        """Publish this worker in the registry (``redcron workers list``), or take
        it out on a clean stop.  The entry lives a few lease TTLs: a worker that
        dies without a word drops out when its heartbeats stop renewing it."""
        if remove:
            try:
                self.broker.remove_worker(self.id)
            except TRANSIENT as exc:  # on the way out: the entry expires anyway
                log.info("could not leave the worker registry (%s); it expires", exc)
            return
        options = self.options
        running = self.ledger.running()
        self.broker.publish_worker(
            Registration(
                id=self.id,
                host=socket.gethostname(),
                pid=os.getpid(),
                queues=options.queues,
                tenants=options.tenants,
                slots=options.slots,
                running=running,
                tasks=sorted(registered_tasks(self.app, options)),
                leased=leased,
                supervisor=options.supervisor or "",
            ),
            TTL_LEASES * self.lease_ttl_ms,
        )

    def _mark_running(self, shard: int) -> bool:
        """Send 'running' marks for the attempts on ``shard`` that began since the
        last tick.

        Off the lease path on purpose: a mark per batch would cost the hot
        loop a round trip; attempts that end within one tick (50 ms) go
        straight from leased to their outcome.
        """
        with self.ledger.lock:
            began = [
                j
                for j in self.ledger.active.values()
                if j.lease.shard == shard
                and j.began is not None
                and not j.marked
                and not j.finished
            ]
        if not began:
            return False
        tokens = [(attempt.lease.iid, attempt.lease.epoch) for attempt in began]
        self.broker.start(shard, self.id, tokens)
        for attempt in began:
            attempt.marked = True
        return True

    def _told(self) -> dict[int, list[Attempt]]:
        """The running attempts whose task called ``ctx.progress``, by shard."""
        told: dict[int, list[Attempt]] = {}
        with self.ledger.lock:
            for j in self.ledger.active.values():
                if j.progress is not None and not j.finished:
                    told.setdefault(j.lease.shard, []).append(j)
        return told

    def _write_progress(
        self, told: dict[int, list[Attempt]], shard: int, now: float, every: float
    ) -> bool:
        """Write the progress due of ``told``'s attempts on ``shard``: at most one
        write per attempt per heartbeat period unless flushed; what is left when
        an attempt ends is the reporter's (worker/progress.py)."""
        return self.progress.write(shard, told[shard], now, every)

    def _enforce_timeouts(self, now: float) -> None:
        with self.ledger.lock:
            overdue = [
                j
                for j in self.ledger.active.values()
                if j.deadline is not None
                and now > j.deadline
                and not j.finished
                and j.kill_reason is None
            ]
        for attempt in overdue:
            self._end_unkillable(
                attempt, "timed_out", f"timed out after {attempt.lease.timeout_ms / 1000}s"
            )

    def _end_unkillable(self, attempt: Attempt, reason: str, message: str) -> None:
        """Kill the attempt's process group; a Python thread is abandoned instead, and an
        attempt still waiting for a slot (prefetched) is ended without ever starting."""
        if attempt.kill(reason):
            return  # the pool sees the kill and reports the outcome
        with attempt.lock:
            if attempt.finished or attempt.abandoned:
                return
            began = attempt.began is not None
            if began and attempt.lease.kind != "python":
                return  # between start and spawn: run_command sees kill_reason, kills at once
            attempt.abandoned = True
        if began:
            log.warning("task %s %s; abandoning its thread", attempt.lease.iid, message)
            # only a thread that is running the task is lost to the pool: one that
            # never began keeps its slot, and a replacement would oversubscribe it
            self.pool.replace()
        else:
            log.info("task %s %s before it began; it will not run", attempt.lease.iid, message)
        outcome = "timed_out" if reason == "timed_out" else "cancelled"
        self.ledger.ended(attempt, Outcome(ok=False, outcome=outcome, error=message))

    def _heartbeat(self, shard: int) -> bool:
        """Heartbeat the leases held on ``shard``; kill what was cancelled."""
        with self.ledger.lock:
            attempts = [j for j in self.ledger.active.values() if j.lease.shard == shard]
        # One token per task: the newest epoch.  An older attempt of the same
        # task (finished, its report on the way) lost its lease when the new one
        # was issued, and heartbeat answers by task id, so a second token for
        # the id would make the answer ambiguous.
        newest: dict[str, Attempt] = {}
        for j in attempts:
            seen = newest.get(j.lease.iid)
            if seen is None or int(j.lease.epoch) > int(seen.lease.epoch):
                newest[j.lease.iid] = j
        if not newest:
            return False
        tokens = [token(j) for j in newest.values()]
        lost, revoked = self.broker.heartbeat(shard, self.id, self.lease_ttl_ms, tokens)
        for iid in lost:
            # a finished attempt's report may have landed since the heartbeat read
            # the map: only a lease lost under a running attempt is news
            if not newest[iid].finished:
                log.warning("lease of %s lost; its result will be discarded", iid)
        for iid in revoked:
            attempt = newest.get(iid)
            if attempt is not None and attempt.kill_reason is None:
                log.info("task %s cancelled; killing it", iid)
                self._end_unkillable(attempt, "cancelled", "cancelled while running")
        return True
