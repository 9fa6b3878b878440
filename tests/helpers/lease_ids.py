"""Making lease ids of the HTTP worker protocol by hand: tampered, re-signed, or in the
old unsigned format, to check that only genuine ones are taken.  Imported by name
(``tests/helpers`` is on ``sys.path``)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from redcron import App

#: what the server's HMAC covers before the payload (dashboard/api/leases.py)
DOMAIN = b"redcron lease v1\n"
ORDER = ("shard", "task_id", "epoch", "worker", "leaser")


def parts(lease_id: str) -> dict[str, Any]:
    """What a lease id says (its payload is readable by design)."""
    payload = lease_id.partition(".")[0]
    values = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return dict(zip(ORDER, values, strict=True))


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _payload(values: dict[str, Any]) -> bytes:
    return json.dumps([values[k] for k in ORDER], separators=(",", ":")).encode()


def forged(lease_id: str, **changes: Any) -> str:
    """The lease id with parts of its payload changed and its signature kept (tampered)."""
    raw = _payload({**parts(lease_id), **changes})
    return f"{b64(raw)}.{lease_id.partition('.')[2]}"


def signed(app: App, lease_id: str, secret: bytes | None = None, **changes: Any) -> str:
    """The lease id with parts changed and signed again: with the deployment's own secret
    (what only the server can do: tests the fencing under the signature) or another."""
    if secret is None:
        stored = app.broker.client.get(app.broker.keys.lease_secret())
        assert stored is not None, "no lease was handed out yet"
        secret = bytes.fromhex(stored.decode())
    raw = _payload({**parts(lease_id), **changes})
    return f"{b64(raw)}.{b64(hmac.new(secret, DOMAIN + raw, hashlib.sha256).digest())}"


def unsigned(shard: int, task_id: str, epoch: str, worker: str) -> str:
    """A lease id as they were before they were signed: readable JSON, nothing else."""
    return b64(json.dumps([shard, task_id, epoch, worker]).encode())
