"""The opt-in attempt audit that ``redcron chaos`` checks (``Worker(audit=True)``).
One stream entry when an attempt starts executing and one when its execution
ends, written by the worker that runs it, read back by the chaos checker.

The entry id is assigned by the server (``XADD … *``), so an entry's time is
the Redis clock, the clock leases and attempt histories are stamped with
(invariant 8).  A start is written *before* the task body runs and an end
*after* it returned, so the interval between them contains the execution.

Also here: the bulk reads the checker needs (every instance hash of a shard,
many at once), which nothing in the serving path wants.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redcron.engine.connection import scan_keys
from redcron.engine.core import PAYLOADS, fields_of
from redcron.keys import COUNTER_ATTEMPTS, shard_of_id
from redcron.model import TaskRecord
from redcron.serde import text as _s
from redcron.store.metrics import ATTEMPT_OUTCOMES

if TYPE_CHECKING:
    from redcron.engine.core import Core

#: entries kept per shard (``MAXLEN ~``): far more than a chaos run writes
AUDIT_MAXLEN = 2_000_000
#: keys or entries read per round trip
BATCH = 500


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audit record: attempt ``attempt`` (lease epoch ``epoch``) of instance
    ``iid`` started or ended executing on worker ``worker`` (process ``pid``) at
    ``at_ms`` (server clock).  ``outcome`` is set on an end (``succeeded``,
    ``failed``, ``timed_out``, ``cancelled``), empty on a start."""

    at_ms: int
    event: str  # start | end
    iid: str
    epoch: int
    attempt: int
    worker: str
    pid: int
    outcome: str = ""


class AuditLog:
    """Write and read the audit stream of each shard (``Keys.audit``)."""

    def __init__(self, broker: Core) -> None:
        self.broker = broker
        self.keys = broker.keys

    def record(
        self,
        shard: int,
        event: str,
        iid: str,
        epoch: int | str,
        attempt: int,
        worker: str,
        pid: int,
        outcome: str = "",
        token: str = "",
    ) -> None:
        """Append one entry (one round trip; raises on a Redis error: the caller retries).

        ``token`` names this event across the caller's retries: an XADD whose reply
        was lost with the connection may have landed, and its retry lands again;
        :meth:`read` yields one entry per token."""
        fields: dict[Any, Any] = {"ev": event, "i": iid, "e": epoch, "a": attempt, "w": worker,
                                  "p": pid}  # fmt: skip
        if token:
            fields["n"] = token
        if outcome:
            fields["o"] = outcome
        self.broker.client.xadd(
            self.keys.audit(shard), fields, maxlen=AUDIT_MAXLEN, approximate=True
        )

    def read(self, shard: int) -> Iterator[AuditEntry]:
        """Every entry of the shard's audit stream, oldest first; of the copies a
        retried write left (one token), the first."""
        key = self.keys.audit(shard)
        after = "-"
        seen: set[str] = set()
        while True:
            page: Any = self.broker.client.xrange(key, min=after, count=BATCH)
            if not page:
                return
            for eid, raw in page:
                f = fields_of(raw)
                token = str(f.get("n", ""))
                if token:
                    if token in seen:
                        continue
                    seen.add(token)
                yield AuditEntry(
                    at_ms=int(_s(eid).partition("-")[0]),
                    event=str(f.get("ev", "")),
                    iid=str(f.get("i", "")),
                    epoch=int(f.get("e") or 0),
                    attempt=int(f.get("a") or 0),
                    worker=str(f.get("w", "")),
                    pid=int(f.get("p") or 0),
                    outcome=str(f.get("o", "")),
                )
            if len(page) < BATCH:
                return
            after = "(" + _s(page[-1][0])

    def instance_ids(self, shard: int) -> Iterator[str]:
        """The id of every instance hash on the shard (SCAN: for a checker, not a hot path)."""
        head = self.keys.ti(shard, "")
        for keys in scan_keys(self.broker.client, self.keys.shard(shard), "ti"):
            yield from (key[len(head) :] for key in keys)

    def _read(
        self, shard: int, iids: Sequence[str], cmd: str, *args: Any
    ) -> Iterator[tuple[str, Any]]:
        """``(iid, reply)`` of command ``cmd`` on each instance hash of ``iids``
        (pipelined, ``BATCH`` per round trip)."""
        for start in range(0, len(iids), BATCH):
            chunk = iids[start : start + BATCH]
            pipe = self.broker.client.pipeline(transaction=False)
            for iid in chunk:
                getattr(pipe, cmd)(self.keys.ti(shard, iid), *args)
            yield from zip(chunk, pipe.execute(), strict=True)

    def task_infos(self, shard: int, iids: Sequence[str]) -> dict[str, TaskRecord]:
        """The records of ``iids`` that exist."""
        return {
            iid: TaskRecord.from_fields(fields_of(raw, keep=PAYLOADS), shard, iid)
            for iid, raw in self._read(shard, iids, "hgetall")
            if raw
        }

    def states(self, iids: Iterable[str]) -> dict[str, str]:
        """``iid -> state`` for the instances of ``iids`` (on any shard) that exist."""
        by_shard: dict[int, list[str]] = {}
        for iid in iids:
            by_shard.setdefault(shard_of_id(iid), []).append(iid)
        return {
            iid: _s(state)
            for shard, group in by_shard.items()
            for iid, state in self._read(shard, group, "hget", "state")
            if state is not None
        }

    def attempts_ended(self) -> int:
        """Attempts ended so far on every shard (the ``attempts:*|<outcome>``
        counters, every tenant's sum, summed)."""
        fields = [f"{COUNTER_ATTEMPTS}*|{o}" for o in ATTEMPT_OUTCOMES]
        pipe = self.broker.client.pipeline(transaction=False)
        for shard in range(self.broker.shards):
            pipe.hmget(self.keys.counters(shard), fields)
        return sum(int(v) for vals in pipe.execute() for v in vals if v is not None)

    def attempt_counts(self, shard: int) -> dict[tuple[str, str], int]:
        """The shard's ``attempts:<tenant>|<outcome>`` counters: (tenant, outcome)
        -> attempts ended so (the sums over tenants, ``*``, left out)."""
        raw = self.broker.client.hscan_iter(
            self.keys.counters(shard), match=COUNTER_ATTEMPTS + "*", count=1000
        )
        out: dict[tuple[str, str], int] = {}
        for k, v in raw:
            tenant, _, outcome = _s(k)[len(COUNTER_ATTEMPTS) :].rpartition("|")
            if tenant != "*":
                out[(tenant, outcome)] = int(v)
        return out
