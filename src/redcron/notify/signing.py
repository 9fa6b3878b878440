"""The signature of a webhook delivery, and its check on the receiving side.

Every webhook POST carries::

    X-Redcron-Delivery:  <delivery id>   (the same on every retry: deduplicate on it)
    X-Redcron-Timestamp: <unix seconds when this attempt was signed>
    X-Redcron-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>

The timestamp is inside the MAC, so a captured request replayed later fails a
receiver that refuses old timestamps (:func:`verify`'s ``tolerance_s``).
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Redcron-Signature"
TIMESTAMP_HEADER = "X-Redcron-Timestamp"
DELIVERY_HEADER = "X-Redcron-Delivery"
EVENT_HEADER = "X-Redcron-Event"
#: how old a signed timestamp a receiver takes by default (seconds)
TOLERANCE_S = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Redcron-Signature`` value for ``body`` signed at ``timestamp``."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(
    secret: str,
    body: bytes,
    signature: str,
    timestamp: str,
    now_s: float,
    tolerance_s: float = TOLERANCE_S,
) -> bool:
    """Whether a request's signature and timestamp headers fit its body: what a
    receiver runs (in constant time) before it trusts a delivery."""
    if not timestamp.isascii() or not timestamp.isdigit():
        return False
    if abs(now_s - int(timestamp)) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, int(timestamp), body), signature)
