"""Listings the faces page over: tenants, jobs and runs, a page at a time.

Each read costs a few round trips per shard whatever the number of tenants,
jobs and runs: it reads one page (``limit`` + 1 entries) of an index, never a
whole SET or every tenant's hash.  The indexes (``docs/keys.md``):

- ``tenants``: every tenant of a shard, scored 0, read in name order with
  ``ZRANGEBYLEX`` (``job_put``, ``enqueue`` and ``tenants set`` add);
- ``jobidx``: every job as ``<tenant> <name> <job id>``, likewise (``job_put``
  adds, ``job_delete`` removes; also the job's upsert key);
- ``dlqidx``: the tenants whose DLQ may hold entries (``engine/dlq.py``);
- ``runidx`` and ``truns:<tenant>``: run id -> created ms, the newest
  ``RUNIDX_MAX`` / ``TRUNS_MAX`` (run creation adds and trims, retention removes;
  a run that expired with its ``keep_s`` is skipped when read).

A cursor names the last entry shown (a tenant, ``<tenant> <name>``, or a run's
(created ms, id)), so entries added while a client pages neither shift nor
repeat the ones after it.  Several shards merge: each gives its next
``limit`` + 1 entries past the cursor, and the smallest ``limit`` of all are
the page.

A deployment made before these indexes is backfilled once per shard
(:func:`redcron.engine.indexes.ensure_indexes`: the DLQ's pages read
``dlqidx`` too); each Broker checks that once, not per read.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from redcron.engine.core import fields_of
from redcron.engine.indexes import ensure_indexes
from redcron.engine.partial import read_shards
from redcron.keys import (
    JOBIDX_SEP,
    jobidx_parse,
    jobidx_range,
    shard_of,
    shard_of_id,
)
from redcron.model import RunRecord
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core

T = TypeVar("T")

#: run index entries read per request at most, past expired runs and filters:
#: a page may come back short (with a cursor) rather than read on without bound
RUN_SCAN = 1_000
#: job index entries a search reads per request at most
SEARCH_SCAN = 2_000


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing: its items, the cursor of the next page and of the
    previous one (None: none that way)."""

    items: list[T]
    next_cursor: str | None
    prev_cursor: str | None = None
    #: entries before the first item, and in the whole listing (None: not counted)
    offset: int | None = None
    total: int | None = None


def _shards(broker: Core, tenant: str | None) -> list[int]:
    return [shard_of(tenant, broker.shards)] if tenant else list(range(broker.shards))


def _lex_page(
    broker: Core,
    keys: Sequence[tuple[int, str]],
    low: str,
    high: str,
    limit: int,
    backwards: bool = False,
    scope: tuple[str, str] | None = None,
) -> Page[str]:
    """``limit`` members from ``low`` up to ``high`` (ZRANGEBYLEX bounds), merged
    over ``keys`` ((shard, key) pairs; a shard whose master does not answer is
    left out under :func:`~redcron.engine.partial.partial_reads`) in order;
    ``backwards``: the ``limit`` last ones (read from ``high`` down).  Cursors:
    the last member shown (next), the first (prev).
    ``scope``: the bounds of the whole listing, to count the page's offset and
    the total (one more round trip)."""
    by_shard = dict(keys)

    def queue(pipe: Any, shard: int) -> None:
        key = by_shard[shard]
        if backwards:
            pipe.zrevrangebylex(key, high, low, start=0, num=limit + 1)
        else:
            pipe.zrangebylex(key, low, high, start=0, num=limit + 1)

    got = read_shards(broker, list(by_shard), queue, "list")
    lists = [[_s(m) for m in replies[0]] for replies in got.values()]
    merged = heapq.merge(*lists, reverse=backwards)
    members = [m for _i, m in zip(range(limit + 1), merged, strict=False)]
    more = len(members) > limit
    shown = members[:limit]
    if backwards:
        shown.reverse()
        # the page came from before a cursor: something follows it
        nxt, prev = (shown[-1] if shown else None), (shown[0] if more else None)
    else:
        started = low not in ("-", "") and not low.startswith("[")
        nxt, prev = (shown[-1] if more else None), (shown[0] if started and shown else None)
    if scope is None:
        return Page(shown, nxt, prev)

    # where the page is, and how long the listing: ZLEXCOUNT is O(log N)
    def count(pipe: Any, shard: int) -> None:
        pipe.zlexcount(by_shard[shard], scope[0], scope[1])
        pipe.zlexcount(by_shard[shard], scope[0], f"({shown[0]}" if shown else scope[0])

    counts = [int(n) for pair in read_shards(broker, list(got), count, "list").values()
              for n in pair]  # fmt: skip
    total, offset = sum(counts[0::2]), sum(counts[1::2]) if shown else 0
    return Page(shown, nxt, prev, offset, total)


def _bound(cursor: str | None, fallback: str) -> str:
    return f"({cursor}" if cursor else fallback


def page_tenants(
    broker: Core,
    after: str | None,
    limit: int,
    tenant: str | None = None,
    before: str | None = None,
) -> Page[str]:
    """Tenant names in order: ``limit`` after ``after``, or the ``limit`` before
    ``before``; only ``tenant`` when given."""
    ensure_indexes(broker)
    if tenant is not None:
        shard = shard_of(tenant, broker.shards)
        score = broker.client.zscore(broker.keys.tenants(shard), tenant)
        shown = [tenant] if score is not None and not after and not before else []
        return Page(shown, None)
    keys = [(s, broker.keys.tenants(s)) for s in range(broker.shards)]
    whole = ("-", "+")
    if before:
        return _lex_page(broker, keys, "-", _bound(before, "+"), limit, True, whole)
    return _lex_page(broker, keys, _bound(after, "-"), "+", limit, scope=whole)


def count_tenants(broker: Core) -> int:
    """How many tenants there are (one ZCARD per shard)."""
    ensure_indexes(broker)
    got = read_shards(
        broker, range(broker.shards), lambda pipe, s: pipe.zcard(broker.keys.tenants(s))
    )
    return sum(int(n) for (n,) in got.values())


def page_jobs(
    broker: Core,
    tenant: str | None,
    after: tuple[str, str] | None,
    limit: int,
    before: tuple[str, str] | None = None,
    search: str | None = None,
) -> Page[tuple[str, str, str]]:
    """(tenant, name, job id) in (tenant, name) order: ``limit`` after ``after``
    (a (tenant, name) pair), or the ``limit`` before ``before``; of ``tenant``
    only when given.  ``search``: only names or tenants holding it, among at
    most :data:`SEARCH_SCAN` index entries per request (a page may come back
    short, with a next cursor).  The cursors are ``<tenant> <name>``; the job
    ids come with the index's members (``<tenant> <name> <job id>``)."""
    ensure_indexes(broker)
    low, high = "-", "+"
    if tenant is not None:
        low, high = jobidx_range(tenant)
    whole = (low, high)
    if after is not None and (tenant is None or after[0] >= tenant):
        # past every member of (tenant, name): ``(`` + its range's upper end
        low = "(" + jobidx_range(*after)[1][1:]
    if before is not None and (tenant is None or before[0] <= tenant):
        high = "(" + jobidx_range(*before)[0][1:]
    keys = [(s, broker.keys.jobidx(s)) for s in _shards(broker, tenant)]
    if search:
        page = _search(broker, keys, low, high, limit, search.lower())
    else:
        page = _lex_page(broker, keys, low, high, limit, before is not None, whole)
    out = [job for m in page.items if (job := jobidx_parse(m))]
    return Page(out, _pair(page.next_cursor), _pair(page.prev_cursor), page.offset, page.total)


def _pair(member: str | None) -> str | None:
    """A page cursor ``<tenant> <name>`` from a ``jobidx`` member."""
    if member is None:
        return None
    tenant, _sep, rest = member.partition(JOBIDX_SEP)
    return f"{tenant}{JOBIDX_SEP}{rest.partition(JOBIDX_SEP)[0]}"


def _search(
    broker: Core, keys: Sequence[tuple[int, str]], low: str, high: str, limit: int, needle: str
) -> Page[str]:
    """Members holding ``needle`` from ``low``, among at most SEARCH_SCAN read."""
    scanned = _lex_page(broker, keys, low, high, SEARCH_SCAN)
    shown: list[str] = []
    for m in scanned.items:
        # the tenant and the name, not the job id
        if needle in m.rpartition(JOBIDX_SEP)[0].lower():
            shown.append(m)
            if len(shown) == limit:
                return Page(shown, m)
    last = scanned.items[-1] if scanned.items else None
    return Page(shown, last if scanned.next_cursor else None)


def page_runs(
    broker: Core,
    tenant: str | None,
    before: tuple[int, str] | None,
    limit: int,
    state: str | None = None,
    late: bool | None = None,
) -> tuple[list[RunRecord], tuple[int, str] | None]:
    """Runs newest first (by creation time, then id), ``limit`` older than
    ``before``; of ``tenant`` only, in ``state`` only, and only those found
    late (``late`` True) or not (False), when given.

    Reads ``limit`` + 1 index entries per shard, or :data:`RUN_SCAN` with a
    ``state`` or ``late`` filter: a page may then hold fewer than ``limit``
    runs while more follow (the cursor says so).  Returns the runs and the
    cursor of the next page (None on the last)."""
    keys = broker.keys
    ensure_indexes(broker)
    shards = _shards(broker, tenant)
    index = [(s, keys.truns(s, tenant) if tenant else keys.runidx(s)) for s in shards]
    return _page_run_index(broker, index, before, limit, state, late)


def page_job_runs(
    broker: Core,
    job_id: str,
    before: tuple[int, str] | None,
    limit: int,
    state: str | None = None,
    late: bool | None = None,
) -> tuple[list[RunRecord], tuple[int, str] | None]:
    """One job's runs newest first by scheduled time (its history ``runs:<job>``,
    scored so), then id: as :func:`page_runs`, a page reads ``limit`` + 1
    entries (:data:`RUN_SCAN` with ``state`` or ``late``), however long the
    history.  The cursor is (scheduled ms, run id)."""
    shard = shard_of_id(job_id)
    index = [(shard, broker.keys.runs(shard, job_id))]
    return _page_run_index(broker, index, before, limit, state, late)


def _page_run_index(
    broker: Core,
    index: Sequence[tuple[int, str]],
    before: tuple[int, str] | None,
    limit: int,
    state: str | None,
    late: bool | None = None,
) -> tuple[list[RunRecord], tuple[int, str] | None]:
    """:func:`page_runs` over ``index``: (shard, ZSET of run id -> ms) pairs."""
    client, keys = broker.client, broker.keys
    by_shard = dict(index)
    want = RUN_SCAN if state or late is not None else limit + 1
    high = "+inf" if before is None else before[0]

    def queue(pipe: Any, shard: int) -> None:
        pipe.zrevrangebyscore(
            by_shard[shard], high, "-inf", start=0, num=want + _TIES, withscores=True
        )

    entries: list[tuple[int, str, int]] = []
    cut = False  # some shard has entries past what was read
    for shard, (got,) in read_shards(broker, list(by_shard), queue, "list").items():
        cut = cut or len(got) >= want + _TIES
        for rid, ms in got:
            at = (int(ms), _s(rid))
            if before is None or at < before:
                entries.append((at[0], at[1], shard))
    entries.sort(reverse=True)
    entries = entries[:want]
    pipe = client.pipeline(transaction=False)
    for _ms, rid, shard in entries:
        pipe.hgetall(keys.run(shard, rid))
    shown: list[RunRecord] = []
    last: tuple[int, str] | None = None
    for (ms, rid, _shard), raw in zip(entries, pipe.execute() if entries else [], strict=True):
        if len(shown) == limit:
            return shown, last  # an entry follows the page
        last = (ms, rid)
        if not raw:
            continue  # expired with its retention
        run = RunRecord.from_fields(fields_of(raw), run_id=rid)
        if (state is None or run.state == state) and (late is None or run.late == late):
            shown.append(run)
    more = cut or len(entries) >= want
    return shown, last if more and last is not None else None


#: entries created in the same ms as the cursor that may precede it in the reply
_TIES = 64
