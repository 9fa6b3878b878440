"""One examination's shared state, passed to every check: the client and key
builder, the clock the repairs run on, the repair scripts, and what was found
and counted so far."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis.commands.core import Script

from redcron.doctor.records import Finding
from redcron.engine.scripts import full_source

if TYPE_CHECKING:
    from redcron.engine.core import Core

#: the repair scripts (``lua/doctor_*.lua``)
SCRIPTS = (
    "doctor_entries",
    "doctor_leases",
    "doctor_timers",
    "doctor_dlq",
    "doctor_place",
    "doctor_ring",
    "doctor_unpark",
    "doctor_schedule",
    "doctor_breaker",
    "doctor_reaper",
    "doctor_run",
)

#: what is tallied per tenant: the counts of a ``TenantRecount``
TALLIES = ("in_flight", "in_flight_recount", "queued", "queued_recount", "ready", "dlq")

#: a repair: returns (done, what it did in words)
Fix = Callable[[], tuple[bool, str]]


@dataclass
class Found:
    finding: Finding
    fix: Fix | None = None


class Exam:
    """The state of one ``examine`` call.

    ``counts`` are keyed by the names of :class:`DoctorSummary`'s counts
    (``instances``, ``leases``...); each tenant's tally by ``TALLIES``."""

    def __init__(
        self, broker: Core, now_ms: int | None, progress: Callable[[str], None] | None
    ) -> None:
        self.r = broker.client
        self.k = broker.keys
        self.shards = broker.shards
        self.override = now_ms
        self.now = now_ms if now_ms is not None else broker.server_ms()
        self.say = progress or (lambda _line: None)
        self.found: list[Found] = []
        self.counts: Counter[str] = Counter()
        self.tallies: dict[tuple[int, str], dict[str, int]] = {}
        self.scripts: dict[str, Script] = {
            n: self.r.register_script(full_source(n)) for n in SCRIPTS
        }

    def call(self, name: str, shard: int, args: Sequence[Any], *keys: str) -> Any:
        """Run repair script ``name`` on ``shard`` (its prefix is ``KEYS[1]``)."""
        return self.scripts[name]([self.k.shard(shard), *keys], list(args))

    def now_arg(self) -> str:
        """The ``now`` a repair script takes: empty for the server clock."""
        return "" if self.override is None else str(self.override)

    def add(self, kind: str, shard: int, key: str, detail: str, fix: Fix | None = None) -> None:
        self.found.append(Found(Finding(kind, shard, key, detail, fix is not None), fix))

    def tenant(self, shard: int, tenant: str) -> dict[str, int]:
        """The tally of ``tenant`` on ``shard`` (see ``TALLIES``)."""
        return self.tallies.setdefault((shard, tenant), dict.fromkeys(TALLIES, 0))
