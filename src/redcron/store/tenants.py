"""Tenant settings in Redis: read and change them, unpark a tenant
(``tenant_unpark.lua``), list tenants with their live dispatch numbers.

Settings live in the tenant hash ``keys.tenant(shard, tenant)`` next to the
dispatch state the lease script owns, so only the settings fields are ever
written or deleted.  The model (fields, parsing, validation) is
:mod:`redcron.model.tenants`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from redcron.engine.inspect import Inspection
from redcron.engine.partial import read_shards
from redcron.errors import ValidationError
from redcron.keys import MINUTE_DISPATCHED, PRIORITIES, shard_of
from redcron.model import TenantStatus, validation
from redcron.model.tenants import SETTINGS_FIELDS, TenantSettings, parse_rate
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core

#: dispatch share is summed over the current and the previous server minute
SHARE_WINDOW_MINUTES = 2
#: the field of a ``minute:<minute>`` hash holding the minute's dispatch total
TOTAL_FIELD = MINUTE_DISPATCHED + "*"

#: ``list`` is a TenantStore method: annotations in the class use this alias
Statuses = list[TenantStatus]


class TenantStore:
    """Read and change tenant settings; list tenants with live dispatch numbers."""

    def __init__(self, broker: Core) -> None:
        self.broker = broker
        self.keys = broker.keys

    def shard(self, tenant: str) -> int:
        return shard_of(tenant, self.broker.shards)

    def get(self, tenant: str) -> TenantSettings:
        """The tenant's settings (defaults for anything never set)."""
        validation.name("tenant", tenant)
        values = self.broker.client.hmget(
            self.keys.tenant(self.shard(tenant), tenant), list(SETTINGS_FIELDS)
        )
        return TenantSettings.from_hash(
            {f: v for f, v in zip(SETTINGS_FIELDS, values, strict=True) if v is not None}
        )

    def set(self, tenant: str, **changes: Any) -> TenantSettings:
        """Change some settings; returns the resulting settings.

        Only the given fields are written (HSET), so concurrent changes of
        other fields, and the lease script's state in the same hash, survive.
        ``rate`` may be given as text (``"20/s"``).
        """
        validation.name("tenant", tenant)
        unknown = sorted(set(changes) - set(SETTINGS_FIELDS))
        if unknown:
            raise ValidationError(
                unknown[0], f"unknown tenant setting; settings are {', '.join(SETTINGS_FIELDS)}"
            )
        if isinstance(changes.get("rate"), str):
            changes["rate"] = parse_rate(changes["rate"])
        merged = dataclasses.replace(self.get(tenant), **changes).validate()
        shard = self.shard(tenant)
        if changes:
            pipe = self.broker.client.pipeline(transaction=True)
            pipe.hset(
                self.keys.tenant(shard, tenant),
                mapping={f: v for f, v in merged.to_hash().items() if f in changes},
            )
            pipe.zadd(self.keys.tenants(shard), {tenant: 0})
            pipe.execute()
            # a raised cap or a faster rate applies now, not when a lease ends
            self.unpark(shard, tenant)
        return merged

    def reset(self, tenant: str) -> TenantSettings:
        """Remove every settings field (back to defaults); dispatch state stays."""
        validation.name("tenant", tenant)
        shard = self.shard(tenant)
        self.broker.client.hdel(self.keys.tenant(shard, tenant), *SETTINGS_FIELDS)
        self.unpark(shard, tenant)  # no cap, no rate: nothing to wait for
        return TenantSettings()

    def unpark(self, shard: int, tenant: str) -> bool:
        """Give a tenant parked at its cap or rate limit its rings back (its limits
        changed, ``tenant_unpark.lua``); the next lease re-checks them.  True when
        it was parked."""
        return bool(self.broker._run("tenant_unpark", shard, [tenant]))

    def show(self, tenant: str) -> TenantStatus:
        """One tenant's settings with its live numbers."""
        validation.name("tenant", tenant)
        (row,) = self.rows([tenant])
        return row

    def list(self) -> Statuses:
        """Every known tenant of every shard, sorted by name (the CLI's table; the
        dashboard reads a page at a time with :meth:`rows`)."""
        client = self.broker.client
        tenants = [
            _s(t)
            for shard in range(self.broker.shards)
            for t in client.zrange(self.keys.tenants(shard), 0, -1)
        ]
        return self.rows(sorted(set(tenants)))

    def rows(self, tenants: Sequence[str]) -> Statuses:
        """The statuses of ``tenants``, in that order: a few round trips per shard
        for the lot, reading nothing of other tenants."""
        dispatched, total = self._dispatched(tenants)
        by_shard: dict[int, list[str]] = {}
        for t in tenants:
            by_shard.setdefault(self.shard(t), []).append(t)
        found = {
            row.tenant: row
            for shard, names in by_shard.items()
            for row in self._shard_rows(shard, names)
        }
        return [_with_share(found[t], dispatched, total) for t in tenants]

    # -- internals --------------------------------------------------------------

    def _shard_rows(self, shard: int, tenants: Sequence[str]) -> Statuses:
        if not tenants:
            return []
        client = self.broker.client
        queues = sorted(_s(q) for q in client.smembers(self.keys.queues(shard)))
        streams = [self.keys.q(shard, q, t, k) for t in tenants for q in queues for k in PRIORITIES]
        ready = iter(Inspection(self.broker).ready_counts(streams))
        pipe = client.pipeline(transaction=False)
        for t in tenants:
            pipe.hmget(self.keys.tenant(shard, t), list(SETTINGS_FIELDS))
            pipe.zcard(self.keys.leases(shard, t))
        res = iter(pipe.execute())
        rows: Statuses = []
        for t in tenants:
            raw = next(res)
            settings = TenantSettings.from_hash(
                {f: v for f, v in zip(SETTINGS_FIELDS, raw, strict=True) if v is not None}
            )
            in_flight = int(next(res))
            queued = sum(next(ready) for _q in queues for _k in PRIORITIES)
            rows.append(TenantStatus(t, shard, settings, in_flight, queued))
        return rows

    def _dispatched(self, tenants: Sequence[str]) -> tuple[dict[str, int], int]:
        """Tasks leased by each of ``tenants`` in the current and previous server
        minute, and the total of all tenants.

        The lease script counts them in ``minute:<minute>`` hashes, fields
        ``dispatched:<tenant>``, with the minute's total in ``dispatched:*``;
        minutes use server time so every client agrees on the window.
        """
        minute = self.broker.server_ms() // 60_000
        fields = [*(MINUTE_DISPATCHED + t for t in tenants), TOTAL_FIELD]
        minutes = range(minute - SHARE_WINDOW_MINUTES + 1, minute + 1)

        def queue(pipe: Any, shard: int) -> None:
            for m in minutes:
                pipe.hmget(self.keys.minute(shard, m), fields)

        # every shard's per-minute figures, on its own master: under
        # partial_reads a shard whose master is down is left out (and named)
        read = read_shards(self.broker, range(self.broker.shards), queue, "tenant status")
        counts: dict[str, int] = {}
        total = 0
        for got in (row for rows in read.values() for row in rows):
            for t, v in zip(tenants, got, strict=False):
                n = _count(v)
                if n:
                    counts[t] = counts.get(t, 0) + n
            total += _count(got[-1])
        return counts, total


def _count(value: Any) -> int:
    """A ``dispatched:`` field as a count; a field that is no number (not ours to fix) is 0."""
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


def _with_share(row: TenantStatus, dispatched: Mapping[str, int], total: int) -> TenantStatus:
    n = dispatched.get(row.tenant, 0)
    return dataclasses.replace(
        row, dispatched_last_minute=n, share_last_minute=n / total if total > 0 else 0.0
    )
