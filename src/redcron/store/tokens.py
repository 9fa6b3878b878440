"""API tokens in Redis: create, list, revoke, and check a presented token.

A token reads ``<id>.<secret>``: the id names its hash ``keys.token(id)``
(shown by ``list``, used by ``revoke``), the secret is 256 random bits from
:func:`secrets.token_urlsafe`.  Only the SHA-256 of the whole token is
stored (a fast hash is enough for a secret that cannot be guessed), and a
presented token is compared with :func:`hmac.compare_digest`.  Nothing here
logs a token.

Admin and tenant tokens carry a role (field ``role``): ``operator`` may do
what its scope allows, ``viewer`` only reads.  A token stored without the field
(made before roles existed) is an operator, so upgrading changes no one's
rights.  Worker tokens have no role: the worker protocol is theirs alone.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from redcron.errors import NotFound, ValidationError
from redcron.model import TokenInfo, validation
from redcron.model.records import from_ms
from redcron.serde import text as _s

if TYPE_CHECKING:
    from redcron.engine.core import Core

KINDS = ("admin", "tenant", "worker")
VIEWER, OPERATOR = "viewer", "operator"
#: what an admin or tenant token may do: read only, or read and change
ROLES = (VIEWER, OPERATOR)
#: random bytes behind an id (public) and a secret
ID_BYTES = 6
SECRET_BYTES = 32
_ID = re.compile(f"[0-9a-f]{{{2 * ID_BYTES}}}")


def digest(token: str) -> str:
    """The stored form of a token (hex SHA-256)."""
    return hashlib.sha256(token.encode()).hexdigest()


def _names(field: str, values: Sequence[str]) -> tuple[str, ...]:
    return tuple(validation.name(field, v) for v in values)


def check_role(value: object) -> str:
    """A token role as given (``viewer`` or ``operator``); a clear error otherwise."""
    if value not in ROLES:
        raise ValidationError("role", f"{value!r} is not a role; use one of {', '.join(ROLES)}")
    return str(value)


class TokenStore:
    """Extra admin, tenant and worker API tokens (the admin token given to the
    dashboard is configuration, not stored)."""

    def __init__(self, broker: Core) -> None:
        self.broker = broker
        self.keys = broker.keys

    def _create(self, fields: Mapping[str, str]) -> tuple[TokenInfo, str]:
        token_id = secrets.token_hex(ID_BYTES)
        token = f"{token_id}.{secrets.token_urlsafe(SECRET_BYTES)}"
        created = self.broker.server_ms()
        pipe = self.broker.client.pipeline(transaction=True)
        record = {**fields, "id": token_id, "created": str(created), "sha256": digest(token)}
        # a fresh dict: redis-py types mapping with its own (invariant) key type
        pipe.hset(self.keys.token(token_id), mapping={k: v for k, v in record.items()})
        pipe.zadd(self.keys.tokens(), {token_id: created})
        pipe.execute()
        return _info(record, token_id), token

    def create_tenant(self, tenant: str, role: str = OPERATOR) -> tuple[TokenInfo, str]:
        """A token that sees (and, as an ``operator``, changes) only ``tenant``;
        returns it with its secret, which is shown this once and never stored."""
        return self._create(
            {
                "kind": "tenant",
                "tenant": validation.name("tenant", tenant),
                "role": check_role(role),
            }
        )

    def create_admin(self, role: str = VIEWER) -> tuple[TokenInfo, str]:
        """An extra admin token: sees every tenant; an ``operator`` also changes
        everything the configured admin token may (a ``viewer``, the default, only
        reads).  Returned with its secret, shown this once."""
        return self._create({"kind": "admin", "role": check_role(role)})

    def create_worker(
        self, queues: Sequence[str], tenants: Sequence[str] = ()
    ) -> tuple[TokenInfo, str]:
        """A token for the worker routes, limited to ``queues`` and (if given) ``tenants``."""
        if not queues:
            raise ValidationError("queues", "a worker token needs at least one queue")
        return self._create(
            {
                "kind": "worker",
                "queues": ",".join(_names("queue", queues)),
                "tenants": ",".join(_names("tenant", tenants)),
            }
        )

    def get(self, token_id: str) -> TokenInfo:
        raw = self.broker.client.hgetall(self.keys.token(token_id)) if token_id else {}
        if not raw:
            raise NotFound(f"no token {token_id!r}")
        return _info(raw, token_id)

    def list(self, kind: str | None = None, tenant: str | None = None) -> list[TokenInfo]:
        """Tokens oldest first, of one kind and (tenant tokens) one tenant if given."""
        ids = [_s(i) for i in self.broker.client.zrange(self.keys.tokens(), 0, -1)]
        pipe = self.broker.client.pipeline(transaction=False)
        for token_id in ids:
            pipe.hgetall(self.keys.token(token_id))
        out = []
        for token_id, raw in zip(ids, pipe.execute(), strict=True):
            if not raw:
                continue  # revoked between the two reads
            info = _info(raw, token_id)
            if (kind is None or info.kind == kind) and (tenant is None or info.tenant == tenant):
                out.append(info)
        return out

    def revoke(self, token_id: str) -> TokenInfo:
        """Delete a token: requests carrying it get 401 from the next one on."""
        info = self.get(token_id)
        pipe = self.broker.client.pipeline(transaction=True)
        pipe.delete(self.keys.token(token_id))
        pipe.zrem(self.keys.tokens(), token_id)
        pipe.execute()
        return info

    def verify(self, token: str) -> TokenInfo | None:
        """The token's record if ``token`` is a live token, else None."""
        token_id, dot, secret = token.partition(".")
        if not dot or not secret or not _ID.fullmatch(token_id):
            return None
        # one read: the hash holds the digest to check and the record to return
        raw = self.broker.client.hgetall(self.keys.token(token_id))
        stored = raw.get(b"sha256")
        if stored is None or not hmac.compare_digest(_s(stored), digest(token)):
            return None
        return _info(raw, token_id)


def _split(value: str) -> tuple[str, ...]:
    return tuple(v for v in value.split(",") if v)


def _info(raw: Mapping[Any, Any], token_id: str) -> TokenInfo:
    """A token's record from its hash (as Redis answers it, or as written);
    fields missing or garbled (edited by hand) read as empty, so a request with
    the token is a 401, not a 500."""
    fields = {_s(k): _s(v) for k, v in raw.items()}
    kind = fields.get("kind", "")
    created = fields.get("created", "")
    # no role field: a token made before roles existed, an operator; a garbled one
    # (edited by hand) reads as a viewer, never as more than it says
    stored = fields.get("role", OPERATOR)
    role_of = (stored if stored in ROLES else VIEWER) if kind in ("admin", "tenant") else ""
    return TokenInfo(
        id=token_id,
        kind=kind,
        tenant=fields.get("tenant") or None,
        queues=_split(fields.get("queues", "")),
        tenants=_split(fields.get("tenants", "")),
        created_at=from_ms(int(created)) if created.isascii() and created.isdigit() else None,
        role=role_of,
    )
