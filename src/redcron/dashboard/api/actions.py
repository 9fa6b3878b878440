"""The action record of the API and the pages: after every state-changing
request of an identified caller (POST, PUT, PATCH, DELETE; not the worker
protocol, not logging in or out, not a one-off task's enqueue unless refused:
:data:`DATA_PLANE`), one entry through
:func:`redcron.engine.record_action`, whatever the route (a route added later is
recorded without a line of its own; :data:`NAMES` gives it a readable name).

What goes in: who (the identity's token id, ``admin`` for the configured admin
token), the action, the tenant it concerned (a tenant token's own; else the
tenant the auth helpers saw, the path's, or the reply's), the ids (the path's,
those a handler noted, and a created object's), the outcome (2xx/3xx ``ok``,
401/403 ``refused``, else ``error``) with the status, and a detail (the error's
message, or what a handler noted: the settings changed).  A request without a
valid token (401) is not recorded: nobody is known to have asked.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TypeGuard

import flask

from redcron.dashboard.api import auth
from redcron.dashboard.api.common import redcron_app
from redcron.engine import UNAVAILABLE
from redcron.errors import ValidationError
from redcron.model import validation
from redcron.store import Actor, record_action

log = logging.getLogger(__name__)

#: endpoint -> action name; an endpoint missing here is recorded by its own name
NAMES: dict[str, str] = {
    "api.jobs.create_job": "job.create",
    "api.jobs.replace_job": "job.update",
    "api.jobs.delete_job": "job.delete",
    "api.jobs.pause_job": "job.pause",
    "api.jobs.resume_job": "job.resume",
    "api.jobs.trigger_job": "job.trigger",
    "api.runs.cancel_run_route": "run.cancel",
    "api.runs.cancel_task_route": "task.cancel",
    "api.runs.retry_task_route": "task.retry",
    "api.tasks.enqueue_task": "task.enqueue",
    "api.tasks.cancel_task": "task.cancel",
    "api.tenants.set_tenant": "tenant.settings",
    "api.tokens.create_token": "token.create",
    "api.tokens.revoke_token": "token.revoke",
    "api.tenants.replay_dlq": "dlq.replay",
    "api.tenants.discard_dlq": "dlq.discard",
    "ui.jobs.pause": "job.pause",
    "ui.jobs.resume": "job.resume",
    "ui.jobs.trigger": "job.trigger",
    "ui.runs.cancel": "run.cancel",
    "ui.runs.cancel_task": "task.cancel",
    "ui.runs.retry_task": "task.retry",
    "ui.tasks.cancel": "task.cancel",
    "ui.tenants.update": "tenant.settings",
    "ui.dlq.replay": "dlq.replay",
    "ui.dlq.discard": "dlq.discard",
    "api.channels.add_channel": "channel.add",
    "api.channels.remove_channel": "channel.remove",
    "api.channels.test_channel": "channel.test",
    "ui.channels.add": "channel.add",
    "ui.channels.remove": "channel.remove",
    "ui.channels.test": "channel.test",
}
#: endpoints that change no tenant's state: the session's own
UNRECORDED = frozenset({"ui.login.submit", "ui.login.logout"})
#: the data plane: submitting work, which a producer may do thousands of times a
#: minute (it would cost two round trips each and push people's actions out of the
#: bounded streams); recorded only when refused (a viewer, a command task without
#: the grant), which is rare and worth knowing
DATA_PLANE = frozenset({"api.tasks.enqueue_task"})
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: ``flask.g`` keys: ids (by tenant; None: of the request's one tenant) and a
#: detail a handler noted for the record
_IDS, _DETAIL = "redcron_action_ids", "redcron_action_detail"


def note(ids: Iterable[str] = (), detail: str | None = None, tenant: str | None = None) -> None:
    """Add ``ids`` (of ``tenant``, when one request acts on several tenants: the
    DLQ page's replay of a page of entries) and set ``detail``, for this
    request's action record.  Each tenant's stream gets only its own ids."""
    by_tenant: dict[str | None, list[str]] = flask.g.setdefault(_IDS, {})
    by_tenant.setdefault(tenant, []).extend(ids)
    if detail is not None:
        flask.g.setdefault(_DETAIL, detail)


def outcome_of(status: int) -> str:
    if status < 400:
        return "ok"
    return "refused" if status in (401, 403) else "error"


def actor() -> Actor | None:
    """Who this request is, for the record (None: nobody identified)."""
    who: auth.Identity | None = flask.g.get("identity")
    if who is None:
        return None
    via = "api" if (flask.request.blueprint or "").startswith("api") else "page"
    return Actor(who.token_id or "admin", who.kind, who.role, via)


def _targets(body: object) -> list[tuple[str | None, list[str]]]:
    """(tenant, ids) of each entry to record: one, or one per tenant noted."""
    args = dict(flask.request.view_args or {})
    path_tenant = args.pop("tenant", None)
    common: list[str] = []
    if "run_id" in args and "name" in args:
        common.append(f"{args.pop('run_id')}/{args.pop('name')}")
    common.extend(str(v) for v in args.values())
    if isinstance(body, dict):
        for key in ("id", "run_id"):
            value = body.get(key)
            if isinstance(value, str) and value not in common:
                common.append(value)
    noted: dict[str | None, list[str]] = flask.g.get(_IDS, {})
    common.extend(noted.get(None, ()))
    identity: auth.Identity = flask.g.identity
    if identity.kind == "tenant":
        # its own stream only, whatever it named
        return [(identity.tenant, common + [i for t, ids in noted.items() if t for i in ids])]
    several: list[tuple[str | None, list[str]]] = [
        (t, common + ids) for t, ids in noted.items() if _is_name(t)
    ]
    if several:
        return several
    given = body.get("tenant") if isinstance(body, dict) else None
    for candidate in (flask.g.get(auth.NOTED_TENANT), path_tenant, given):
        if _is_name(candidate):
            return [(candidate, common)]
    return [(None, common)]


def _is_name(value: object) -> TypeGuard[str]:
    """A tenant name a key may hold: a path's may be anything (``a:b``, braces),
    which the request was refused for; its record then goes to the admin's stream."""
    try:
        validation.name("tenant", value)
    except ValidationError:
        return False
    return True


def _detail(body: object) -> str:
    noted: str | None = flask.g.get(_DETAIL)
    if noted is not None:
        return noted
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", ""))
    return ""


def after_request(response: flask.Response) -> flask.Response:
    """Record the request if it asked to change state (see the module's docstring)."""
    request = flask.request
    endpoint = request.endpoint or ""
    if request.method not in UNSAFE or endpoint in UNRECORDED:
        return response
    if request.path.startswith(auth.WORKER_PREFIX):
        return response  # the worker protocol: leases, not people's actions
    who = actor()
    if who is None:
        return response
    outcome = outcome_of(response.status_code)
    if endpoint in DATA_PLANE and outcome != "refused":
        return response
    body = response.get_json(silent=True) if response.is_json else None
    try:
        for tenant, ids in _targets(body):
            record_action(
                redcron_app().broker,
                who,
                NAMES.get(endpoint, endpoint or request.path),
                tenant,
                ids,
                outcome,
                response.status_code,
                _detail(body),
            )
    except UNAVAILABLE as exc:
        # the action's answer stands; only its record is missing
        log.warning("could not record action %s: %s", endpoint, exc)
    return response
