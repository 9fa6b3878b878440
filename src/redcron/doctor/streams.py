"""Ready streams: every undelivered entry owned by an instance ready at it,
every pending (delivered) entry by an instance leased on it, and every stream
with pending entries in the reaper's index.  Repairs: ``lua/doctor_entries.lua``
(drop an entry no instance owns), ``lua/doctor_reaper.lua`` (index a stream).
An entry whose instance hash is missing is a stray (a half-finished slot
migration, ``lua/lib/take.lua``): reported, and deleted only once the hash has
been missing ``STRAY_MAX_MS`` (a day)."""

from __future__ import annotations

from typing import Any

from redcron.doctor.exam import Exam, Fix
from redcron.doctor.logic import owns
from redcron.doctor.scan import (
    BATCH,
    FIELDS,
    entry_cmds,
    instance_fields,
    named,
    pending_pages,
    pipelined,
    snapshot,
    xpages,
)
from redcron.engine.connection import scan_keys
from redcron.keys import GROUP, MAINT_STRAY, PRIORITIES, STRAY_MAX_MS
from redcron.serde import text as _s


def stream_names(ex: Exam, shard: int) -> set[tuple[str, str]]:
    """(queue, tenant) of every ready stream of ``shard``, found by SCAN: streams
    written by hand or under names no set lists (names hold no ':')."""
    head = ex.k.shard(shard) + "q:"
    found: set[tuple[str, str]] = set()
    for keys in scan_keys(ex.r, ex.k.shard(shard), "q"):
        for key in keys:
            parts = key[len(head) :].split(":")
            if len(parts) == 3 and parts[2] in PRIORITIES:
                found.add((parts[0], parts[1]))
    return found


def check_streams(
    ex: Exam, shard: int, tenants: list[str], queues: list[str]
) -> dict[tuple[str, str, str], int]:
    """Returns (tenant, queue, class) -> ready count (length - pending) of each stream."""
    grid = [(t, q, p) for t in tenants for q in queues for p in PRIORITIES]
    ready: dict[tuple[str, str, str], int] = {}
    for i in range(0, len(grid), BATCH):
        chunk = grid[i : i + BATCH]
        replies = pipelined(ex.r, [("xinfo_groups", ex.k.q(shard, q, t, p)) for t, q, p in chunk])
        for (t, q, p), groups in zip(chunk, replies, strict=True):
            if isinstance(groups, Exception):
                continue  # no such stream
            group = next((g for g in groups if _s(g["name"]) == GROUP), None)
            ready[(t, q, p)] = _stream(ex, shard, t, q, p, group)
    return ready


def _stream(ex: Exam, shard: int, tenant: str, queue: str, pr: str, group: Any) -> int:
    stream = ex.k.q(shard, queue, tenant, pr)
    ex.counts["streams"] += 1
    length = int(ex.r.xlen(stream))
    ex.counts["stream_entries"] += length
    if group is None:
        ex.add(
            "stream_without_group",
            shard,
            stream,
            f"Stream {stream} has no consumer group {GROUP!r}: lease cannot read it. "
            f"Create it by hand: XGROUP CREATE {stream} {GROUP} 0.",
        )
        return 0
    n_pending = int(group["pending"])
    t = ex.tenant(shard, tenant)
    # undelivered entries: each owned by an instance ready with loc q:<id>
    for page in xpages(ex.r, stream, "(" + _s(group["last-delivered-id"])):
        t["queued"] += len(page)
        t["queued_recount"] += len(page) - _orphans(ex, shard, stream, page, delivered=False)
    # pending entries: each held by an instance leased on it
    if n_pending:
        for ids in pending_pages(ex.r, stream):
            found = pipelined(ex.r, [("xrange", stream, eid, eid) for eid in ids])
            entries = [e[0] if e else (eid.encode(), {}) for eid, e in zip(ids, found, strict=True)]
            _orphans(ex, shard, stream, entries, delivered=True)
    if n_pending and ex.r.zscore(ex.k.pending(shard), stream) is None:
        ex.add(
            "reaper_index_missing",
            shard,
            ex.k.pending(shard),
            f"{stream} has {n_pending} pending entries but is not in the reaper's "
            "index: its expired leases would never be reaped. Repair indexes it, "
            "due now.",
            _fix_reaper(ex, shard, stream),
        )
    return length - n_pending


def _orphans(ex: Exam, shard: int, stream: str, entries: list[Any], delivered: bool) -> int:
    """Report the entries no instance owns, judged on a snapshot that re-reads
    each entry and its instance; returns how many there were."""
    ids = [_s(e[0]) for e in entries]
    groups = [
        [*entry_cmds(stream, eid), ("hmget", ex.k.ti(shard, named(fields)), FIELDS)]
        for eid, (_e, fields) in zip(ids, entries, strict=True)
    ]
    n = 0
    for eid, (entry, pending, values) in zip(ids, snapshot(ex.r, groups), strict=True):
        if not entry or bool(pending) != delivered:
            continue  # gone or moved meanwhile
        if named(entry[0][1]) and all(v is None for v in values):
            n += 1
            _stray(ex, shard, stream, eid, named(entry[0][1]), delivered)
            continue
        f = instance_fields(values)
        state = f.get("state")
        same = ex.k.q(shard, f.get("queue", ""), f.get("tenant", ""), f.get("priority", ""))
        if not state:
            why = "its instance is gone"
        elif same != stream:
            why = f"its instance belongs to another stream ({same})"
        elif owns(f, eid, delivered):
            continue
        elif delivered:
            why = f"its instance is {state} (lease entry {f.get('lease_entry') or 'none'})"
        else:
            why = f"its instance is {state} at {f.get('loc') or 'no place'}"
        n += 1
        if delivered:
            kind = "pending_entry_orphan"
            detail = (
                f"Entry {eid} of {stream} is pending (leased) but {why}: no lease holds "
                "it. Repair acknowledges and deletes it (as the reaper would)."
            )
        else:
            kind = "stream_entry_orphan"
            detail = (
                f"Entry {eid} of {stream} (instance {named(entry[0][1])}) is ready but "
                f"{why}: lease would discard it; it inflates the tenant's ready count. "
                "Repair deletes it."
            )
        ex.add(kind, shard, stream, detail, _fix_entries(ex, shard, stream, eid))
    return n


def _stray(ex: Exam, shard: int, stream: str, eid: str, iid: str, delivered: bool) -> None:
    since = ex.r.hget(ex.k.maintenance(shard), f"{MAINT_STRAY}{stream}:{eid}")
    seen = f"first seen missing at {_s(since)} ms" if since else "not yet seen by lease or reaper"
    where = "pending (left by lease)" if delivered else "ready"
    ex.add(
        "stray_entry",
        shard,
        stream,
        f"Entry {eid} of {stream} is {where} but the hash of its instance {iid} is "
        f"missing ({seen}): a half-finished cluster slot migration looks so, the "
        "hash moved ahead of its stream. It is kept: once the hash is back the "
        "reaper makes the instance ready again. Repair deletes it only once the "
        f"hash has been missing {STRAY_MAX_MS // 3_600_000} h.",
        _fix_stray(ex, shard, stream, eid),
    )


def _fix_stray(ex: Exam, shard: int, stream: str, eid: str) -> Fix:
    def fix() -> tuple[bool, str]:
        dropped, _kept = ex.call("doctor_entries", shard, [eid], stream)
        if dropped:
            return True, "its hash has been missing a day: acknowledged and deleted the entry"
        # kept (the hash missing less than a day, or back): not repaired, still reported
        return False, "kept: its hash has been missing less than a day, or is back"

    return fix


def _fix_entries(ex: Exam, shard: int, stream: str, eid: str) -> Fix:
    def fix() -> tuple[bool, str]:
        dropped, _kept = ex.call("doctor_entries", shard, [eid], stream)
        return True, (
            "acknowledged and deleted the entry"
            if dropped
            else "an instance owns it on re-check: left"
        )

    return fix


def _fix_reaper(ex: Exam, shard: int, stream: str) -> Fix:
    def fix() -> tuple[bool, str]:
        indexed = ex.call("doctor_reaper", shard, [], stream)
        return True, (
            "indexed, due now" if indexed else "already indexed, or nothing pending any more: left"
        )

    return fix
