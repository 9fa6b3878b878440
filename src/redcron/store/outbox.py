"""What the notifier keeps in Redis: the events it reads and, per channel, its
outbox, dead-letter digest and delivery log.  The events are each shard's
events stream, read through the consumer group ``NOTIFY_GROUP``; per channel,
the deliveries still to send are the ``outbox`` ZSET + ``outmsg`` HASH, the
dead-letter digest being gathered ``digest`` and the delivery log ``dlog``.

The order that makes delivery at-least-once: an event is written to every
channel's outbox (or digest) first, and acknowledged (``XACK``) only after;
a delivery leaves the outbox only once its outcome is recorded.  A notifier
killed anywhere re-reads an unacknowledged event (``XAUTOCLAIM``) and resends
a claimed delivery whose claim ran out: a message arrives once or twice,
never not at all.  Every key of one channel carries the channel's hash tag,
so each step is one script (``lua/notify_*.lua``) on one slot, on a cluster too.
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
    from redcron.engine.core import Core

log = logging.getLogger(__name__)

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

    def __init__(self, broker: Core) -> None:
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

    def _run(self, name: str, channel_id: str, args: list[Any]) -> Any:
        """``lua/<name>.lua`` on the channel's keys (its prefix as ``KEYS[1]``)."""
        return self.broker.scripts.run(name, [self.keys.channel_prefix(channel_id)], args)

    def enqueue(
        self, channel_id: str, delivery_id: str, message: Mapping[str, Any], now: int
    ) -> bool:
        """Record a delivery to send (idempotent: an event routed twice after a
        crash is one delivery).  False when the channel is gone (removed while
        the event was routed): nothing is written, so no key outlives it."""
        body = json.dumps({"message": message, "attempts": 0, "created": now})
        return bool(self._run("notify_enqueue", channel_id, [delivery_id, body, now]))

    def digest_add(
        self, channel_id: str, tenant: str, job: str, error: Mapping[str, Any], now: int
    ) -> int:
        """Count one dead letter in the channel's digest, keeping the first errors;
        returns the digest's count (0: the channel is gone)."""
        args = [f"j:{tenant}|{job}", json.dumps(dict(error)), now, DIGEST_JOBS, DIGEST_ERRORS,
                f"j:{DIGEST_OTHER}|"]  # fmt: skip
        return int(self._run("notify_digest_add", channel_id, args))

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
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.digest(channel_id))
        pipe.hget(self.keys.channel(channel_id), "last_digest")
        raw, last = pipe.execute()
        if not raw or now - int(_s(last) if last else 0) < every_ms:
            return None
        fields = {_s(k): _s(v) for k, v in raw.items()}
        delivery_id, message = build(fields, now)
        body = json.dumps({"message": message, "attempts": 0, "created": now})
        args = [now, every_ms, fields.get("count", ""), delivery_id, body]
        return delivery_id if self._run("notify_flush", channel_id, args) else None

    def claim(
        self, channel_id: str, now: int, lease_ms: int, limit: int = CLAIM_BATCH
    ) -> list[Claimed]:
        """Take up to ``limit`` due deliveries to send: each is pushed ``lease_ms``
        out, so no other notifier sends it meanwhile, and a notifier that dies
        sending it leaves it due again then."""
        got = self._run("notify_claim", channel_id, [now, lease_ms, limit])
        return [Claimed(_s(got[i]), json.loads(_s(got[i + 1]))) for i in range(0, len(got), 2)]

    def record(
        self,
        channel_id: str,
        claimed: Claimed,
        outcome: str,
        log_fields: Mapping[str, Any],
        retry_at: int | None = None,
    ) -> bool:
        """The outcome of one attempt, durably, in one step: ``retry_at`` set puts
        the delivery back due then (with its attempt count); otherwise it leaves
        the outbox (delivered, or given up past the retention).  Either way one
        line goes to the channel's delivery log.  False: the channel is gone
        (removed while this was sent), and nothing was written."""
        body = ""
        if retry_at is not None:
            again = dict(claimed.message)
            again["attempts"] = int(again.get("attempts", 0)) + 1
            body = json.dumps(again)
        pairs: list[Any] = []
        for k, v in {**log_fields, "outcome": outcome}.items():
            pairs += [k, str(v)]
        args = [claimed.id, "" if retry_at is None else retry_at, body, *pairs]
        return bool(self._run("notify_record", channel_id, args))
