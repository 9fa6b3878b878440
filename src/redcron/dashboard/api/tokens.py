"""``/v1/tokens``: the admin mints, lists and revokes API tokens (what ``redcron
tenants token``, ``redcron admin token`` and ``redcron workers token`` do), so
that setting a tenant up needs no shell on the server.

Admin only: a tenant or worker token is refused with 403 (a worker token by
:func:`redcron.dashboard.api.authenticate` already), and minting or revoking
needs the operator role.  A token's secret is in the reply that creates it,
once; Redis keeps its SHA-256 only (:class:`redcron.engine.TokenStore`), and
no listing, audit entry or log holds it.  Creating and revoking are recorded
in the action record (``token.create``, ``token.revoke``) with the token's id,
kind and role, as the CLI records them.
"""

from __future__ import annotations

from typing import Any

import flask

from redcron.dashboard.api import actions, auth
from redcron.dashboard.api.common import bad, body, redcron_app, reply
from redcron.dashboard.api.operation import Operation, Routes, link, paged
from redcron.dashboard.api.params import (
    LIMIT,
    MS,
    ChoiceParam,
    CursorParam,
    Json,
    NameParam,
    body_schema,
)
from redcron.dashboard.api.record_schema import ref
from redcron.model import TokenInfo, validation
from redcron.model.records import epoch_ms
from redcron.store import OPERATOR, ROLES, VIEWER, TokenStore
from redcron.store import TOKEN_KINDS as KINDS

bp = Routes("tokens", __name__)

#: the query of GET /v1/tokens (and LIMIT)
CURSOR = CursorParam("tokens", (MS, "[0-9a-f]{12}"), "created ms:token id")
KIND = ChoiceParam("kind", KINDS, "Only tokens of this kind")
TENANT = NameParam("tenant", "Only this tenant's tokens")

_names: Json = {"type": "array", "items": validation.name_schema(), "uniqueItems": True}


def _kind(kind: str, fields: Json, required: tuple[str, ...] = ()) -> Json:
    schema = body_schema({"kind": {"type": "string", "const": kind}, **fields},
                         ("kind", *required))  # fmt: skip
    schema["title"] = f"{kind.capitalize()}TokenBody"
    return schema


#: ``POST /v1/tokens``'s body: one of the three kinds, each with its own fields
BODY: Json = {
    "oneOf": [
        _kind("tenant", {"tenant": validation.name_schema(),
                         "role": {"type": "string", "enum": list(ROLES), "default": OPERATOR}},
              ("tenant",)),
        _kind("admin", {"role": {"type": "string", "enum": list(ROLES), "default": VIEWER}}),
        _kind("worker", {"queues": {**_names, "minItems": 1},
                         "tenants": {**_names, "default": [],
                                     "description": "the tenants it may serve (none: all)"}},
              ("queues",)),
    ],
    "discriminator": {"propertyName": "kind"},
}  # fmt: skip
#: kind -> the fields its body may hold
_FIELDS: dict[str, set[str]] = {
    s["properties"]["kind"]["const"]: set(s["properties"]) for s in BODY["oneOf"]
}


def _store() -> TokenStore:
    return TokenStore(redcron_app().broker)


def _names_of(data: dict[str, Any], field: str) -> list[str]:
    value = data.get(field, [])
    if not isinstance(value, list):
        bad(field, "must be a list of names")
    names = [validation.name(f"{field}[{i}]", v) for i, v in enumerate(value)]
    if len(set(names)) != len(names):
        bad(field, "names a queue or tenant twice")
    return names


def _create(data: dict[str, Any]) -> tuple[TokenInfo, str]:
    kind = data.get("kind")
    if kind not in KINDS:
        bad("kind", f"{kind!r} is not a token kind; use one of {', '.join(KINDS)}")
    unknown = set(data) - _FIELDS[kind]
    if unknown:
        bad(sorted(unknown)[0], f"not a field of a {kind} token; its fields: "
            f"{', '.join(sorted(_FIELDS[kind]))}")  # fmt: skip
    store = _store()
    if kind == "tenant":
        if "tenant" not in data:
            bad("tenant", "a tenant token needs its tenant")
        return store.create_tenant(data["tenant"], data.get("role", OPERATOR))
    if kind == "admin":
        return store.create_admin(data.get("role", VIEWER))
    queues = _names_of(data, "queues")
    if not queues:
        bad("queues", "a worker token needs at least one queue")
    return store.create_worker(queues, _names_of(data, "tenants"))


@bp.post(
    "/tokens",
    doc=Operation(
        "create_token",
        "Mint an API token (admin operator only): a tenant's, an extra admin's or a "
        "worker's; the secret is in this reply, once",
        ref("TokenCreated"),
        ok="201",
        body=ref("TokenBody"),
        links={"RevokeToken": link("revoke_token", {"token_id": "$response.body#/token/id"})},
    ),
)
def create_token() -> flask.Response:
    """Mint a token: 201 ``{"token": {...}, "secret": "<id>.<secret>"}``, the secret
    shown this once."""
    auth.admin_only("creating API tokens")
    info, secret = _create(body())
    auth.note_tenant(info.tenant)
    detail = f"kind={info.kind}" + (f" role={info.role}" if info.role else "")
    actions.note([info.id], detail)
    return reply({"token": info, "secret": secret}, 201)


@bp.get(
    "/tokens",
    doc=Operation(
        "list_tokens",
        "API tokens, oldest first, a page at a time (admin tokens): never a secret",
        paged("tokens", ref("Token")),
        query=(KIND, TENANT, LIMIT, CURSOR),
    ),
)
def list_tokens() -> flask.Response:
    """Tokens oldest first, a page at a time; never a secret.  The store reads every
    token (there are few: people's and workers', not per request) and the page is
    cut here, keyed by (creation, id) so a revoked one shifts nothing."""
    auth.admin_reads("listing API tokens")
    kind, tenant, limit, key = KIND.read(), TENANT.read(), LIMIT.read(), CURSOR.read()
    after = (int(key[0]), key[1]) if key is not None else None
    found = [t for t in _store().list(kind, tenant) if after is None or _position(t) > after]
    page = found[:limit]
    nxt = CURSOR.encode(*_position(page[-1])) if len(found) > limit else None
    return reply({"tokens": page, "next_cursor": nxt})


def _position(token: TokenInfo) -> tuple[int, str]:
    """Where a token stands in the listing (by creation, then id), for the cursor."""
    return (epoch_ms(token.created_at) if token.created_at else 0, token.id)


@bp.delete(
    "/tokens/<token_id>",
    doc=Operation(
        "revoke_token",
        "Revoke a token (admin operator only): the next request with it is a 401",
        ref("Token"),
        errors=("404",),
    ),
)
def revoke_token(token_id: str) -> flask.Response:
    """Revoke a token (the next request with it is a 401): 200 the token as it was."""
    auth.admin_only("revoking API tokens")
    info = _store().revoke(token_id)
    auth.note_tenant(info.tenant)
    actions.note(detail=f"kind={info.kind}")
    return reply(info)
