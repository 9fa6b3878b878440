"""``/login`` (a token, or a one-time link from ``redcron up``) and ``/logout``."""

from __future__ import annotations

import flask

from redcron.dashboard.ui import render, session
from redcron.dashboard.ui.render import Reply

bp = flask.Blueprint("login", __name__)

#: endpoints reachable without a session
PUBLIC_ENDPOINTS = frozenset({"ui.login.form", "ui.login.submit", "ui.login.once", "ui.static"})


@bp.get("/login")
def form() -> Reply:
    session.csrf_token()  # the login form itself carries one
    return render.page("login.html", title="Log in", next=flask.request.args.get("next", ""))


@bp.post("/login")
def submit() -> Reply:
    target = flask.request.form.get("next", "")
    who = session.login_with_token(flask.request.form.get("token", ""))
    if isinstance(who, str):
        return render.page("login.html", title="Log in", status=401, error=who, next=target)
    session.start(who)
    return flask.redirect(session.safe_next(target), code=303)


@bp.get("/login/once/<code>")
def once(code: str) -> Reply:
    who = session.login_with_link(code)
    if who is None:
        session.csrf_token()
        return render.page(
            "login.html",
            title="Log in",
            status=401,
            error="This login link was already used or has expired (links work once, for "
            "15 minutes). Log in with a token, or restart `redcron up` for a new link.",
            next="",
        )
    session.start(who)
    return render.go("ui.overview.index")


@bp.post("/logout")
def logout() -> Reply:
    session.end()
    return render.go("ui.login.form")
