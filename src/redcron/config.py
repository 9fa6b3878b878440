"""Settings: a frozen dataclass; defaults < environment (``REDCRON_*``) < explicit values.

Nothing is read from the environment at import time: call
:meth:`Settings.from_env`.  Unknown keys raise instead of being ignored.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redcron.errors import ConfigError

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

#: Worker defaults (``redcron worker``, :class:`redcron.worker.Worker`, and the
#: throughput benchmark), chosen from ``redcron bench throughput`` on a 2-core
#: box (docs/operations.md): 32 threads (the slots of a threads pool mostly
#: wait on I/O; 32 drained no-op tasks ~20 % faster than 8 or 16, INCR tasks
#: as fast), one process per core for the processes pool, and a prefetch of as
#: many leases again, so the lease loop takes the next batch while the slots
#: still have work and leases in batches big enough to spread its per-call
#: cost.  Long tasks want ``--prefetch 0``: a held lease waits behind them
#: while another worker might be idle.
WORKER_THREADS = 32
WORKER_PREFETCH_PER_SLOT = 1


def default_concurrency(pool: str) -> int:
    """Slots a worker runs when not told: 32 threads, or one process per core."""
    if pool == "processes":
        return os.cpu_count() or 1
    return WORKER_THREADS


@dataclass(frozen=True)
class Settings:
    """Deployment and process settings.

    Attributes:
        redis_url: where Redis is.
        prefix: key prefix (``rc``); several deployments can share one server.
        shards: number of shards, used when the deployment meta key is created.
        lease_ttl: seconds a lease lives without a heartbeat.
        min_lease_ttl: the smallest TTL a worker may ask for.
        result_ttl: seconds a finished task's record (and result) is kept.
        retry_base: first retry's backoff ceiling, seconds.
        retry_cap: largest backoff ceiling, seconds.
        max_retries: retries after the first attempt, unless a task says otherwise.
        maintenance_interval: seconds between promote/reap passes per shard.
        log_max_lines: lines kept per attempt log stream.
        container_runtime: docker-compatible CLI that runs container tasks.
        dispatch_quantum: tasks credited per DRR visit per unit of tenant weight.
        aging: seconds ready work waits before it is served one priority class
            higher (per step); 0 turns aging off.
    """

    redis_url: str = DEFAULT_REDIS_URL
    prefix: str = "rc"
    shards: int = 1
    lease_ttl: float = 60.0
    min_lease_ttl: float = 2.0
    result_ttl: int = 86_400
    retry_base: float = 1.0
    retry_cap: float = 3_600.0
    max_retries: int = 3
    maintenance_interval: float = 0.2
    log_max_lines: int = 1_000
    container_runtime: str = "docker"
    dispatch_quantum: float = 1.0
    aging: float = 60.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            # every comparison with NaN is false: the range checks below would pass it
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{f.name}: {value!r} is not a finite number")
        if self.shards < 1:
            raise ConfigError("shards: must be >= 1")
        if self.lease_ttl < self.min_lease_ttl:
            raise ConfigError(
                f"lease_ttl: {self.lease_ttl}s is below min_lease_ttl {self.min_lease_ttl}s"
            )
        if self.min_lease_ttl <= 0:
            raise ConfigError("min_lease_ttl: must be > 0")
        if self.retry_base < 0 or self.retry_cap < self.retry_base:
            raise ConfigError("retry_base/retry_cap: need 0 <= retry_base <= retry_cap")
        if self.dispatch_quantum < 1:
            raise ConfigError("dispatch_quantum: must be >= 1 (a visit serves at least a task)")
        if self.aging < 0:
            raise ConfigError("aging: must be >= 0 seconds (0 = off)")
        if self.max_retries < 0:
            raise ConfigError("max_retries: must be >= 0")
        if not self.prefix or any(c in self.prefix for c in "{} "):
            raise ConfigError("prefix: must be non-empty without '{', '}' or spaces")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``REDCRON_<FIELD>`` variables, then ``overrides``.

        ``None`` overrides are ignored (so CLI flags left unset fall through).
        """
        env = os.environ if env is None else env
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for name, field in fields.items():
            raw = env.get(f"REDCRON_{name.upper()}")
            if raw is not None and raw != "":
                values[name] = _coerce(name, field.type, raw)
        for name, value in overrides.items():
            if name not in fields:
                raise ConfigError(f"unknown setting {name!r}; known: {', '.join(fields)}")
            if value is not None:
                values[name] = value
        return cls(**values)


def _coerce(name: str, typ: Any, raw: str) -> Any:
    kind = typ if isinstance(typ, str) else getattr(typ, "__name__", str(typ))
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise ConfigError(f"REDCRON_{name.upper()}={raw!r}: expected a {kind}") from None
    return raw
