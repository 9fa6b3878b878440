"""What the chaos runner did so far: the faults it injected, the tasks it was
acknowledged and cancelled, and what it saw just before it killed the Redis
server.  The runner hands these to the checker (``Facts``) and the report."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Tally:
    """What the runner did so far."""

    worker_kills: int = 0
    worker_stops: int = 0
    beat_kills: int = 0
    redis_restarts: int = 0
    enqueued: int = 0
    cancels: int = 0
    redis_kill_ms: int | None = None
    acked: list[str] = field(default_factory=list)
    #: the ids a cancel was accepted for: each must end cancelled
    cancelled: list[str] = field(default_factory=list)
    acked_before_kill: int = 0
    runs_before_kill: set[str] = field(default_factory=set)
    #: ``--cluster``: the master killed, when (wall ms), when its restart began
    master_killed: int | None = None
    master_up_ms: int | None = None
