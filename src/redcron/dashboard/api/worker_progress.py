"""Progress from HTTP workers (issue 34 §1): the bodies of ``POST
/v1/worker/progress`` and of a heartbeat's optional ``progress``, checked with
``model/progress.py``, and the heartbeat's values stored for the leases it
renewed.  The route itself is in ``worker.py``, beside the other reports."""

from __future__ import annotations

from typing import Any

from redcron.dashboard.api.common import bad
from redcron.dashboard.api.leases import LEASE_ID_SCHEMA, LeaseToken
from redcron.dashboard.api.params import body_schema
from redcron.engine import Broker
from redcron.errors import ValidationError
from redcron.model import progress, validation

Json = dict[str, Any]

#: a progress value (``model/progress.py``), alone or riding on a heartbeat
VALUE: Json = {
    "done": validation.number_schema(maximum=progress.MAX_VALUE),
    "total": {"anyOf": [validation.number_schema(above=True, maximum=progress.MAX_VALUE),
                        {"type": "null"}], "description": "null or left out: unknown"},
    "message": {"type": ["string", "null"], "description": "longer than "
                f"{progress.MESSAGE_MAX} characters: cut"},
}  # fmt: skip
BODY: Json = body_schema({"lease_id": LEASE_ID_SCHEMA, **VALUE}, ("lease_id", "done"))


def pending(value: progress.Value) -> progress.Pending:
    """One value as a write: its message, if any, is one of the recent ones."""
    return progress.Pending(value, ((value.done, value.message),) if value.message else ())


def parse_body(data: dict[str, Any]) -> progress.Value:
    """``POST /v1/worker/progress``'s value (its lease id is the route's to verify)."""
    if "done" not in data:
        bad("done", "required: how much is done (a number >= 0)")
    return progress.check(data["done"], data.get("total"), data.get("message"))


def parse_field(raw: object) -> dict[str, progress.Pending]:
    """A heartbeat's optional ``progress``: lease_id -> a checked value (a lease
    not in ``lease_ids`` is not renewed, so :func:`store` drops its value)."""
    if not isinstance(raw, dict):
        bad("progress", "must be an object: lease_id -> {done, total, message}")
    out: dict[str, progress.Pending] = {}
    for lease_id, given in raw.items():
        if not isinstance(given, dict) or "done" not in given:
            bad("progress", "each value must be an object {done, total, message}")
        unknown = sorted(set(given) - set(VALUE))
        if unknown:
            bad(f"progress.{unknown[0]}", "unknown field; known: done, message, total")
        try:
            value = progress.check(given["done"], given.get("total"), given.get("message"))
        except ValidationError as exc:
            bad(f"progress.{exc.field}", exc.message)
        out[lease_id] = pending(value)
    return out


def store(
    broker: Broker,
    worker: str,
    tokens: dict[str, LeaseToken],
    told: dict[str, progress.Pending],
    answers: dict[tuple[str, str], str],
) -> None:
    """Store the progress a heartbeat carried, for its leases answered ok (fenced
    again by progress.lua: a lease lost since writes nothing)."""
    by_shard: dict[int, list[tuple[str, str, progress.Pending]]] = {}
    for lease_id, value in told.items():
        token = tokens.get(lease_id)
        if token is not None and answers.get((token.task_id, token.epoch)) == "ok":
            by_shard.setdefault(token.shard, []).append((token.task_id, token.epoch, value))
    for shard, items in by_shard.items():
        broker.leases.progress(shard, worker, items)
