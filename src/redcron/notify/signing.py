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
import math

SIGNATURE_HEADER = "X-Redcron-Signature"
TIMESTAMP_HEADER = "X-Redcron-Timestamp"
DELIVERY_HEADER = "X-Redcron-Delivery"
EVENT_HEADER = "X-Redcron-Event"
#: how old a signed timestamp a receiver takes by default (seconds)
TOLERANCE_S = 300
#: digits a timestamp header may have (unix seconds need 10 until 2286); a longer
#: one is refused before ``int()``, which raises past 4,300 digits and is slow before
TIMESTAMP_DIGITS = 12


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
    receiver runs (in constant time) before it trusts a delivery.

    Every malformed input is False, never an exception: a receiver passes header
    values an attacker chose (non-ASCII, thousands of digits, absent: None).
    """
    if not isinstance(signature, str) or not signature.isascii():
        return False  # hmac.compare_digest raises TypeError on a non-ASCII str
    if (
        not isinstance(timestamp, str)
        or not 0 < len(timestamp) <= TIMESTAMP_DIGITS
        or not timestamp.isascii()
        or not timestamp.isdigit()
    ):
        return False
    if not isinstance(body, bytes | bytearray | memoryview) or not isinstance(secret, str):
        return False
    if not isinstance(now_s, int | float) or not math.isfinite(now_s):
        return False  # abs(nan - t) > tolerance is False: a NaN clock would take any time
    if abs(now_s - int(timestamp)) > tolerance_s:
        return False
    try:
        expected = sign(secret, int(timestamp), bytes(body))
    except UnicodeEncodeError:  # a secret holding a lone surrogate
        return False
    return hmac.compare_digest(expected, signature)
