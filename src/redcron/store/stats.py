"""How attempts, runs and scheduled fires went, as the scripts recorded them.

The scripts count as work ends (``lua/lib/outcomes.lua``, ``lua/lib/lag.lua``):
lifetime per-shard ``counters`` (``attempts:``, ``runs:``, ``lag:`` fields) that ``/metrics``
reads, and per-minute hashes (``minute:<minute>``, fields ``attempts:`` and ``lag:``,
kept 2 h) that the dashboard reads for its last hour.  Reading costs one pipelined round
trip per shard read (one shard for a tenant, every shard for all tenants), of
one command per minute of the window: the work grows with the tenants active
in those minutes, never with the tasks run or the fires made.  No SCAN.

The pure parts (minute arithmetic, quantiles from buckets, hash field parsing)
take their inputs as arguments and are unit-tested without Redis.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from redcron.engine.partial import read_shards
from redcron.errors import ValidationError
from redcron.keys import (
    ACTIVITY_TTL_S,
    LAG_BUCKETS_S,
    MINUTE_ATTEMPTS,
    MINUTE_LAG,
    duration_bucket_labels,
    lag_bucket_labels,
    shard_of,
)
from redcron.model import LagSummary, MinuteActivity
from redcron.model import validation as check
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core

MINUTE_MS = 60_000
#: the longest window the per-minute hashes can answer (they expire after this)
MAX_MINUTES = ACTIVITY_TTL_S // 60 - 5
#: the bucket names in order, ``+Inf`` last (hash fields and Prometheus ``le``)
LABELS: tuple[str, ...] = lag_bucket_labels()
#: the bucket upper bounds in seconds, ``inf`` last (aligned with LABELS)
BOUNDS: tuple[float, ...] = (*(float(b) for b in LAG_BUCKETS_S), math.inf)
#: the duration histograms' bucket names in order, ``+Inf`` last (``lua/lib/durations.lua``)
DURATION_LABELS: tuple[str, ...] = duration_bucket_labels()
#: how an attempt outcome counts in the per-minute activity
SUCCEEDED, FAILED = "succeeded", "failed"
#: the "tenant" of the per-minute fields summed over tenants (no tenant name is ``*``)
ALL_TENANTS = "*"


@dataclass(frozen=True, slots=True)
class LagHistogram:
    """The lifetime trigger-lag histogram (``/metrics``), summed over shards.

    ``counts`` are per bucket (not cumulative), aligned with :data:`LABELS`."""

    counts: tuple[int, ...]
    count: int
    sum_s: float

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, fires at most that late)`` per bucket, as Prometheus wants them."""
        out: list[tuple[str, int]] = []
        total = 0
        for label, n in zip(LABELS, self.counts, strict=True):
            total += n
            out.append((label, total))
        return out


@dataclass(frozen=True, slots=True)
class DurationHistogram:
    """How long one tenant's attempts of one task name (or runs of one job) took,
    lifetime (``durations:<tenant>``, ``lua/lib/durations.lua``).

    ``counts`` are per bucket (not cumulative), aligned with :data:`DURATION_LABELS`."""

    counts: tuple[int, ...]
    sum_s: float

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, how many took at most that long)`` per bucket, for Prometheus."""
        out: list[tuple[str, int]] = []
        total = 0
        for label, n in zip(DURATION_LABELS, self.counts, strict=True):
            total += n
            out.append((label, total))
        return out


# -- pure helpers --------------------------------------------------------------


def minute_of(ms: int) -> int:
    """The minute number (``ms // 60000``) the scripts file a time under."""
    return ms // MINUTE_MS


def window(now_ms: int, minutes: int) -> range:
    """The ``minutes`` minute numbers ending with the one ``now_ms`` falls in,
    oldest first (the current minute, partly gone, is the last)."""
    last = minute_of(now_ms)
    return range(last - minutes + 1, last + 1)


def check_minutes(minutes: int) -> int:
    """A window length the per-minute hashes can answer: 1..MAX_MINUTES."""
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_MINUTES:
        raise ValidationError(
            "minutes",
            f"{minutes!r} must be a whole number of minutes from 1 to {MAX_MINUTES} "
            "(the per-minute figures expire after that)",
        )
    return minutes


def split_field(field: str | bytes) -> tuple[str, str]:
    """``"<tenant>|<what>"`` -> ``(tenant, what)`` (tenant names hold no ``|``)."""
    tenant, _, what = _s(field).rpartition("|")
    return tenant, what


def per_tenant(fields: Mapping[Any, Any]) -> dict[tuple[str, str], int]:
    """A ``<tenant>|<what> -> n`` hash as ``{(tenant, what): n}``."""
    return {split_field(k): int(v) for k, v in fields.items()}


def under(prefix: str, fields: Mapping[Any, Any]) -> dict[str, Any]:
    """The fields of a ``minute:<minute>`` hash named ``<prefix>...``, without the
    prefix (``lag:acme|0.5`` -> ``acme|0.5``): the hash holds every figure of
    the minute."""
    named = ((_s(k), v) for k, v in fields.items())
    return {name[len(prefix) :]: v for name, v in named if name.startswith(prefix)}


def add_counts(into: dict[tuple[str, str], int], more: Mapping[tuple[str, str], int]) -> None:
    """Sum ``more`` into ``into`` (figures of several shards)."""
    for k, n in more.items():
        into[k] = into.get(k, 0) + n


def lag_histogram(hashes: Iterable[Mapping[Any, Any]]) -> LagHistogram:
    """The lifetime ``lag`` hashes of the shards, summed."""
    counts = [0] * len(LABELS)
    count = sum_ms = 0
    for fields in hashes:
        got = {_s(k): int(v) for k, v in fields.items()}
        for i, label in enumerate(LABELS):
            counts[i] += got.get(label, 0)
        count += got.get("count", 0)
        sum_ms += got.get("sum_ms", 0)
    return LagHistogram(tuple(counts), count, sum_ms / 1000)


def durations_of(fields: Mapping[Any, Any], prefix: str) -> dict[str, DurationHistogram]:
    """The fields of a tenant's duration hash under ``prefix`` (``task:`` or
    ``job:``: ``<prefix><name>|<le>``, ``<prefix><name>|sum_ms``,
    ``<prefix>#names``) as one histogram per name (the ``(other)`` name included)."""
    index = {label: i for i, label in enumerate(DURATION_LABELS)}
    counts: dict[str, list[int]] = {}
    sums: dict[str, int] = {}
    for raw, value in fields.items():
        text = _s(raw)
        if not text.startswith(prefix):
            continue
        name, sep, what = text[len(prefix) :].rpartition("|")
        if not sep:
            continue  # #names
        if what == "sum_ms":
            sums[name] = int(value)
        elif what in index:
            counts.setdefault(name, [0] * len(DURATION_LABELS))[index[what]] += int(value)
    return {
        name: DurationHistogram(tuple(counts.get(name, [0] * len(DURATION_LABELS))), ms / 1000)
        for name, ms in sorted(sums.items())
    }


def quantile_bound(counts: Sequence[int], q: float) -> float | None:
    """The upper bound (s) of the bucket holding the ``q`` quantile (nearest
    rank: the first bucket whose cumulative count reaches ``ceil(q * n)``);
    ``inf`` for the last bucket, None when the buckets are empty."""
    total = sum(counts)
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for bound, n in zip(BOUNDS, counts, strict=True):
        seen += n
        if seen >= rank:
            return bound
    return BOUNDS[-1]  # not reached: the last bucket brings seen to total


def summarize_lag(counts: Sequence[int], minutes: int) -> LagSummary:
    """A window's lag buckets (per bucket, aligned with LABELS) as a summary:
    quantiles as bucket bounds, a bound past the last finite one read as that."""

    def finite(bound: float | None) -> float | None:
        return None if bound is None else min(bound, BOUNDS[-2])

    slowest = next((b for b, n in zip(reversed(BOUNDS), reversed(counts), strict=True) if n), None)
    return LagSummary(
        minutes=minutes,
        fires=sum(counts),
        p50_s=finite(quantile_bound(counts, 0.5)),
        p99_s=finite(quantile_bound(counts, 0.99)),
        max_bucket_s=finite(slowest),
        beyond_last_bucket=counts[-1],
    )


def activity_of(
    minutes: range, tenant: str | None, hashes: Sequence[Mapping[Any, Any]]
) -> list[MinuteActivity]:
    """One record per minute of ``minutes`` from the ``attempts:`` fields of the
    ``minute:<minute>`` hashes read for them, without the prefix (shards' hashes
    summed: ``hashes`` holds, per shard, one per minute in order); ``tenant``
    None sums every tenant."""
    succeeded = [0] * len(minutes)
    failed = [0] * len(minutes)
    for i, fields in enumerate(hashes):
        slot = i % len(minutes)
        for (t, what), n in per_tenant(fields).items():
            if tenant is not None and t != tenant:
                continue
            if what == SUCCEEDED:
                succeeded[slot] += n
            elif what == FAILED:
                failed[slot] += n
    return [
        MinuteActivity(datetime.fromtimestamp(m * 60, tz=UTC), s, f)
        for m, s, f in zip(minutes, succeeded, failed, strict=True)
    ]


def lag_counts_by_tenant(hashes: Iterable[Mapping[Any, Any]]) -> dict[str, list[int]]:
    """Per-bucket fires of each tenant, summed over ``minute:<minute>`` hashes'
    ``lag:`` fields (prefix stripped: :func:`under`)."""
    index = {label: i for i, label in enumerate(LABELS)}
    out: dict[str, list[int]] = {}
    for fields in hashes:
        for (t, le), n in per_tenant(fields).items():
            if le in index:
                out.setdefault(t, [0] * len(LABELS))[index[le]] += n
    return out


def lag_counts(tenant: str | None, hashes: Iterable[Mapping[Any, Any]]) -> list[int]:
    """Per-bucket fires summed over ``minute:<minute>`` hashes' ``lag:`` fields
    (prefix stripped); ``tenant`` None sums every tenant."""
    counts = [0] * len(LABELS)
    for t, row in lag_counts_by_tenant(hashes).items():
        if tenant is None or t == tenant:
            counts = [a + b for a, b in zip(counts, row, strict=True)]
    return counts


# -- reading -------------------------------------------------------------------


def _read_minutes(
    broker: Core, prefix: str, tenant: str | None, minutes: range, fields: Sequence[str]
) -> list[Mapping[Any, Any]]:
    """The ``minute:<minute>`` hashes' fields under ``prefix`` (``attempts:`` or
    ``lag:``) for ``minutes``: only ``<tenant>|<field>`` of the tenant's shard,
    or (tenant None) every shard's ``*|<field>``, the sum over tenants the
    scripts keep beside.  One pipelined round trip per shard; hashes in shard
    then minute order, without the prefix, ``*`` standing for every tenant."""
    keys = broker.keys
    shards = range(broker.shards) if tenant is None else [shard_of(tenant, broker.shards)]
    who = ALL_TENANTS if tenant is None else tenant
    names = [f"{who}|{f}" for f in fields]
    out: list[Mapping[Any, Any]] = []

    def queue(pipe: Any, shard: int) -> None:
        for m in minutes:
            pipe.hmget(keys.minute(shard, m), [prefix + n for n in names])

    # under partial_reads a shard whose master is down is left out (and named)
    for rows in read_shards(broker, list(shards), queue, "figures").values():
        out += [{f: v for f, v in zip(names, row, strict=True) if v is not None} for row in rows]
    return out


def activity(
    broker: Core, tenant: str | None, minutes: int = 60, now_ms: int | None = None
) -> list[MinuteActivity]:
    """Attempts succeeded and failed per minute over the last ``minutes``
    minutes (the current one last), oldest first, zero-filled; one tenant's,
    or every tenant's (``tenant`` None).  ``now_ms``: the server clock unless
    given (tests)."""
    minutes = check_minutes(minutes)
    if tenant is not None:
        check.name("tenant", tenant)
    now = broker.server_ms() if now_ms is None else now_ms
    span = window(now, minutes)
    return activity_of(
        span, tenant, _read_minutes(broker, MINUTE_ATTEMPTS, tenant, span, (SUCCEEDED, FAILED))
    )


def trigger_lag(
    broker: Core, tenant: str | None, minutes: int = 60, now_ms: int | None = None
) -> LagSummary:
    """Trigger lag of the scheduled fires of the last ``minutes`` minutes: one
    tenant's, or every tenant's (``tenant`` None).  ``now_ms``: the server clock
    unless given (tests)."""
    minutes = check_minutes(minutes)
    if tenant is not None:
        check.name("tenant", tenant)
    now = broker.server_ms() if now_ms is None else now_ms
    hashes = _read_minutes(broker, MINUTE_LAG, tenant, window(now, minutes), LABELS)
    return summarize_lag(lag_counts(tenant, hashes), minutes)


def trigger_lag_by_tenant(
    broker: Core, minutes: int = 60, now_ms: int | None = None
) -> dict[str, LagSummary]:
    """:func:`trigger_lag` of every tenant with a scheduled fire in the last
    ``minutes`` minutes, from one read of every shard (a table of tenants costs
    one round trip per shard, not one per tenant)."""
    minutes = check_minutes(minutes)
    now = broker.server_ms() if now_ms is None else now_ms
    span = window(now, minutes)

    def queue(pipe: Any, shard: int) -> None:
        for m in span:
            pipe.hgetall(broker.keys.minute(shard, m))

    read = read_shards(broker, range(broker.shards), queue, "figures")
    rows = (fields for replies in read.values() for fields in replies)
    counts = lag_counts_by_tenant(under(MINUTE_LAG, fields) for fields in rows)
    counts.pop(ALL_TENANTS, None)  # the sum the scripts keep beside the tenants
    return {t: summarize_lag(c, minutes) for t, c in sorted(counts.items())}


def trigger_lag_of(
    broker: Core, tenants: Sequence[str], minutes: int = 60, now_ms: int | None = None
) -> dict[str, LagSummary]:
    """:func:`trigger_lag` of each of ``tenants`` (a page of a table) that had a
    scheduled fire in the last ``minutes`` minutes: only their fields of the
    per-minute hashes are read, one pipelined round trip per shard."""
    minutes = check_minutes(minutes)
    if not tenants:
        return {}
    now = broker.server_ms() if now_ms is None else now_ms
    by_shard: dict[int, list[str]] = {}
    for t in tenants:
        by_shard.setdefault(shard_of(t, broker.shards), []).append(t)
    hashes: list[Mapping[Any, Any]] = []
    for shard, names in by_shard.items():
        fields = [f"{t}|{label}" for t in names for label in LABELS]
        named = [MINUTE_LAG + f for f in fields]
        keys = [broker.keys.minute(shard, m) for m in window(now, minutes)]
        # a minute without a figure has no hash: ask only those that exist
        pipe = broker.client.pipeline(transaction=False)
        for key in keys:
            pipe.exists(key)
        keys = [k for k, there in zip(keys, pipe.execute(), strict=True) if there]
        pipe = broker.client.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(key, named)
        for got in pipe.execute() if keys else []:
            hashes.append({f: v for f, v in zip(fields, got, strict=True) if v is not None})
    return {t: summarize_lag(c, minutes) for t, c in sorted(lag_counts_by_tenant(hashes).items())}
