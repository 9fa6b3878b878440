"""What ``redcron doctor`` returns: findings, tenant recounts, the summary and
the report (``examine``).  Kept beside the doctor, not in ``redcron.model``:
only the doctor makes them and only its callers read them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Finding:
    """One inconsistency ``redcron doctor`` found between the indexes and the
    instance hashes, runs and jobs they name.

    ``kind`` is a stable snake_case code (``docs/operations.md`` lists them);
    ``key`` the Redis key to look at; ``detail`` a sentence a person can act
    on.  ``repairable``: ``--repair`` knows a safe, idempotent fix;
    ``repaired``: the fix ran (``action`` says what it did, or why it did not).
    """

    kind: str
    shard: int
    key: str
    detail: str
    repairable: bool
    repaired: bool = False
    action: str = ""


@dataclass(frozen=True, slots=True)
class TenantRecount:
    """What one tenant's indexes claim against a recount from the instances.

    ``in_flight`` is the size of its lease set (what its cap counts),
    ``in_flight_recount`` the instances leased or running for it with a lease
    that holds; ``queued`` the undelivered entries of its ready streams,
    ``queued_recount`` those an instance in state ``ready`` owns; ``ready``
    the instances in state ``ready``; ``dlq`` its DLQ entries."""

    tenant: str
    shard: int
    in_flight: int
    in_flight_recount: int
    queued: int
    queued_recount: int
    ready: int
    dlq: int


@dataclass(frozen=True, slots=True)
class DoctorSummary:
    """What one examination looked at and found."""

    instances: int = 0
    streams: int = 0
    stream_entries: int = 0
    leases: int = 0
    timers: int = 0
    dlq_entries: int = 0
    #: DLQ entries whose instance expired with its run's retention (not a finding)
    dlq_expired: int = 0
    jobs: int = 0
    schedule_entries: int = 0
    runs_active: int = 0
    findings: int = 0
    repaired: int = 0
    #: findings not repaired: exit status 1 of ``redcron doctor`` when > 0
    remaining: int = 0


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """The result of ``redcron doctor`` (``doctor.examine``)."""

    checked_at: datetime | None
    repair: bool
    shards: int
    findings: tuple[Finding, ...]
    tenants: tuple[TenantRecount, ...]
    summary: DoctorSummary

    @property
    def clean(self) -> bool:
        """Nothing left to look at: no finding, or every one repaired."""
        return self.summary.remaining == 0
