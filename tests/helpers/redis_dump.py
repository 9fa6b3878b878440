"""Every key under a test's prefix with its type and value, to show that a
refused request wrote nothing.  Imported by name (``tests/helpers`` is on
``sys.path``).

The audit trail's streams (``rc:actions``, ``rc:{sN}:actions:<tenant>``) are
left out: a refused request is recorded there by design (issue 21 §5), and
that record is not the state a refusal must leave alone."""

from __future__ import annotations

import re
from typing import Any

import redis

_ACTIONS = re.compile(rb":actions(:[^:]*)?$")


def is_action_stream(key: bytes) -> bool:
    """Whether ``key`` is one of the audit trail's streams."""
    return bool(_ACTIONS.search(key))


def dump(client: redis.Redis, prefix: str) -> dict[bytes, tuple[str, Any]]:
    """``{key: (type, value)}`` for every key matching ``prefix*``.

    Values are compared whole: hashes as dicts, lists in order, sets and
    sorted sets (with scores) as sets, streams as their entries plus their
    consumer groups' pending counts.  TTLs are left out (they tick).
    """
    out: dict[bytes, tuple[str, Any]] = {}
    for key in sorted(client.scan_iter(match=f"{prefix}*", count=1000)):
        if is_action_stream(key):
            continue
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        value: Any
        if kind == "string":
            value = client.get(key)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "zset":
            value = set(client.zrange(key, 0, -1, withscores=True))
        elif kind == "stream":
            groups = client.xinfo_groups(key)
            value = (
                client.xrange(key),
                sorted((g["name"], g["pending"], g["last-delivered-id"]) for g in groups),
            )
        elif kind == "none":
            continue  # expired between the scan and the read
        else:
            value = kind
        out[key] = (kind, value)
    return out


def diff(before: dict[bytes, tuple[str, Any]], after: dict[bytes, tuple[str, Any]]) -> str:
    """A readable account of what changed, or "" when nothing did."""
    lines = []
    for key in sorted(set(before) | set(after)):
        if key not in before:
            lines.append(f"+ {key!r} {after[key]!r}")
        elif key not in after:
            lines.append(f"- {key!r} {before[key]!r}")
        elif before[key] != after[key]:
            lines.append(f"~ {key!r} {before[key]!r} -> {after[key]!r}")
    return "\n".join(lines)
