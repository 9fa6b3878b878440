"""Who is logged in to the HTML dashboard, and the CSRF token of their forms.

A person logs in with a token (admin or tenant; worker tokens are refused) or
with a one-time link from ``redcron up`` (:class:`LoginLinks`).  The session
is Flask's signed cookie (``HttpOnly``, ``SameSite=Lax``), keyed by the secret
:meth:`LoginLinks.session_secret` keeps in Redis, and holds no token: for a
stored token (a tenant's, or an extra admin token) the token's id, read back
on every request (so revoking the token ends its sessions on the next request,
and its role is the token's, never the cookie's), for the configured admin
token a fingerprint of it (so a new admin token, as every ``redcron up``
makes, ends the old sessions).

Every state-changing request carries the session's CSRF token, in the form
field ``csrf_token`` or the header ``X-CSRF-Token``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any

import flask
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from itsdangerous import URLSafeTimedSerializer

from redcron.app import App
from redcron.dashboard.api import auth
from redcron.dashboard.api.common import EXTENSION, redcron_app
from redcron.engine import UNAVAILABLE
from redcron.errors import NotFound
from redcron.store import LoginLinks, TokenStore

#: how long a login lasts without being renewed by use
SESSION_LIFETIME = timedelta(hours=12)
COOKIE_NAME = "redcron_session"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


#: ``flask.g`` key: why this request's session could not be opened
_UNOPENED = "redcron_session_error"


class RedisSecretSessions(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, signed with the secret kept in Redis
    (read on the first request, unless ``SECRET_KEY`` is configured)."""

    def get_signing_serializer(self, app: flask.Flask) -> URLSafeTimedSerializer | None:
        if not app.secret_key:
            redcron: App = app.extensions[EXTENSION]
            app.secret_key = LoginLinks(redcron.broker).session_secret()
        return super().get_signing_serializer(app)

    def open_session(self, app: flask.Flask, request: flask.Request) -> SecureCookieSession | None:
        # Flask opens the session before any handler can catch what it raises (an
        # error here is a logged 500): with Redis down, keep the error for
        # :func:`opened` and give a null session, which pages never get past
        try:
            return super().open_session(app, request)
        except UNAVAILABLE as exc:
            flask.g.setdefault(_UNOPENED, exc)
            return None


def opened() -> None:
    """Raise the error that kept this request's session from opening, if any
    (a page cannot be served without it; the API and ``/metrics`` need none)."""
    exc = flask.g.pop(_UNOPENED, None)
    if exc is not None:
        raise exc


def configure(web: flask.Flask) -> None:
    """Cookie settings (``create_app``'s config may override them later); the
    signing secret comes from Redis on first use."""
    web.session_interface = RedisSecretSessions()
    web.config["SESSION_COOKIE_NAME"] = COOKIE_NAME
    web.config["SESSION_COOKIE_HTTPONLY"] = True
    web.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    web.config["PERMANENT_SESSION_LIFETIME"] = SESSION_LIFETIME


def _admin_fingerprint() -> str | None:
    admin = flask.current_app.config.get(auth.ADMIN_DIGEST)
    if not admin:
        return None
    key = str(flask.current_app.secret_key).encode()
    return hmac.new(key, admin.encode(), hashlib.sha256).hexdigest()[:32]


def start(who: auth.Identity) -> None:
    """Log ``who`` in: a fresh session (nothing of the old one kept) with a new CSRF token."""
    flask.session.clear()
    flask.session.permanent = True
    data: dict[str, Any] = {"kind": who.kind, CSRF_FIELD: secrets.token_urlsafe(32)}
    if who.kind == "admin" and who.token_id is None:
        data["fp"] = _admin_fingerprint()
    else:
        data["tenant"] = who.tenant
        data["tid"] = who.token_id
    flask.session.update(data)


def end() -> None:
    flask.session.clear()


def identity() -> auth.Identity | None:
    """The logged-in identity, or None (no session, or its token is gone)."""
    kind = flask.session.get("kind")
    if kind == "admin" and "tid" not in flask.session:
        fp = _admin_fingerprint()
        ok = fp is not None and hmac.compare_digest(fp, str(flask.session.get("fp", "")))
        return auth.ADMIN if ok else None
    if kind in ("admin", "tenant"):
        token_id, tenant = flask.session.get("tid"), flask.session.get("tenant")
        if not isinstance(token_id, str) or (kind == "tenant" and not isinstance(tenant, str)):
            return None
        try:
            info = TokenStore(redcron_app().broker).get(token_id)
        except NotFound:
            return None  # revoked
        if info.kind != kind or info.tenant != tenant:
            return None
        return auth.from_token(info)
    return None


def login_with_token(token: str) -> auth.Identity | str:
    """The identity to log in as, or why not (a sentence for the login page)."""
    who = auth.identify(token.strip()) if token.strip() else None
    if who is None:
        return "that token is not valid (mistyped, revoked, or for another deployment)"
    if who.kind == "worker":
        return "worker tokens are for the worker protocol; log in with an admin or tenant token"
    return who


def login_with_link(code: str) -> auth.Identity | None:
    kind = LoginLinks(redcron_app().broker).consume(code)
    if kind == "admin" and _admin_fingerprint() is not None:
        return auth.ADMIN
    return None


def csrf_token() -> str:
    """This session's CSRF token (made for a visitor who has none yet)."""
    token = flask.session.get(CSRF_FIELD)
    if not isinstance(token, str) or not token:
        token = secrets.token_urlsafe(32)
        flask.session[CSRF_FIELD] = token
    return token


def csrf_ok() -> bool:
    want = flask.session.get(CSRF_FIELD)
    given = flask.request.form.get(CSRF_FIELD) or flask.request.headers.get(CSRF_HEADER) or ""
    return isinstance(want, str) and bool(want) and hmac.compare_digest(want, given)


def safe_next(target: str | None) -> str:
    """Where to go after logging in: a path on this site, never another host."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return flask.url_for("ui.overview.index")
    return target
