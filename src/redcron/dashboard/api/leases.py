"""The ``lease_id`` of the HTTP worker protocol: a lease token nobody can forge.

A ``lease_id`` reads ``<payload>.<signature>``: the payload is base64url JSON of
``[shard, task id, epoch, worker id, leaser]`` (``leaser``: the id of the API
token that took the lease, or ``admin``), and the signature is base64url
HMAC-SHA256 of that payload under the deployment's lease secret (kept in
Redis, :func:`redcron.store.shared_secrets.lease_secret`, cached here per
Flask app).  Every part is readable, none is a capability: without the secret
no one can make a lease id for a lease they were not handed, so knowing a
worker's id or a task's epoch is not enough to report on its attempt.

:func:`verify` checks the signature (``hmac.compare_digest``) and the caller
before a route writes anything:

* not a lease id at all (not ``<base64url>.<base64url>``): 400 naming the field;
* a bad signature (tampered, made up, or signed under another deployment's or
  a deleted secret): 403 ``forbidden``;
* a genuine lease id that another token leased: 403 ``forbidden``.  The
  signature binds the leasing token's id, and only that token (or the admin)
  may report on the lease: a second token, even one with the same queues and
  tenants, is refused, since scopes can be re-issued and the id is what the
  token store keeps;
* a genuine lease id whose attempt is over (reaped, superseded, reported):
  the broker's fencing answers it, 409 ``lease_lost`` (``worker.py``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from typing import NoReturn

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import ApiError, bad, redcron_app
from redcron.store import lease_secret

#: the ``leaser`` of a lease the admin token took (token ids are hex: never this)
ADMIN_LEASER = "admin"
#: ``flask.current_app.extensions`` key of the cached lease secret
SECRET_CACHE = "redcron.lease_secret"
#: what the HMAC covers before the payload, so no other signed text can pass for one
_DOMAIN = b"redcron lease v1\n"

WORKER_ID = re.compile(r"[A-Za-z0-9_.:@\-]{1,128}")
_B64_CHAR = r"[A-Za-z0-9_\-]"
#: base64url without padding in its one spelling: the last character of a partial
#: group carries no unused bits (``AQ``, never ``AR``, for one byte)
_B64 = re.compile(
    rf"(?:{_B64_CHAR}{{4}})*(?:{_B64_CHAR}{{4}}|{_B64_CHAR}[AQgw]|{_B64_CHAR}{{2}}[AEIMQUYcgkosw048])"
)
#: the most characters a lease_id may have
MAX_LEASE_ID = 1024
#: what a lease_id looks like (GET /v1/openapi.json): whether it is genuine only
#: the signature check tells (403)
LEASE_ID_SCHEMA: dict[str, object] = {
    "type": "string",
    "maxLength": MAX_LEASE_ID,
    "pattern": f"^{_B64.pattern}\\.{_B64.pattern}$",
    "description": "a lease_id exactly as POST /v1/worker/lease returned it",
}
_MALFORMED = "malformed lease_id: pass it back exactly as the lease returned it"


@dataclass(frozen=True, slots=True)
class LeaseToken:
    """What a ``lease_id`` carries: the full fencing token of one attempt, and who
    leased it (an API token id, or :data:`ADMIN_LEASER`)."""

    shard: int
    task_id: str
    epoch: str
    worker: str
    leaser: str

    def encode(self) -> str:
        """The signed ``lease_id``."""
        raw = json.dumps(
            [self.shard, self.task_id, self.epoch, self.worker, self.leaser], separators=(",", ":")
        ).encode()
        secret = _secret(create=True)
        assert secret is not None  # made if missing
        return f"{_b64(raw)}.{_b64(_mac(secret, raw))}"


def leaser() -> str:
    """Who the request is, as a lease records it."""
    who = auth.current()
    if who.kind == "admin":
        return ADMIN_LEASER
    if who.kind == "worker" and who.token_id:
        return who.token_id
    # authenticate() lets no one else reach the worker routes; never guess an identity
    _forbidden(None, "the worker routes need a worker token")


def verify(value: object, field: str = "lease_id") -> LeaseToken:
    """The lease token ``value`` carries, once its signature and the caller check out.

    Raises the 400 or 403 :class:`ApiError` the module docstring lists; nothing is
    read from or written to a task before this returns.
    """
    if not isinstance(value, str) or not value or len(value) > MAX_LEASE_ID:
        bad(field, "must be a lease_id string as returned by POST /v1/worker/lease")
    payload_text, dot, signature_text = value.partition(".")
    raw, signature = _unb64(payload_text), _unb64(signature_text)
    if not dot or raw is None or signature is None:
        bad(field, _MALFORMED)
    secret = _secret(create=False)
    if secret is None or not hmac.compare_digest(signature, _mac(secret, raw)):
        _forbidden(
            field,
            "this lease_id was not issued by this deployment or was altered: "
            "pass it back exactly as the lease returned it; nothing was written",
        )
    token = _parse(raw, field)
    if auth.current().kind != "admin" and token.leaser != leaser():
        _forbidden(
            field,
            f"the lease on task {token.task_id} was taken with another token; only the "
            "token that leased it reports on it; nothing was written",
        )
    return token


def _parse(raw: bytes, field: str) -> LeaseToken:
    try:
        shard, task_id, epoch, worker, by = json.loads(raw)
    except (ValueError, TypeError):
        bad(field, _MALFORMED)
    # signed by us, so well-formed unless the format changed under it: checked anyway
    if not (
        isinstance(shard, int)
        and not isinstance(shard, bool)
        and shard >= 0
        and isinstance(task_id, str)
        and task_id.startswith(f"{shard}-")
        and isinstance(epoch, str)
        and epoch.isascii()
        and epoch.isdigit()
        and isinstance(worker, str)
        and WORKER_ID.fullmatch(worker)
        and isinstance(by, str)
        and by
    ):
        bad(field, _MALFORMED)
    return LeaseToken(shard, task_id, epoch, worker, by)


def _forbidden(field: str | None, message: str) -> NoReturn:
    raise ApiError(403, "forbidden", message, field)


def _secret(create: bool) -> bytes | None:
    """The deployment's lease secret, read from Redis once per app (it never changes
    unless an operator deletes it, which voids every lease id out there).  Only a
    lease (``create``) makes it: a refused report writes nothing, not even this."""
    cache = flask.current_app.extensions
    key: bytes | None = cache.get(SECRET_CACHE)
    if key is None:
        key = lease_secret(redcron_app().broker, create)
        if key is not None:
            cache[SECRET_CACHE] = key
    return key


def _mac(secret: bytes, raw: bytes) -> bytes:
    return hmac.new(secret, _DOMAIN + raw, hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes | None:
    """Strict base64url: only its alphabet, no padding, and the one spelling of its
    bytes (so no two lease ids differ in text but not in what they say)."""
    if not _B64.fullmatch(text):
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw if _b64(raw) == text else None
