"""The JSON API, ``/v1``: jobs, runs, one-off tasks, tenants and their DLQ.

Every route module holds one blueprint; this one nests them under ``/v1`` and
runs :func:`authenticate` before each request.  ``openapi.py`` describes the
routes, and a test keeps it and the URL map in step.
"""

from __future__ import annotations

import flask

from redcron.dashboard.api import jobs, openapi, runs, tasks, tenants, worker

api = flask.Blueprint("api", __name__, url_prefix="/v1")
for part in (jobs.bp, runs.bp, tasks.bp, tenants.bp, worker.bp, openapi.bp):
    api.register_blueprint(part)


@api.before_request
def authenticate() -> flask.Response | None:
    """Where authentication plugs in (API tokens come with a later part of issue 9).

    ``REDCRON_AUTHENTICATE`` in the Flask config is a callable taking the
    request; it returns None to let the request through, or a response
    (e.g. 401) to answer instead.  Unset: every request is let through, so
    bind the server to a trusted interface only.
    """
    check = flask.current_app.config.get("REDCRON_AUTHENTICATE")
    if check is None:
        return None
    result: flask.Response | None = check(flask.request)
    return result
