"""Deployment-wide secrets kept in Redis: made once (``SET NX``) by whichever
process needs one first, so every dashboard replica and restart shares it.

Two live here: the key that signs dashboard session cookies
(``Keys.session_secret()``) and the key that signs the HTTP worker protocol's
lease ids (``Keys.lease_secret()``).  Neither is ever logged or shown.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core

#: random bytes behind each secret (hex-encoded in Redis)
SECRET_BYTES = 32


def shared_secret(broker: Core, key: str) -> str:
    """The secret stored at ``key``, made on first use; the first writer wins a race
    (``SET NX``), so every caller gets the same value."""
    client = broker.client
    client.set(key, secrets.token_hex(SECRET_BYTES), nx=True)
    value = client.get(key)
    assert value is not None  # just set, and never expires
    return _s(value)


def session_secret(broker: Core) -> str:
    """The key that signs dashboard session cookies."""
    return shared_secret(broker, broker.keys.session_secret())


def lease_secret(broker: Core, create: bool = True) -> bytes | None:
    """The HMAC key that signs lease ids of the HTTP worker protocol.

    ``create=False`` only reads it (None: not made yet), so checking a lease id
    never writes: with no key yet, no lease id can be genuine.
    """
    key = broker.keys.lease_secret()
    if create:
        return bytes.fromhex(shared_secret(broker, key))
    value = broker.client.get(key)
    return None if value is None else bytes.fromhex(_s(value))
