"""One-time dashboard login links and the dashboard's session secret.

``redcron up`` makes an admin token for the dashboard it starts and prints a
link ``/login/once/<code>`` (as Jupyter prints its token URL): the code is a
random key in Redis naming the identity it logs in as; the first visit
consumes it (``GETDEL``), and an unused one expires.  Only the SHA-256 of the
code is stored, so a dump of Redis cannot be replayed as a login.

The session secret signs the dashboard's cookies; it is made once in Redis
(``SET NX``, :mod:`redcron.store.shared_secrets`) so that every dashboard
replica and restart accepts the same sessions.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from redcron.serde import text as _s
from redcron.store.shared_secrets import session_secret
from redcron.store.tokens import digest

if TYPE_CHECKING:
    from redcron.engine.core import Core

#: seconds an unused login link stays valid
LINK_TTL_S = 15 * 60
CODE_BYTES = 32


class LoginLinks:
    """Create and consume one-time login codes (admin only, today)."""

    def __init__(self, broker: Core) -> None:
        self.broker = broker

    def create(self, ttl_s: int = LINK_TTL_S) -> str:
        """A new one-time code logging in as admin; valid for ``ttl_s`` seconds."""
        code = secrets.token_urlsafe(CODE_BYTES)
        self.broker.client.set(self.broker.keys.login(digest(code)), "admin", ex=ttl_s)
        return code

    def consume(self, code: str) -> str | None:
        """The identity kind ``code`` logs in as, once; None if unknown, used or expired."""
        if not code or len(code) > 128:
            return None
        value = self.broker.client.getdel(self.broker.keys.login(digest(code)))
        return _s(value) if value is not None else None

    def session_secret(self) -> str:
        """The shared secret that signs session cookies (made on first use)."""
        return session_secret(self.broker)
