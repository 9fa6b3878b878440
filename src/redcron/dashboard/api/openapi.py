"""``GET /v1/openapi.json``: the API described in OpenAPI 3.1, built from the
definitions the routes check their input with.

* Query parameters are the routes' own definitions (``params.py``: ``LIMIT``,
  ``TENANT``, each list's ``CURSOR``...), request bodies the schemas of
  ``schemas.py``, built from the model's checks.
* Every status a route answers is declared: each operation lists its own
  (404, 409, 429...) and :func:`with_standard_errors` adds what every
  authenticated route can answer (401, 403, 503 while Redis is down) and what
  every route that reads a body or a query can (400, 413).  A new kind of
  refusal that applies to many routes (a role that may not write, say) is one
  more entry in :data:`STANDARD`.
* Links between operations (a created job's id to ``GET /v1/jobs/{job_id}``,
  a triggered run to its tasks...) let a client, or a stateful tester, follow
  ids from one reply to the next request.

Each route declares its operation beside it (``doc=`` on its blueprint, a
:class:`~redcron.dashboard.api.operation.Routes`): :data:`PARTS` are the
blueprints ``/v1`` registers, and ``paths`` is built from what they declared,
so a route cannot exist without its document.  ``tests/unit/test_openapi_routes.py``
checks that every ``/v1`` URL rule and method is in the document and nothing
else is; ``tests/integration/test_openapi_schemathesis.py`` runs schemathesis
against a live server with every check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flask

from redcron.dashboard.api import (
    audit,
    channels,
    dlq,
    jobs,
    live_workers,
    runs,
    tasks,
    tenants,
    tokens,
    worker,
)
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.api.operation import Json, Operation, Routes, content, error, paths
from redcron.dashboard.api.record_schema import ref
from redcron.dashboard.api.schemas import schemas
from redcron.model.channels import allowed_hosts

bp = Routes("openapi", __name__)

#: every blueprint of ``/v1``, in the order they are registered
#: (``redcron.dashboard.api``) and their paths documented
PARTS: tuple[Routes, ...] = (
    jobs.bp,
    runs.bp,
    tasks.bp,
    tenants.bp,
    tokens.bp,
    dlq.bp,
    channels.bp,
    live_workers.bp,
    audit.bp,
    worker.bp,
    bp,
)


def _public(path: str, method: str, op: Json) -> bool:
    return op.get("security") == []


def _reads_input(path: str, method: str, op: Json) -> bool:
    return "requestBody" in op or "parameters" in op


def _reads_body(path: str, method: str, op: Json) -> bool:
    return "requestBody" in op


#: statuses many routes answer: (status, which operations).  A rule that applies
#: to more routes (roles: 403 on every mutating route) is one more line here
STANDARD: tuple[tuple[str, Callable[[str, str, Json], bool]], ...] = (
    ("401", lambda p, m, op: not _public(p, m, op)),
    ("403", lambda p, m, op: not _public(p, m, op)),
    ("503", lambda p, m, op: not _public(p, m, op)),
    ("400", _reads_input),
    ("413", _reads_body),
)


#: the routes whose writes wait for replicas under durability=strict (an enqueue,
#: a job change or trigger, a cancel, a retry, a replay, a worker's report): a
#: write they did not confirm in time answers 202 (common.unconfirmed)
_WAITED = ("/v1/jobs", "/v1/runs", "/v1/tasks", "/v1/dlq", "/v1/tenants/{tenant}/dlq",
           "/v1/worker/complete", "/v1/worker/fail")  # fmt: skip


def _waits(path: str, method: str, op: Json) -> bool:
    return method in ("post", "put", "patch", "delete") and path.startswith(_WAITED)


#: the routes that answer their 202 with more than the generic body
_UNCONFIRMED_AS = {"enqueue_task": "UnconfirmedTask", "trigger_job": "UnconfirmedRun"}


def with_standard_errors(paths: Json) -> Json:
    """``paths`` with the :data:`STANDARD` statuses added to each operation (an
    operation's own description of a status wins), and 202 (:data:`_WAITED`)."""
    description = (
        "Written on the master, not yet confirmed by its replicas (durability=strict): "
        "do not resend; look it up once Redis settles (docs/api.md, Not replicated)"
    )
    for path, item in paths.items():
        for method, op in item.items():
            if method == "parameters":
                continue
            for code, applies in STANDARD:
                if applies(path, method, op):
                    op["responses"].setdefault(code, error(code))
            if _waits(path, method, op):
                body = _UNCONFIRMED_AS.get(op.get("operationId", ""), "Unconfirmed")
                op["responses"].setdefault("202", {"description": description,
                                                   **content(ref(body))})  # fmt: skip
    return paths


def document(registered: Sequence[str] = (), allow: Sequence[str] = ()) -> Json:
    """The whole document; ``registered``: the tasks ``POST /v1/tasks`` takes,
    ``allow``: the hosts a notification channel may name."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "redcron API", "version": "1"},
        "paths": with_standard_errors(paths(PARTS)),
        "components": {
            "schemas": schemas(registered, allow),
            # the admin token, a tenant token or a worker token (docs/api.md)
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


@bp.get("/openapi.json", doc=Operation("openapi", "This document", {"type": "object"}, public=True))
def openapi_json() -> flask.Response:
    app = redcron_app()
    allow = allowed_hosts(app.broker.settings.notify_allow_hosts)
    return flask.jsonify(document(sorted(app.tasks), allow))


#: the document of a server whose app registers no task (tests read its routes)
DOCUMENT: Json = document()
