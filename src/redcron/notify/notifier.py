"""``redcron notifier``: route events to channels, send what is due, retry.

One pass (:meth:`Notifier.step`):

1. **route**: read each shard's events stream through the consumer group
   (entries a dead notifier left unacknowledged first, by ``XAUTOCLAIM``); for
   each event, every channel that takes its type and its tenant (a tenant's own
   channels; the admin's take every tenant) gets a delivery in its outbox, or,
   for a dead letter, a count in its digest; only then is the event
   acknowledged;
2. **digest**: a channel's digest that holds dead letters becomes one delivery
   if its last one went a minute ago or more;
3. **deliver**: each channel with due deliveries is sent by a thread of the
   pool, at most one thread per channel and at most ``tenant_threads`` per
   owner (a tenant, or the admin), each send within the channel's own timeout
   as one deadline: a slow or dead receiver holds up its own channel only, and
   one tenant's many slow channels leave the other threads to other tenants.

Time is the Redis server's (``now`` may be passed in by tests).  The secret and
the URL are unsealed only to send; neither is logged.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import socket
import threading
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from redcron.app import App
from redcron.engine import TRANSIENT, Engine
from redcron.errors import ValidationError
from redcron.model.channels import ADMIN_OWNER, check_url
from redcron.notify.messages import (
    DIGEST_EVERY_MS,
    OUTBOX_RETENTION_MS,
    body_of,
    dead_letter_detail,
    digest_message,
    event_message,
    retry_delay_ms,
)
from redcron.notify.sender import HttpSender, Response, Sender
from redcron.notify.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign,
)
from redcron.store import ChannelStore, Claimed, Outbox

log = logging.getLogger(__name__)

#: events read per shard per pass
READ_BATCH = 100
#: an event another notifier read and did not acknowledge this long is taken over
CLAIM_IDLE_MS = 60_000
#: a claimed delivery is due again this long past its channel's timeout (a
#: notifier killed while sending it leaves it to be resent then)
CLAIM_MARGIN_MS = 30_000
#: seconds between passes when there was nothing to do
POLL_S = 0.5
#: deliveries one channel sends per pass at most (claimed CLAIM_BATCH at a time)
DELIVER_MAX = 100
#: seconds to wait after a pass that Redis failed
OUTAGE_S = 1.0
#: passes between trims of the events streams and of idle consumers
HOUSEKEEPING_EVERY = 120


@dataclass(frozen=True, slots=True)
class Route:
    """A channel as the notifier routes to it."""

    id: str
    owner: str
    kind: str
    events: frozenset[str]
    timeout_s: float
    raw: dict[str, str]

    def takes(self, kind: str, tenant: str) -> bool:
        return kind in self.events and (self.owner == ADMIN_OWNER or self.owner == tenant)


class Notifier:
    """Sends the deployment's notifications (see the module docstring)."""

    def __init__(
        self,
        app: App,
        *,
        sender: Sender | None = None,
        name: str | None = None,
        base_url: str | None = None,
        claim_idle_ms: int = CLAIM_IDLE_MS,
        claim_margin_ms: int = CLAIM_MARGIN_MS,
        threads: int = 8,
        tenant_threads: int | None = None,
        rand: random.Random | None = None,
    ) -> None:
        self.broker: Engine = app.broker
        self.channels = ChannelStore(app.broker)
        self.outbox = Outbox(app.broker)
        self.sender: Sender = sender or HttpSender()
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.base_url = self.broker.settings.dashboard_url if base_url is None else base_url
        self.claim_idle_ms = claim_idle_ms
        self.claim_margin_ms = claim_margin_ms
        self.rand = rand or random.Random()
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="notify")
        #: threads one owner's channels may hold at once (None: a quarter of the pool)
        self.tenant_threads = tenant_threads_for(threads, tenant_threads)
        #: channel id -> (its owner, the thread's future) while sending or queued
        self._busy: dict[str, tuple[str, Future[int]]] = {}
        self._routes: list[Route] = []
        self._passes = 0

    # -- channels ----------------------------------------------------------------

    def refresh(self) -> list[Route]:
        """The channels, read afresh (every pass: an added or removed one counts
        from the next pass on)."""
        routes = []
        for channel, raw in self.channels.rows():
            routes.append(
                Route(
                    channel.id,
                    ADMIN_OWNER if channel.tenant is None else channel.tenant,
                    channel.kind,
                    frozenset(channel.events),
                    channel.timeout_s,
                    raw,
                )
            )
        self._routes = routes
        return routes

    # -- 1. route ----------------------------------------------------------------

    def route(self, now: int) -> int:
        """Route the events waiting on every shard; returns how many were read."""
        routes = self._routes
        n = 0
        for shard in range(self.broker.shards):
            entries = self.outbox.read(shard, self.name, READ_BATCH, self.claim_idle_ms)
            for entry in entries:
                if entry.fields:  # empty: trimmed while pending, nothing to route
                    self._route_one(routes, entry.shard, entry.id, entry.fields, now)
            self.outbox.ack(shard, [e.id for e in entries])
            if entries:
                log.info(
                    "routed %d event(s) of shard %d to %d channel(s)",
                    len(entries),
                    shard,
                    len(routes),
                )
            n += len(entries)
        return n

    def _route_one(
        self, routes: list[Route], shard: int, eid: str, fields: dict[str, str], now: int
    ) -> None:
        kind, tenant = fields.get("type", ""), fields.get("tenant", "")
        for route in routes:
            if not route.takes(kind, tenant):
                continue
            if kind == "dead_lettered":
                detail = dead_letter_detail(fields)
                self.outbox.digest_add(route.id, tenant, fields.get("job", ""), detail, now)
            else:
                delivery_id = f"{route.id}-{shard}-{eid}"
                message = event_message(fields, self.base_url)
                self.outbox.enqueue(route.id, delivery_id, message, now)

    # -- 2. digests --------------------------------------------------------------

    def flush_digests(self, now: int) -> int:
        made = 0
        for route in self._routes:

            def build(fields: dict[str, str], at: int, cid: str = route.id) -> tuple[str, Any]:
                return f"{cid}-digest-{at}", digest_message(fields, at, self.base_url)

            if self.outbox.flush_digest(route.id, now, DIGEST_EVERY_MS, build) is not None:
                made += 1
        return made

    # -- 3. deliver --------------------------------------------------------------

    def deliver(self, route: Route, now: int) -> int:
        """Send the channel's due deliveries, one after another; returns how many
        were attempted."""
        lease_ms = int(route.timeout_s * 1000) + self.claim_margin_ms
        sent = 0
        while sent < DELIVER_MAX:
            claimed = self.outbox.claim(route.id, now, lease_ms)
            for item in claimed:
                self._send(route, item, now)
            sent += len(claimed)
            if not claimed:
                break
        return sent

    def _send(self, route: Route, item: Claimed, now: int) -> None:
        message: dict[str, Any] = item.message.get("message", {})
        attempts = int(item.message.get("attempts", 0))
        created = int(item.message.get("created", now))
        kind = str(message.get("type", ""))
        try:
            url, secret = self.channels.credentials(route.id, route.raw)
            check_url(url, self.channels.allow())  # the allowlist may have shrunk since
        except (ValueError, ValidationError) as exc:
            response = Response(None, f"not sent: {getattr(exc, 'message', exc)}"[:200])
        else:
            body = body_of(route.kind, item.id, message)
            ts = now // 1000
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "redcron-notifier",
                DELIVERY_HEADER: item.id,
                EVENT_HEADER: kind,
                TIMESTAMP_HEADER: str(ts),
            }
            if route.kind == "webhook" and secret:
                headers[SIGNATURE_HEADER] = sign(secret, ts, body)
            try:
                response = self.sender.post(url, body, headers, route.timeout_s)
            except Exception as exc:  # a Sender of one's own that raises: a failed attempt
                response = Response(None, f"{type(exc).__name__}: {exc}"[:200])
        fields = {
            "delivery": item.id,
            "type": kind,
            "status": response.status if response.status is not None else "",
            "attempt": attempts + 1,
            "error": response.error,
            "at": now,
        }
        if response.ok:
            self.outbox.record(route.id, item, "delivered", fields)
            log.info("delivered %s (%s) to channel %s", item.id, kind, route.id)
        elif now - created >= OUTBOX_RETENTION_MS:
            self.outbox.record(route.id, item, "expired", fields)
            log.warning(
                "gave up %s to channel %s after %d attempts", item.id, route.id, attempts + 1
            )
        else:
            retry_at = now + retry_delay_ms(attempts, self.rand)
            self.outbox.record(route.id, item, "failed", fields, retry_at=retry_at)
            log.info(
                "delivery %s to channel %s failed (%s); retry in %d ms",
                item.id, route.id, response.error or response.status, retry_at - now,
            )  # fmt: skip

    # -- the loop ----------------------------------------------------------------

    def step(self, now: int | None = None) -> int:
        """One whole pass, waiting for every channel's sends (tests; ``now`` in ms),
        under the same bound per owner as :meth:`run`."""
        now = self.broker.server_ms() if now is None else now
        self.refresh()
        self.route(now)
        self.flush_digests(now)
        todo = list(self._routes)
        running: dict[Future[int], Route] = {}
        sent = 0
        while todo or running:
            held = Counter(r.owner for r in running.values())
            for route in list(todo):
                if held[route.owner] < self.tenant_threads:
                    running[self.pool.submit(self.deliver, route, now)] = route
                    held[route.owner] += 1
                    todo.remove(route)
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                del running[future]
                sent += future.result()
        return sent

    def housekeeping(self, now: int) -> None:
        for shard in range(self.broker.shards):
            self.outbox.trim(shard, now)
            self.outbox.forget_consumers(shard, 86_400_000)

    def run(self, stop: threading.Event | None = None) -> None:
        """Pass after pass until ``stop`` is set; a channel still sending from an
        earlier pass is left to it (never two threads on one channel)."""
        stop = stop or threading.Event()
        log.info("notifier %s started", self.name)
        try:
            while not stop.is_set():
                try:
                    routed = self._pass()
                except TRANSIENT as exc:
                    # Redis down or failing over: wait and go on (nothing is lost:
                    # what was not acknowledged or recorded is read again)
                    log.warning("notifier pass failed (%s); retrying in %.0f s", exc, OUTAGE_S)
                    stop.wait(OUTAGE_S)
                    continue
                if routed == 0:
                    stop.wait(POLL_S)
        finally:
            self.pool.shutdown(wait=True)
            log.info("notifier %s stopped", self.name)

    def _pass(self) -> int:
        now = self.broker.server_ms()
        self.refresh()
        routed = self.route(now)
        self.flush_digests(now)
        self._submit_due(now)
        if self._passes % HOUSEKEEPING_EVERY == 0:
            self.housekeeping(now)
        self._passes += 1
        return routed

    def _submit_due(self, now: int) -> None:
        """Hand each channel not being sent to a thread, unless its owner holds
        ``tenant_threads`` already (sending or queued): its others wait for a
        later pass, and the pool stays open to the other owners."""
        for cid in [cid for cid, (_owner, future) in self._busy.items() if future.done()]:
            del self._busy[cid]
        held = Counter(owner for owner, _future in self._busy.values())
        routes = self._routes
        start = self._passes % len(routes) if routes else 0
        for route in routes[start:] + routes[:start]:  # no channel of an owner always last
            if route.id in self._busy or held[route.owner] >= self.tenant_threads:
                continue
            self._busy[route.id] = (route.owner, self.pool.submit(self._deliver_logged, route, now))
            held[route.owner] += 1

    def _deliver_logged(self, route: Route, now: int) -> int:
        try:
            return self.deliver(route, now)
        except Exception:
            log.exception("delivering to channel %s failed", route.id)
            return 0


def tenant_threads_for(threads: int, tenant_threads: int | None) -> int:
    """Threads one owner may hold: as given (at most the pool), else a quarter of
    the pool, at least one."""
    if tenant_threads is None:
        return max(1, threads // 4)
    return max(1, min(tenant_threads, threads))
