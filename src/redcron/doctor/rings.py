"""Rings, the aging index and parked tenants: a tenant with ready work in a
(queue, class) is on its ring or parked, and has its oldest entry in the aging
index; one without is on neither; a parked tenant has something that will
unpark it.  Repairs: ``lua/doctor_ring.lua``, ``lua/doctor_unpark.lua``."""

from __future__ import annotations

from redcron.doctor.exam import Exam, Fix
from redcron.keys import PRIORITIES, TENANT_PARKED
from redcron.serde import text as _s

_RING_WORDS = {
    "added": "put the tenant on the ring (and the aging index)",
    "removed": "took the tenant off the ring and the aging index (deficit reset)",
    "aged": "recorded the tenant's oldest ready entry in the aging index",
    "unaged": "dropped the aging entry",
    "in_place": "consistent on re-check: nothing written",
}


def check_rings(
    ex: Exam,
    shard: int,
    tenants: list[str],
    queues: list[str],
    ready: dict[tuple[str, str, str], int],
) -> None:
    """``ready``: (tenant, queue, class) -> ready count, from ``check_streams``."""
    k = ex.k
    parked_sets: dict[str, set[str]] = {}

    def parked_off(tenant: str) -> set[str]:
        # one HGET per tenant, not one per (queue, class, tenant)
        if tenant not in parked_sets:
            parked_sets[tenant] = _parked(ex, shard, tenant)
        return parked_sets[tenant]

    for queue in queues:
        for pr in PRIORITIES:
            ring, oldest = k.ring(shard, queue, pr), k.oldest(shard, queue, pr)
            on = {_s(m) for m in ex.r.zrange(ring, 0, -1)}
            aged = {_s(m) for m in ex.r.zrange(oldest, 0, -1)}
            for tenant in sorted(set(tenants) | on | aged):
                n = ready.get((tenant, queue, pr), 0)
                parked = f"{queue}|{pr}" in parked_off(tenant)
                fix = _fix_ring(ex, shard, queue, pr, tenant)
                stream = k.q(shard, queue, tenant, pr)
                if n > 0 and tenant not in on and not parked:
                    ex.add(
                        "ring_member_missing",
                        shard,
                        ring,
                        f"Tenant {tenant} has {n} ready in {stream} but is neither on "
                        f"{ring} nor parked: no worker will ever lease that work. "
                        "Repair puts it on the ring.",
                        fix,
                    )
                elif n > 0 and tenant in on and tenant not in aged:
                    ex.add(
                        "aging_entry_missing",
                        shard,
                        oldest,
                        f"Tenant {tenant} has ready work in {stream} but no entry in "
                        f"{oldest}: aging never raises it. Repair records its oldest "
                        "ready entry.",
                        fix,
                    )
                elif n <= 0 and tenant in on:
                    ex.add(
                        "ring_member_idle",
                        shard,
                        ring,
                        f"Tenant {tenant} is on {ring} with nothing ready in {stream}: "
                        "every lease visits it for nothing. Repair takes it off.",
                        fix,
                    )
                elif tenant in aged and tenant not in on and not (n > 0 and parked):
                    ex.add(
                        "aging_entry_stale",
                        shard,
                        oldest,
                        f"Tenant {tenant} is in {oldest} but not on {ring}: its old "
                        "entry may raise nothing or hide other tenants' aged work. "
                        "Repair drops the entry.",
                        fix,
                    )


def _parked(ex: Exam, shard: int, tenant: str) -> set[str]:
    """The ``<queue>|<class>`` rings a tenant is parked off (its hash's ``parked``)."""
    got = ex.r.hget(ex.k.tenant(shard, tenant), TENANT_PARKED)
    return {qc for qc in _s(got).split(",") if qc} if got else set()


def check_parked(ex: Exam, shard: int, tenants: list[str]) -> None:
    """A parked tenant holds a lease under its cap, or waits for a rate token."""
    k = ex.k
    for tenant in tenants:
        pk = k.tenant(shard, tenant)
        members = _parked(ex, shard, tenant)
        if not members:
            continue
        cap = ex.r.hget(k.tenant(shard, tenant), "max_in_flight")
        cap_n = int(float(cap)) if cap and _s(cap).replace(".", "", 1).isdigit() else 0
        held = int(ex.r.zcard(k.leases(shard, tenant)))
        timer = ex.r.zscore(k.timers(shard), f"park:{tenant}")
        if (cap_n <= 0 or held < cap_n) and timer is None:
            ex.add(
                "tenant_parked_stuck",
                shard,
                pk,
                f"Tenant {tenant} is parked off {len(members)} ring(s) (field "
                f"{TENANT_PARKED}) but holds "
                f"{held} lease(s) (cap {cap_n or 'none'}) and waits for no rate "
                "token: nothing will ever unpark it. Repair unparks it.",
                _fix_unpark(ex, shard, tenant),
            )


def _fix_ring(ex: Exam, shard: int, queue: str, pr: str, tenant: str) -> Fix:
    def fix() -> tuple[bool, str]:
        (word,) = ex.call("doctor_ring", shard, [queue, pr, tenant])
        return True, _RING_WORDS.get(_s(word), _s(word))

    return fix


def _fix_unpark(ex: Exam, shard: int, tenant: str) -> Fix:
    def fix() -> tuple[bool, str]:
        done = ex.call("doctor_unpark", shard, [tenant])
        return True, "unparked" if done else "no longer stuck on re-check: left"

    return fix
