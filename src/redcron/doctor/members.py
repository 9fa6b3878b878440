"""The indexes of instances: every member of a tenant's lease set, of the
shard's timers and of a tenant's DLQ names an instance that is in that place.
Repairs drop the member that does not (``lua/doctor_leases.lua``,
``doctor_timers.lua``, ``doctor_dlq.lua``, each re-checking it first)."""

from __future__ import annotations

from redcron.doctor.exam import Exam, Fix
from redcron.doctor.logic import TIMER_STATES
from redcron.doctor.scan import named, snapshot, tx, xpages, zpages
from redcron.keys import TIMER_NON_INSTANCE
from redcron.model.states import TASK_LEASED
from redcron.serde import text as _s


def check_leases(ex: Exam, shard: int, tenants: list[str]) -> None:
    for tenant in tenants:
        key = ex.k.leases(shard, tenant)
        t = ex.tenant(shard, tenant)
        for page in zpages(ex.r, key):
            t["in_flight"] += len(page)
            ex.counts["leases"] += len(page)
            groups = [
                [("zscore", key, m), ("hmget", ex.k.ti(shard, m), ["state", "tenant"])]
                for m, _sc in page
            ]
            for (iid, _sc), (score, (state, owner)) in zip(
                page, snapshot(ex.r, groups), strict=True
            ):
                if score is None:
                    continue
                st = _s(state) if state else None
                if st in TASK_LEASED and _s(owner or b"") == tenant:
                    continue
                what = (
                    "gone"
                    if st is None
                    else (st if st not in TASK_LEASED else f"leased by tenant {_s(owner or b'')}")
                )
                ex.add(
                    "lease_orphan",
                    shard,
                    key,
                    f"{key} counts a lease on {iid}, which is {what}: tenant "
                    f"{tenant}'s cap counts a lease nobody holds. Repair removes it "
                    "(and gives the tenant its rings back).",
                    _fix_member(ex, "doctor_leases", shard, [tenant, iid]),
                )


def check_timers(ex: Exam, shard: int) -> None:
    key = ex.k.timers(shard)
    for page in zpages(ex.r, key):
        # park:<tenant>, brk:<job>, ckwake:<key> are the rate, breaker and
        # concurrency-key timers, not instances
        ids = [m for m, _sc in page if not m.startswith(TIMER_NON_INSTANCE)]
        ex.counts["timers"] += len(ids)
        groups = [[("zscore", key, m), ("hget", ex.k.ti(shard, m), "state")] for m in ids]
        for iid, (score, state) in zip(ids, snapshot(ex.r, groups), strict=True):
            if score is None or (state and _s(state) in TIMER_STATES):
                continue
            what = "gone" if not state else _s(state)
            ex.add(
                "timer_orphan",
                shard,
                key,
                f"{key} has a timer for {iid}, which is {what}: nothing waits on it. "
                "Repair removes it.",
                _fix_member(ex, "doctor_timers", shard, [iid]),
            )


def check_dlq(ex: Exam, shard: int, tenants: list[str]) -> None:
    for tenant in tenants:
        key = ex.k.dlq(shard, tenant)
        t = ex.tenant(shard, tenant)
        for page in xpages(ex.r, key):
            t["dlq"] += len(page)
            ex.counts["dlq_entries"] += len(page)
            cmds = [
                ("hmget", ex.k.ti(shard, named(fields)), ["state", "loc"]) for _e, fields in page
            ]
            for (eid, fields), (state, loc) in zip(page, tx(ex.r, cmds), strict=True):
                eid, iid = _s(eid), named(fields)
                if state is None:
                    ex.counts["dlq_expired"] += 1
                    what = "gone (expired or deleted): replay and discard cannot act on it"
                elif _s(state) != "dead" or _s(loc or b"") != "dlq:" + eid:
                    where = _s(loc or b"") or "no place"
                    what = f"{_s(state)} at {where}: replaying this entry would do nothing"
                else:
                    continue
                ex.add(
                    "dlq_entry_orphan",
                    shard,
                    key,
                    f"DLQ entry {eid} of {key} names {iid}, which is {what}. Repair deletes "
                    "the entry" + (" (dlq list drops it too)." if state is None else "."),
                    _fix_member(ex, "doctor_dlq", shard, [tenant, eid]),
                )


def _fix_member(ex: Exam, script: str, shard: int, args: list[str]) -> Fix:
    def fix() -> tuple[bool, str]:
        removed, _kept = ex.call(script, shard, args)
        return True, "removed" if removed else "valid on re-check: left"

    return fix
