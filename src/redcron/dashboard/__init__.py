"""The web face of redcron: a Flask app over one :class:`redcron.App`.

``api/`` is the JSON API under ``/v1``; ``ui/`` the HTML dashboard at ``/``
(templates and static files beside it); ``metrics.py`` serves ``GET /metrics``
(Prometheus).  The dashboard talks to Redis only
through the App and its stores (``app.jobs``, ``app.tenants``, ``app.broker``
public methods), like the CLI.
"""

from __future__ import annotations

from typing import Any

import flask

from redcron.app import App
from redcron.dashboard.api import api
from redcron.dashboard.api.auth import ADMIN_DIGEST
from redcron.dashboard.api.common import EXTENSION, StrictJSON, register_error_handlers
from redcron.dashboard.metrics import init_metrics
from redcron.dashboard.outage import init_outage, init_partial_reads
from redcron.dashboard.totals import init_totals
from redcron.dashboard.ui import init_ui
from redcron.store import digest

#: request bodies above this many bytes are refused with 413
MAX_BODY_BYTES = 1024 * 1024
#: seconds a client is told to wait (``Retry-After``) when admission refuses it
#: or Redis is down (503)
RETRY_AFTER_S = 5


def create_app(
    app: App,
    admin_token: str | None = None,
    metrics_token: str | None = None,
    **config: Any,
) -> flask.Flask:
    """A Flask application serving ``app``'s jobs, runs, tasks and tenants:
    the HTML dashboard, the JSON API and ``GET /metrics``.

    Args:
        app: the redcron App (its settings say which Redis; its registered
            tasks are what ``POST /v1/tasks`` may enqueue).
        admin_token: the token that may do everything (kept as its SHA-256
            only).  None: only tenant and worker tokens (``TokenStore``) work.
        metrics_token: the bearer token ``GET /metrics`` requires.  None: the
            endpoint is open, as scrape targets usually are (firewall it).
        config: Flask config overrides, e.g. ``MAX_CONTENT_LENGTH``,
            ``REDCRON_RETRY_AFTER_S``, ``SECRET_KEY`` (default: a secret kept in
            Redis, shared by replicas) or ``SESSION_COOKIE_SECURE`` (behind HTTPS).
    """
    web = flask.Flask(__name__)
    web.json = StrictJSON(web)
    web.config.update(
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
        REDCRON_RETRY_AFTER_S=RETRY_AFTER_S,
    )
    web.config[ADMIN_DIGEST] = digest(admin_token) if admin_token else None
    init_ui(web)
    web.config.update(config)
    web.extensions[EXTENSION] = app
    web.register_blueprint(api)
    init_totals(web, app)
    init_metrics(web, app, metrics_token)
    register_error_handlers(web)
    init_outage(web, app)
    init_partial_reads(web)
    return web


__all__ = ["create_app"]
