"""What the notifier keeps in Redis: the events it reads (each shard's events
stream, through the consumer group ``NOTIFY_GROUP``) and, per channel, the
deliveries still to send (``outbox`` ZSET + ``outmsg`` HASH), the dead-letter
digest being gathered (``digest``) and the delivery log (``dlog``).

The order that makes delivery at-least-once: an event is written to every
channel's outbox (or digest) first, and acknowledged (``XACK``) only after;
a delivery leaves the outbox only once its outcome is recorded.  A notifier
killed anywhere re-reads an unacknowledged event (``XAUTOCLAIM``) and resends
a claimed delivery whose claim ran out: a message arrives once or twice,
never not at all.  Every key of one channel carries the channel's hash tag,
so each step is one ``MULTI`` on one slot.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from redcron.keys import EVENTS_RETENTION_MS, NOTIFY_GROUP
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.broker import Broker

log = logging.getLogger(__name__)

#: lines kept in a channel's delivery log (MAXLEN ~)
DLOG_MAX = 200
#: deliveries claimed per channel per pass
CLAIM_BATCH = 10
#: dead-letter groups (tenant, job) a digest counts one by one; later ones count
#: under DIGEST_OTHER, so a digest stays small however many jobs fail
DIGEST_JOBS = 50
DIGEST_OTHER = "(other)"
#: first errors a digest carries
DIGEST_ERRORS = 5


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """One entry of a shard's events stream (text fields; an entry trimmed away
    while it was pending has none)."""

    shard: int
    id: str
    fields: dict[str, str]


@dataclass(frozen=True, slots=True)
class Claimed:
    """A delivery taken from a channel's outbox to send now."""

    id: str
    message: dict[str, Any]


class Outbox:
    """The notifier's Redis I/O."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.keys = broker.keys
        self.client: Any = broker.client

    # -- the events streams ---------------------------------------------------

    def read(self, shard: int, consumer: str, count: int, claim_idle_ms: int) -> list[FeedEntry]:
        """Events of ``shard`` to route: those another (dead) consumer left
        unacknowledged for ``claim_idle_ms``, this consumer's own unacknowledged
        ones, then new ones."""
        key = self.keys.events(shard)
        try:
            got = self.client.xautoclaim(key, NOTIFY_GROUP, consumer, claim_idle_ms, "0-0", count)
            entries = list(got[1])
            if not entries:
                own = self.client.xreadgroup(NOTIFY_GROUP, consumer, {key: "0"}, count=count)
                entries = list(own[0][1]) if own else []
            if not entries:
                new = self.client.xreadgroup(NOTIFY_GROUP, consumer, {key: ">"}, count=count)
                entries = list(new[0][1]) if new else []
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            return []  # no channel was ever made (ChannelStore.ensure_groups)
        out = []
        for item in entries:
            eid, raw = (item[0], item[1]) if isinstance(item, list | tuple) else (item, None)
            fields = {_s(k): _s(v) for k, v in (raw or {}).items()}
            out.append(FeedEntry(shard, _s(eid), fields))
        return out

    def ack(self, shard: int, ids: list[str]) -> None:
        if ids:
            self.client.xack(self.keys.events(shard), NOTIFY_GROUP, *ids)

    def trim(self, shard: int, now: int) -> None:
        """Drop events older than the retention (EVENTS_RETENTION_MS), read or not."""
        self.client.xtrim(
            self.keys.events(shard), minid=now - EVENTS_RETENTION_MS, approximate=True
        )

    def forget_consumers(self, shard: int, idle_ms: int) -> None:
        """Remove consumers of the group idle for ``idle_ms`` holding nothing (each
        notifier start names a new one), so they do not pile up."""
        try:
            consumers = self.client.xinfo_consumers(self.keys.events(shard), NOTIFY_GROUP)
        except redis.ResponseError:
            return
        for c in consumers:
            if int(c.get("pending", 0)) == 0 and int(c.get("idle", 0)) >= idle_ms:
                self.client.xgroup_delconsumer(
                    self.keys.events(shard), NOTIFY_GROUP, _s(c.get("name"))
                )

    # -- a channel's outbox -----------------------------------------------------

    def enqueue(
        self, channel_id: str, delivery_id: str, message: Mapping[str, Any], now: int
    ) -> bool:
        """Record a delivery to send (idempotent: an event routed twice after a
        crash is one delivery).  False when the channel is gone (removed while
        the event was routed): nothing is written, so no key outlives it."""
        body = json.dumps({"message": message, "attempts": 0, "created": now})
        ckey = self.keys.channel(channel_id)
        for _ in range(5):
            with self.client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(ckey)
                    if not pipe.exists(ckey):
                        return False
                    pipe.multi()
                    pipe.hsetnx(self.keys.outmsg(channel_id), delivery_id, body)
                    pipe.zadd(self.keys.outbox(channel_id), {delivery_id: now}, nx=True)
                    pipe.execute()
                    return True
                except redis.WatchError:
                    continue  # the channel hash changed (a digest's last_digest): again
        # contended five times: write it anyway (at worst keys of a removed channel)
        pipe = self.client.pipeline(transaction=True)
        pipe.hsetnx(self.keys.outmsg(channel_id), delivery_id, body)
        pipe.zadd(self.keys.outbox(channel_id), {delivery_id: now}, nx=True)
        pipe.execute()
        return True

    def digest_add(
        self, channel_id: str, tenant: str, job: str, error: Mapping[str, Any], now: int
    ) -> None:
        """Count one dead letter in the channel's digest, keeping the first errors."""
        key = self.keys.digest(channel_id)
        if not self.client.exists(self.keys.channel(channel_id)):
            return  # removed while the event was routed
        group = f"j:{tenant}|{job}"
        if self.client.hlen(key) > DIGEST_JOBS + DIGEST_ERRORS + 2 and not self.client.hexists(
            key, group
        ):
            group = f"j:{DIGEST_OTHER}|"
        pipe = self.client.pipeline(transaction=True)
        pipe.hincrby(key, "count", 1)
        pipe.hsetnx(key, "first_at", now)
        pipe.hincrby(key, group, 1)
        n = pipe.execute()[0]
        if n <= DIGEST_ERRORS:
            self.client.hset(key, f"e{n}", json.dumps(dict(error)))

    def flush_digest(
        self,
        channel_id: str,
        now: int,
        every_ms: int,
        build: Callable[[dict[str, str], int], tuple[str, dict[str, Any]]],
    ) -> str | None:
        """Turn the channel's digest into one delivery if it holds dead letters and
        the last digest went ``every_ms`` ago or more.  ``build(fields, now)``
        gives the (delivery id, message).  Returns the delivery id, or None."""
        dkey, ckey = self.keys.digest(channel_id), self.keys.channel(channel_id)
        with self.client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(dkey, ckey)
                raw = pipe.hgetall(dkey)
                last = pipe.hget(ckey, "last_digest")
                if not raw or now - int(_s(last) if last else 0) < every_ms:
                    return None
                if not pipe.exists(ckey):
                    return None  # removed meanwhile
                fields = {_s(k): _s(v) for k, v in raw.items()}
                delivery_id, message = build(fields, now)
                body = json.dumps({"message": message, "attempts": 0, "created": now})
                pipe.multi()
                pipe.delete(dkey)
                pipe.hset(ckey, "last_digest", now)
                pipe.hset(self.keys.outmsg(channel_id), delivery_id, body)
                pipe.zadd(self.keys.outbox(channel_id), {delivery_id: now})
                pipe.execute()
            except redis.WatchError:
                return None  # a dead letter came in meanwhile: the next pass flushes
        return delivery_id

    def claim(
        self, channel_id: str, now: int, lease_ms: int, limit: int = CLAIM_BATCH
    ) -> list[Claimed]:
        """Take up to ``limit`` due deliveries to send: each is pushed ``lease_ms``
        out, so no other notifier sends it meanwhile, and a notifier that dies
        sending it leaves it due again then."""
        okey, mkey = self.keys.outbox(channel_id), self.keys.outmsg(channel_id)
        with self.client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(okey)
                ids = [_s(i) for i in pipe.zrangebyscore(okey, "-inf", now, start=0, num=limit)]
                if not ids:
                    return []
                bodies = pipe.hmget(mkey, ids)
                pipe.multi()
                pipe.zadd(okey, {i: now + lease_ms for i in ids}, xx=True)
                stale = [i for i, b in zip(ids, bodies, strict=True) if b is None]
                if stale:
                    pipe.zrem(okey, *stale)  # a body gone (removed by hand): nothing to send
                pipe.execute()
            except redis.WatchError:
                return []  # another notifier claimed meanwhile: next pass
        out = []
        for i, b in zip(ids, bodies, strict=True):
            if b is not None:
                out.append(Claimed(i, json.loads(_s(b))))
        return out

    def record(
        self,
        channel_id: str,
        claimed: Claimed,
        outcome: str,
        log_fields: Mapping[str, Any],
        retry_at: int | None = None,
    ) -> None:
        """The outcome of one attempt, durably, in one step: ``retry_at`` set puts
        the delivery back due then (with its attempt count); otherwise it leaves
        the outbox (delivered, or given up past the retention).  Either way one
        line goes to the channel's delivery log."""
        okey, mkey = self.keys.outbox(channel_id), self.keys.outmsg(channel_id)
        ckey = self.keys.channel(channel_id)
        entry = {k: str(v) for k, v in {**log_fields, "outcome": outcome}.items()}
        for _ in range(5):  # the channel hash changed meanwhile (a digest's last_digest)
            with self.client.pipeline(transaction=True) as pipe:
                try:
                    # a channel removed while this was sent: write nothing (no orphan keys)
                    pipe.watch(ckey)
                    if not pipe.exists(ckey):
                        return
                    pipe.multi()
                    if retry_at is None:
                        pipe.zrem(okey, claimed.id)
                        pipe.hdel(mkey, claimed.id)
                    else:
                        body = dict(claimed.message)
                        body["attempts"] = int(body.get("attempts", 0)) + 1
                        pipe.hset(mkey, claimed.id, json.dumps(body))
                        pipe.zadd(okey, {claimed.id: retry_at}, xx=True)
                    pipe.xadd(self.keys.dlog(channel_id), entry, maxlen=DLOG_MAX, approximate=True)
                    pipe.execute()
                    return
                except redis.WatchError:
                    continue
        # still contended: the claim runs out and the delivery is sent again (at-least-once)
        log.warning("could not record delivery %s of channel %s", claimed.id, channel_id)
