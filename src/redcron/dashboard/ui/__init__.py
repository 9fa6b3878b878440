"""The HTML dashboard: server-rendered pages over the same stores as the API.

One blueprint per page module (overview, jobs, runs, dlq, tenants, workers,
tasks, login), nested in :data:`ui` at ``/``.  Before each request the
session's identity becomes ``flask.g.identity`` (so the API's ``auth``
helpers decide what a tenant may see, exactly as for the API), requests with
no session go to the login page, and state-changing requests without the
session's CSRF token are refused, as are a viewer's (403; the pages show a
viewer no button or form to send them).  Every state-changing request of a
logged-in person is recorded (``api/actions.py``), as the API's are.
Templates live in ``../templates/ui``, static files (``app.js``, CSS) in
``../static``; nothing is fetched from elsewhere.  ``charts.py`` draws the
SVG charts, ``dag.py`` the run DAG.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flask
from werkzeug.exceptions import HTTPException

from redcron.dashboard.api import actions
from redcron.dashboard.api.auth import refuse_viewer
from redcron.dashboard.api.common import ANSWERS, ApiError
from redcron.dashboard.api.common import http_error as api_http_error
from redcron.dashboard.ui import (
    audit,
    channels,
    dlq,
    jobs,
    login,
    overview,
    render,
    runs,
    session,
    tasks,
    tenants,
    workers,
)
from redcron.dashboard.ui.render import Reply
from redcron.engine import UNAVAILABLE
from redcron.errors import ValidationError

ui = flask.Blueprint(
    "ui",
    __name__,
    template_folder="../templates",
    static_folder="../static",
    static_url_path="/static",
)
for part in (
    login.bp,
    overview.bp,
    jobs.bp,
    runs.bp,
    dlq.bp,
    channels.bp,
    tenants.bp,
    workers.bp,
    tasks.bp,
    audit.bp,
):
    ui.register_blueprint(part)
ui.after_request(actions.after_request)

#: sent with every page: nothing but this site's own scripts, styles and frames
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


@ui.before_request
def load_identity() -> Reply | None:
    session.opened()  # the session's secret is read from Redis, which may be down
    endpoint = flask.request.endpoint or ""
    if flask.request.method in session.UNSAFE_METHODS and not session.csrf_ok():
        return error_page(
            400,
            "This form expired or did not come from this dashboard (no valid CSRF token). "
            "Reload the page and try again.",
        )
    if endpoint in login.PUBLIC_ENDPOINTS:
        return None
    who = session.identity()
    if who is None:
        if render.is_live():
            return flask.Response("log in again\n", status=401, mimetype="text/plain")
        target = flask.request.full_path.rstrip("?")
        return render.go("ui.login.form", next=target)
    flask.g.identity = who
    refused = None if endpoint in actions.UNRECORDED else refuse_viewer()
    if refused is not None:
        return error_page(403, f"Not allowed: {refused}.")
    return None


@ui.after_request
def security_headers(response: flask.Response) -> Reply:
    for key, value in SECURITY_HEADERS.items():
        response.headers.setdefault(key, value)
    if response.mimetype == "text/html":
        response.headers["Cache-Control"] = "no-store"
    return response


@ui.app_context_processor
def identity_context() -> dict[str, Any]:
    return {"who": flask.g.get("identity")}


def error_page(status: int, message: str) -> Reply:
    if flask.has_request_context():
        actions.note(detail=message)  # the action record says why it failed
    return render.page("error.html", title=f"Error {status}", status=status, message=message)


@ui.errorhandler(ValidationError)
def invalid(exc: ValidationError) -> Reply:
    return error_page(400, str(exc))


@ui.errorhandler(ApiError)
def api_error(exc: ApiError) -> Reply:
    return error_page(exc.status, f"{exc.field}: {exc.message}" if exc.field else exc.message)


def _page_for(status: int) -> Callable[[Exception], Reply]:
    return lambda exc: error_page(status, str(exc))


# NotFound 404, Conflict 409, QuotaExceeded 429, Forbidden 403, Rejected 400:
# the statuses the API answers them with
for _exc_type, _status, _code in ANSWERS:
    ui.register_error_handler(_exc_type, _page_for(_status))


@ui.errorhandler(HTTPException)
def http_error(exc: HTTPException) -> Reply:
    return error_page(exc.code or 500, exc.description or exc.name or "error")


def wants_page() -> bool:
    """Whether an error is answered with a page (a browser, off the API) rather
    than the API's JSON error (the API, ``/metrics``, clients that do not ask
    for HTML)."""
    request = flask.request
    api = request.path.startswith(("/v1/", "/metrics"))
    return not api and request.accept_mimetypes.accept_html


def unknown_path(exc: HTTPException) -> Reply:
    """A path no route serves: a page for a browser, the API's JSON error otherwise."""
    request = flask.request
    if not wants_page():
        return api_http_error(exc)
    try:
        who = session.identity()  # the menu, if logged in
    except UNAVAILABLE:
        who = None  # the path is unknown all the same; Redis need not answer for that
    flask.g.identity = who
    where = "The pages are in the menu above." if who else "Log in at /login to see the pages."
    return error_page(404, f"There is no page {request.path}. {where}")


def init_ui(web: flask.Flask) -> None:
    """Mount the dashboard pages on ``web``."""
    session.configure(web)
    render.install(web)
    web.register_blueprint(ui)
    web.register_error_handler(404, unknown_path)


__all__ = ["error_page", "init_ui", "wants_page"]
