"""Redis down under the dashboard: every request that needs it answers 503.

While Redis restarts or fails over, a request that needs it — an API route,
the bearer-token check before one, a page, the session check, ``/metrics`` —
answers 503 with ``Retry-After``: in the API's error shape (code
``unavailable``) for ``/v1``, ``/metrics`` and clients that do not ask for
HTML, a short page for browsers.  It is no bug, so it logs no traceback: the
process logs one WARNING when the outage starts and one INFO when a request
goes through again (:class:`~redcron.engine.retry.Outage`, as workers and
beats do).
"""

from __future__ import annotations

import logging

import flask
from werkzeug.wrappers import Response

from redcron.app import App
from redcron.dashboard.api.common import error_response
from redcron.dashboard.ui import error_page, wants_page
from redcron.engine import (
    UNAVAILABLE,
    Outage,
    begin_partial_reads,
    end_partial_reads,
    is_unavailable,
    unavailable_channels,
    unavailable_shards,
)

log = logging.getLogger(__name__)

#: Flask extension key of the process's :class:`Outage`
EXTENSION = "redcron.outage"
#: ``flask.g`` flag: this request met the outage (so it says nothing of recovery)
_MET = "redcron_outage_met"

MESSAGE = "Redis is not answering (restarting or unreachable); try again in {after} s"
#: a shard's master down (the caller gate's error, or a call that failed on it)
SHARD_MESSAGE = (
    "Redis is not answering for shard {shard} (its master is down, restarting or "
    "failing over; the other shards' tenants are served); try again in {after} s"
)
#: a server-state reply (CLUSTERDOWN, TRYAGAIN, LOADING...: engine/replies.py)
STATE_MESSAGE = (
    "Redis is not answering this now ({code}: restarting, failing over or moving "
    "slots); try again in {after} s"
)


def message_of(exc: BaseException, after: int) -> str:
    """The 503's message: which shard or which reply when known, never the
    Redis address (the API's error body is for clients)."""
    shard = getattr(exc, "shard", None)
    if shard is not None:
        return SHARD_MESSAGE.format(shard=shard, after=after)
    code = getattr(exc, "reply_code", None)
    if code:
        return STATE_MESSAGE.format(code=code, after=after)
    return MESSAGE.format(after=after)


def init_outage(web: flask.Flask, app: App) -> None:
    """Answer the :data:`UNAVAILABLE` errors of ``web``'s requests with 503."""
    outage = Outage(log, "dashboard", doing="answering 503")
    web.extensions[EXTENSION] = outage

    def unavailable(exc: Exception) -> Response:
        if not is_unavailable(exc):
            raise exc  # refused credentials: a 500 as before, with its traceback
        flask.g.setdefault(_MET, True)
        request = flask.request
        outage.failed(exc, f"{request.method} {request.path}")
        after = web.config["REDCRON_RETRY_AFTER_S"]
        message = message_of(exc, after)
        if wants_page():
            response: Response = error_page(503, message)
        else:
            response = error_response(503, "unavailable", message)
        response.headers["Retry-After"] = str(after)
        return response

    for cls in UNAVAILABLE:
        web.register_error_handler(cls, unavailable)

    @web.after_request
    def note_recovery(response: flask.Response) -> flask.Response:
        # only while down, and only for a request that did not meet the outage
        # (it may not have needed Redis): one look at the server says if it is back
        if outage.down and not flask.g.get(_MET):
            try:
                app.broker.server_ms()
            except UNAVAILABLE as exc:
                outage.failed(exc, "a look at Redis")
            else:
                outage.ok()
        return response


#: ``flask.g`` key of the request's partial-reads token
_PARTIAL = "redcron_partial_reads"
#: the JSON field naming the shards a reply leaves out
FIELD = "unavailable_shards"
#: the JSON field naming the channels a reply leaves out (each has a slot of its own)
CHANNELS_FIELD = "unavailable_channels"


def init_partial_reads(web: flask.Flask) -> None:
    """Every request reads over the shards in ``partial_reads``
    (``engine/partial.py``): on a Redis Cluster with a master down, a list or a
    page answers with what the live shards hold, and names the shards left out
    (JSON: ``unavailable_shards`` in the reply object; pages: a notice at the
    top) instead of a 503 for all.  A read of one tenant's own shard is not
    partial: that shard down, the request answers 503 (:func:`init_outage`)."""

    @web.before_request
    def begin() -> None:
        setattr(flask.g, _PARTIAL, begin_partial_reads())

    @web.teardown_request
    def end(_exc: BaseException | None) -> None:
        token = flask.g.pop(_PARTIAL, None)
        if token is not None:
            end_partial_reads(token)

    @web.after_request
    def name_them(response: flask.Response) -> flask.Response:
        named = {FIELD: unavailable_shards(), CHANNELS_FIELD: unavailable_channels()}
        named = {k: v for k, v in named.items() if v}
        if not named or not response.is_json or response.status_code >= 300:
            return response
        body = response.get_json(silent=True)
        if isinstance(body, dict):
            body.update(named)
            response.set_data(web.json.dumps(body))
        return response

    @web.context_processor
    def for_pages() -> dict[str, object]:
        return {FIELD: unavailable_shards, CHANNELS_FIELD: unavailable_channels}
