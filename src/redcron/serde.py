"""Payload encoding: msgpack only.  Never pickle anything that comes from Redis."""

from __future__ import annotations

from typing import Any

import msgpack

from redcron.errors import ValidationError

#: values that always read back as packed: not unpacked again (a task's result
#: is often one, and the check cost a drained task a second unpack)
_SCALARS = frozenset({int, str, bytes, float, bool, type(None)})


def dumps(value: Any, field: str = "args") -> bytes:
    """Encode ``value`` or raise :class:`ValidationError` naming ``field``."""
    try:
        packed: bytes = msgpack.packb(value, use_bin_type=True)
        # a map keyed by a tuple packs, but unpacks to an unhashable list key: the
        # task could never be decoded by a worker (nor shown).  Refuse it here.
        if type(value) not in _SCALARS:
            loads(packed)
        return packed
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(
            field,
            f"not serializable with msgpack ({exc}); pass plain data "
            "(None, bool, int, float, str, bytes, list, dict)",
        ) from None


def loads(data: bytes | None) -> Any:
    if data is None or data == b"":
        return None
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def text(value: Any) -> str:
    """A Redis reply (bytes) or plain value as text; hash fields are plain text."""
    return value.decode() if isinstance(value, bytes) else str(value)
