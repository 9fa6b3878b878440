"""Shard ownership: which shards one beat holds, through fenced leases.

Every beat registers in a live-beats ZSET and holds at most its fair share
``ceil(S / live beats)`` of the shards through ``beat_own.lua`` (renewed every
``shard_ttl / 3``); shards above its share are released so a newcomer gets
some.  The fencing epoch of each shard goes to ``fire.lua``, which refuses a
beat that lost its lease (STALE), so two beats never both fire a shard.

On a Redis Cluster a master that is down fails only the calls of its own
shards (and of the live-beats registry, if it holds that key): a round goes on
with the shards that answer and the beats last counted.
"""

from __future__ import annotations

import logging
import math
import zlib

from redcron.engine import TRANSIENT, Engine, ShardClaim
from redcron.keys import Keys

# one logger for the whole beat, so its records keep the name operators filter on
log = logging.getLogger("redcron.beat.beat")


def beats_key(prefix: str) -> str:
    """The live-beats ZSET (beat id -> registration expiry, ms, server clock)."""
    return Keys(prefix).beats()


class Ownership:
    """The shards one beat holds, with their fencing epochs, and when it next
    renews them.

    Args:
        beat_id: the beat's id (its name in the registry and on its leases).
        ttl_ms: how long a shard lease lives unrenewed.
    """

    def __init__(self, beat_id: str, ttl_ms: int) -> None:
        self.beat_id = beat_id
        self.ttl_ms = ttl_ms
        self.owned: dict[int, str] = {}  # shard -> fencing epoch
        self.next_round = 0  # server ms of the next ownership round
        self.live = 0  # live beats at the last round
        self._answered = True  # Redis answered a call of the current round

    def round(self, engine: Engine, now: int) -> None:
        """Register, and when a round is due (or the live beats changed, or this
        beat holds more than its share): renew, release above the fair share of
        the deployment's shards, acquire up to it."""
        failure: Exception | None = None
        try:
            live = max(1, engine.beat_register(self.beat_id, now, self.ttl_ms))
        except TRANSIENT as exc:
            # the registry's cluster master is down: go on with the beats last
            # counted (nothing is known better), renewing the shards that answer
            if not self.live:
                raise
            live, failure = self.live, exc
        self._answered = failure is None
        total = engine.shards
        share = math.ceil(total / live)
        if now < self.next_round and live == self.live and len(self.owned) <= share:
            return
        self.next_round, self.live = now + self.ttl_ms // 3, live
        for claim in self._own(engine, "renew", sorted(self.owned)):
            if claim.owned:
                self.owned[claim.shard] = claim.epoch
            else:
                log.warning(
                    "beat %s lost shard %d (lease expired or taken over)", self.beat_id, claim.shard
                )
                del self.owned[claim.shard]
        # start where this beat's id points, so beats starting together spread out
        start = zlib.crc32(self.beat_id.encode()) % total
        order = [(start + i) % total for i in range(total)]
        mine = [s for s in order if s in self.owned]
        if len(mine) > share:
            extra = mine[share:]
            self._own(engine, "release", extra)
            for shard in extra:
                del self.owned[shard]
            log.info("beat %s released shards %s (fair share %d)", self.beat_id, extra, share)
        free = [s for s in order if s not in self.owned]
        while free and len(self.owned) < share:
            chunk, free = free[: share - len(self.owned)], free[share - len(self.owned) :]
            for claim in self._own(engine, "acquire", chunk):
                if claim.owned:
                    self.owned[claim.shard] = claim.epoch
                    log.info(
                        "beat %s owns shard %d (epoch %s)", self.beat_id, claim.shard, claim.epoch
                    )
        if failure is not None and not self._answered:
            raise failure  # nothing answered: Redis is down, not one master

    def drop(self, shard: int) -> None:
        """Forget a shard whose fires were refused as stale; the next tick runs a
        round (another beat holds it now, or it is free again)."""
        if self.owned.pop(shard, None) is not None:
            log.warning(
                "beat %s: shard %d is fenced off (stale epoch); dropped", self.beat_id, shard
            )
            self.next_round = 0

    def clear(self) -> None:
        """Forget every shard (they were released, or they expire)."""
        self.owned.clear()
        self.live = 0
        self.next_round = 0

    def _own(self, engine: Engine, mode: str, shards: list[int]) -> list[ShardClaim]:
        """Claims for ``shards`` in one round trip; when that fails (on a cluster,
        one master down fails the whole pipeline), one call per shard, leaving
        out the shards that do not answer: a shard not renewed keeps its place
        in :attr:`owned` (fire.lua fences it off if its lease expired meanwhile),
        one not acquired stays free.  Raises when the registry did not answer
        either and no shard does (Redis is down, not one master)."""
        if not shards:
            return []
        try:
            claims = engine.beat_own(shards, self.beat_id, self.ttl_ms, mode)
        except TRANSIENT:
            claims = []
            failure: Exception | None = None
            for shard in shards:
                try:
                    claims += engine.beat_own([shard], self.beat_id, self.ttl_ms, mode)
                except TRANSIENT as exc:
                    failure = exc
            if not claims and not self._answered and failure is not None:
                raise failure from None
        self._answered = self._answered or bool(claims)
        return claims
