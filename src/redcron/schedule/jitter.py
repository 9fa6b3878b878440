"""Jitter: how far after its nominal fire time a job is due, deterministically."""

from __future__ import annotations

import math
import zlib
from typing import Any


def jitter_ms(job_id: str, nominal_ms: int, jitter_s: float) -> int:
    """Deterministic per (job, fire time): a restarted beat computes the same due time."""
    span = int(jitter_s * 1000)
    if span <= 0:
        return 0
    return zlib.crc32(f"{job_id}:{nominal_ms}".encode()) % (span + 1)


def effective_jitter_s(job_jitter_s: float, tenant_jitter: float) -> float:
    """The jitter a job's due times use: its own ``jitter_s`` (``job_jitter_s``)
    wins; a job without one (0) takes its tenant's default ``jitter_s`` (read
    live, never stored in the job spec, so changing the tenant setting moves the
    next due time computed)."""
    if job_jitter_s > 0:
        return job_jitter_s
    return tenant_jitter if tenant_jitter > 0 else 0.0


def due_ms(job_id: str, job_jitter_s: float, nominal_ms: int, tenant_jitter: float) -> int:
    """When a job's fire at ``nominal_ms`` is due: the nominal time plus the job's
    deterministic jitter (its own ``jitter_s``, else its tenant's default)."""
    return nominal_ms + jitter_ms(
        job_id, nominal_ms, effective_jitter_s(job_jitter_s, tenant_jitter)
    )


def tenant_jitter_s(value: Any) -> float:
    """A tenant hash's stored ``jitter_s`` field (bytes, text or None) in seconds;
    missing, unreadable or negative: 0 (no default jitter)."""
    if value is None:
        return 0.0
    try:
        j = float(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError):
        return 0.0
    return j if math.isfinite(j) and j > 0 else 0.0
