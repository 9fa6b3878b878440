"""The JSON API, ``/v1``: jobs, runs, one-off tasks, tenants and their DLQ, the
DLQ across tenants, the live workers and (admin tokens) API tokens.

Every route module holds one blueprint (an :class:`operation.Routes`, whose
routes each declare their OpenAPI operation); this one nests them under ``/v1``
(``openapi.PARTS``, the same list the document is built from) and runs
:func:`authenticate` (bearer tokens, ``auth.py``) before each request.
"""

from __future__ import annotations

import flask

from redcron.dashboard.api import actions, auth, openapi
from redcron.dashboard.api.operation import PREFIX

api = flask.Blueprint("api", __name__, url_prefix=PREFIX)
for part in openapi.PARTS:
    api.register_blueprint(part)


@api.before_request
def authenticate() -> flask.Response | None:
    """Every ``/v1`` request but ``GET /v1/openapi.json`` carries
    ``Authorization: Bearer <token>``: the admin token (``create_app(app,
    admin_token=...)``), a tenant token or a worker token (``TokenStore``).

    The request's :class:`auth.Identity` is ``flask.g.identity``.  No valid
    token: 401.  Worker tokens reach only ``/v1/worker/...``, and those routes
    take only worker and admin tokens: otherwise 403.  A viewer token (admin or
    tenant) gets 403 on every method but GET/HEAD/OPTIONS.  Which tenant's
    records a tenant token sees is up to the routes (``auth.job``, ``auth.run``...).
    Every state-changing request of an identified caller is recorded
    (:mod:`redcron.dashboard.api.actions`), refused ones too.
    """
    request = flask.request
    if (request.method, request.path) in auth.PUBLIC:
        return None
    token = auth.bearer(request.headers.get("Authorization", ""))
    who = auth.identify(token) if token is not None else None
    if who is None:
        return auth.error(401, "unauthorized", "send a valid token: Authorization: Bearer <token>")
    flask.g.identity = who
    worker_route = request.path.startswith(auth.WORKER_PREFIX)
    if worker_route and who.kind == "tenant":
        return auth.error(403, "forbidden", "the worker routes need a worker token")
    if not worker_route and who.kind == "worker":
        return auth.error(403, "forbidden", "a worker token may call only /v1/worker/... routes")
    refused = auth.refuse_viewer()
    if refused is not None:
        return auth.error(403, "forbidden", refused)
    return None


api.after_request(actions.after_request)
