"""Fire times as stored: whole milliseconds since the Unix epoch, UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def to_ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
