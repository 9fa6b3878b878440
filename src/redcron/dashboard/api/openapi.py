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

``tests/integration/test_api.py`` checks that every ``/v1`` URL rule and method
is here and nothing else is; ``tests/integration/test_openapi_schemathesis.py``
runs schemathesis against a live server with every check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flask

from redcron.dashboard.api import audit, dlq, jobs, live_workers, runs, tokens
from redcron.dashboard.api import channels as channels_api
from redcron.dashboard.api import tenants as tenants_api
from redcron.dashboard.api.common import redcron_app
from redcron.dashboard.api.params import DLQ_LIMIT, EMPTY_BODY, LIMIT, TENANT
from redcron.dashboard.api.record_schema import ref
from redcron.dashboard.api.schemas import schemas
from redcron.model import validation
from redcron.model.channels import allowed_hosts

bp = flask.Blueprint("openapi", __name__)

Json = dict[str, Any]


def _json(schema: Json) -> Json:
    return {"content": {"application/json": {"schema": schema}}}


_RETRY_AFTER: Json = {
    "Retry-After": {
        "description": "Seconds to wait before trying again",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    }
}
_WWW_AUTHENTICATE: Json = {"WWW-Authenticate": {"schema": {"type": "string"}}}

#: status -> (what it means, the headers it carries)
ERRORS: dict[str, tuple[str, Json]] = {
    "400": ("Bad input: error.field names the field, error.message the fix", {}),
    "401": ("No valid token: send Authorization: Bearer <token>", _WWW_AUTHENTICATE),
    "403": ("The token may not do this: a worker token outside /v1/worker/..., a tenant "
            "token on them, a queue a worker token lacks, a tenant without the "
            "allow_commands grant, or a setting only the admin may change", {}),
    "404": ("No such object (or another tenant's)", {}),
    "409": ("The object's state does not allow it", {}),
    "413": ("Body over the size limit (MAX_CONTENT_LENGTH, 1 MiB by default)", {}),
    "429": ("Admission refused (tenant at max_queued): retry later", _RETRY_AFTER),
    "503": ("Redis is not answering (restarting or failing over): retry later", _RETRY_AFTER),
}  # fmt: skip
#: second meanings on the worker routes' leases
_LEASE_409 = "The lease is no longer held (cancelled, reaped or superseded); nothing was written"
_LEASE_403 = ("The lease_id is not genuine (altered, made up, or signed by another deployment) "
              "or was leased with another token; nothing was written")  # fmt: skip


def error(code: str, description: str | None = None) -> Json:
    """The response of an error status, in the API's one error shape."""
    text, headers = ERRORS[code]
    out: Json = {"description": description or text, **_json(ref("Error"))}
    if headers:
        out["headers"] = {k: {**v, "required": True} for k, v in headers.items()}
    return out


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
                                                   **_json(ref(body))})  # fmt: skip
    return paths


def _link(op_id: str, parameters: Json | None = None, body: Any = None) -> Json:
    out: Json = {"operationId": op_id}
    if parameters:
        out["parameters"] = parameters
    if body is not None:
        out["requestBody"] = body
    return out


def _op(
    op_id: str,
    summary: str,
    ok: str | Sequence[str],
    schema: Json | None,
    errors: Sequence[str | tuple[str, str]] = (),
    request: Json | None = None,
    query: Sequence[Json] = (),
    links: Json | None = None,
) -> Json:
    """One operation: its success status(es) with ``schema``, its own ``errors``
    (a status, or a status with its meaning here), its body and query."""
    responses: Json = {}
    for code in (ok,) if isinstance(ok, str) else ok:
        responses[code] = {"description": "OK", **(_json(schema) if schema else {})}
        if links:
            responses[code]["links"] = links
    for item in errors:
        code, text = item if isinstance(item, tuple) else (item, None)
        responses[code] = error(code, text)
    op: Json = {"operationId": op_id, "summary": summary, "responses": responses}
    if request is not None:
        op["requestBody"] = {"required": True, **_json(request)}
    if query:
        op["parameters"] = list(query)
    return op


def _optional_body(op: Json) -> Json:
    """An operation that takes no body but reads one if sent: ``{}`` at most."""
    op["requestBody"] = {"required": False, **_json(EMPTY_BODY)}
    return op


def _path(*names: str) -> list[Json]:
    string = {"type": "string", "minLength": 1}
    return [{"name": n, "in": "path", "required": True, "schema": string} for n in names]


#: a reply of reads over every shard, some of which did not answer (a Redis
#: Cluster master down: dashboard/outage.py, init_partial_reads)
UNAVAILABLE_SHARDS: Json = {
    "type": "array", "items": {"type": "integer"},
    "description": "present only when some shards did not answer (their Redis Cluster "
    "master down or failing over): the reply holds what the other shards hold",
}  # fmt: skip


def _page(key: str, item: Json) -> Json:
    after = "Pass as cursor for the next page; null on the last"
    return {"type": "object", "required": [key, "next_cursor"], "properties": {
        key: {"type": "array", "items": item},
        "next_cursor": {"type": ["string", "null"], "description": after},
        "unavailable_shards": UNAVAILABLE_SHARDS}}  # fmt: skip


_JOB = "$response.body#/id"
_JOB_LINKS: Json = {
    "GetJob": _link("get_job", {"job_id": _JOB}),
    "ReplaceJob": _link("replace_job", {"job_id": _JOB}),
    "DeleteJob": _link("delete_job", {"job_id": _JOB}),
    "PauseJob": _link("pause_job", {"job_id": _JOB}),
    "ResumeJob": _link("resume_job", {"job_id": _JOB}),
    "TriggerJob": _link("trigger_job", {"job_id": _JOB}),
    "ListJobRuns": _link("list_runs", {"job": _JOB}),
}
_RUN_LINKS: Json = {
    "GetRunTask": _link("get_task", {"task_id": "$response.body#/tasks/0/id"}),
    "CancelRun": _link("cancel_run", {"run_id": "$response.body#/id"}),
    "CancelRunTask": _link("cancel_run_task", {"run_id": "$response.body#/id",
                                               "name": "$response.body#/tasks/0/name"}),
    "RetryRunTask": _link("retry_run_task", {"run_id": "$response.body#/id",
                                             "name": "$response.body#/tasks/0/name"}),
}  # fmt: skip
_TASK_LINKS: Json = {
    "GetTask": _link("get_task", {"task_id": "$response.body#/id"}),
    "CancelTask": _link("cancel_task", {"task_id": "$response.body#/id"}),
}
_DEAD = {"tenant": "$response.body#/entries/0/tenant",
         "task_id": "$response.body#/entries/0/task_id"}  # fmt: skip
_DLQ_LINKS: Json = {"ReplayDead": _link("replay_dead", _DEAD),
                    "DiscardDead": _link("discard_dead", _DEAD)}  # fmt: skip
_CHANNEL = {"channel_id": "$response.body#/channel/id"}
_CHANNEL_LINKS: Json = {"GetChannel": _link("get_channel", _CHANNEL),
                        "TestChannel": _link("test_channel", _CHANNEL),
                        "ChannelDeliveries": _link("list_deliveries", _CHANNEL),
                        "RemoveChannel": _link("remove_channel", _CHANNEL)}  # fmt: skip
_CHANNEL_LIST_LINKS: Json = {
    "GetChannel": _link("get_channel", {"channel_id": "$response.body#/channels/0/id"})
}
_TENANT = {"tenant": "$response.body#/tenant"}
_TENANT_LINKS: Json = {"GetTenant": _link("get_tenant", _TENANT),
                       "SetTenant": _link("set_tenant", _TENANT),
                       "TenantDlq": _link("list_tenant_dlq", _TENANT)}  # fmt: skip
_LEASE = {"lease_id": "$response.body#/0/lease_id"}
_LEASE_LINKS: Json = {
    "Heartbeat": _link("worker_heartbeat", body={"worker_id": "$request.body#/worker_id",
                                                 "lease_ids": ["$response.body#/0/lease_id"]}),
    "Complete": _link("worker_complete", body=_LEASE),
    "Fail": _link("worker_fail", body=_LEASE),
}  # fmt: skip


def paths() -> Json:
    """Every ``/v1`` route (a fresh copy: :func:`with_standard_errors` fills it in)."""
    dlq_page = _page("entries", ref("DlqEntry"))
    return {
        "/v1/jobs": {
            "post": _op("create_job", "Create (201) or update (200) a job, keyed by tenant + "
                        "name; warnings name the Python tasks no live worker serves",
                        ("201", "200"), ref("JobCreated"), (), ref("JobBody"),
                        query=(jobs.ALLOW_UNREGISTERED.describe(),), links=_JOB_LINKS),
            "get": _op("list_jobs", "Jobs by tenant and name, a page at a time (no cursor: "
                       "the first page)", "200", _page("jobs", ref("Job")),
                       query=(TENANT.describe(), LIMIT.describe(), jobs.CURSOR.describe()),
                       links={"GetJob": _link("get_job", {"job_id": "$response.body#/jobs/0/id"})}),
        },
        "/v1/jobs/{job_id}": {
            "parameters": _path("job_id"),
            "get": _op("get_job", "A job", "200", ref("Job"), ("404",)),
            "put": _op("replace_job", "Replace a job's spec (its name and tenant stay)", "200",
                       ref("Job"), ("404",), ref("JobReplaceBody"),
                       query=(jobs.ALLOW_UNREGISTERED.describe(),)),
            "delete": _op("delete_job", "Delete a job", "204", None, ("404",)),
        },
        "/v1/jobs/{job_id}/pause": {
            "parameters": _path("job_id"),
            "post": _op("pause_job", "Pause a job", "200", ref("Job"), ("404",)),
        },
        "/v1/jobs/{job_id}/resume": {
            "parameters": _path("job_id"),
            "post": _op("resume_job", "Resume a job", "200", ref("Job"), ("404",)),
        },
        "/v1/jobs/{job_id}/trigger": {
            "parameters": _path("job_id"),
            "post": {**_op("trigger_job", "Start a manual run now (202: created, but "
                           "durability=strict's replicas did not confirm it: look the run "
                           "up, do not trigger again)", "201",
                           {"type": "object", "required": ["run_id"],
                            "properties": {"run_id": {"type": "string"}}},
                           ("404", "429"), links={
                               "GetRun": _link("get_run", {"run_id": "$response.body#/run_id"}),
                               "CancelRun": _link("cancel_run",
                                                  {"run_id": "$response.body#/run_id"})}),
                     "requestBody": {"required": False, **_json({
                         "type": "object", "additionalProperties": False,
                         "properties": {"params": {"type": "object",
                                                  "additionalProperties": True}}})}},
        },
        "/v1/runs": {
            "get": _op("list_runs", "Runs, newest first, a page at a time", "200",
                       _page("runs", ref("Run")), ("404",),
                       query=(runs.JOB.describe(), runs.STATE.describe(), runs.LATE.describe(),
                              TENANT.describe(), LIMIT.describe(), runs.CURSOR.describe()),
                       links={"GetRun": _link("get_run", {"run_id": "$response.body#/runs/0/id"})}),
        },
        "/v1/runs/{run_id}": {
            "parameters": _path("run_id"),
            "get": _op("get_run", "A run with its tasks", "200", ref("Run"), ("404",),
                       links=_RUN_LINKS),
        },
        "/v1/runs/{run_id}/cancel": {
            "parameters": _path("run_id"),
            "post": _optional_body(_op("cancel_run", "Cancel a run: every live task ends "
                                       "cancelled at once", "200", ref("RunCancel"),
                                       ("404", "409"))),
        },
        "/v1/runs/{run_id}/tasks/{name}/cancel": {
            "parameters": _path("run_id", "name"),
            "post": _optional_body(_op("cancel_run_task", "Cancel one task of a run", "200",
                                       ref("RunCancel"), ("404", "409"))),
        },
        "/v1/runs/{run_id}/tasks/{name}/retry": {
            "parameters": _path("run_id", "name"),
            "post": _optional_body(_op("retry_run_task", "Retry one ended task of a run", "200",
                                       ref("Run"), ("404", "409"), links=_RUN_LINKS)),
        },
        "/v1/tasks": {
            "post": _op("enqueue_task", "Enqueue a task the server's app registers (200 with "
                        "duplicate true: the call folded into an existing task, a unique "
                        "window's or a debounce's; 202: queued, but durability=strict's "
                        "replicas did not confirm it: look the id up, do not enqueue again)",
                        ("201", "200"), ref("EnqueuedTask"), ("429",),
                        ref("TaskBody"), links=_TASK_LINKS),
        },
        "/v1/tasks/{task_id}": {
            "parameters": _path("task_id"),
            "get": _op("get_task", "A task instance", "200", ref("Task"), ("404",)),
        },
        "/v1/tasks/{task_id}/cancel": {
            "parameters": _path("task_id"),
            "get": _op("get_task_named_cancel", "The task whose id is {task_id}/cancel (a "
                       "run's task named cancel: GET /v1/tasks/{task_id} reads the same)",
                       "200", ref("Task"), ("404",)),
            "post": _optional_body(_op("cancel_task", "Cancel a task: it ends cancelled at "
                                       "once; 409 if it had ended", "200", ref("TaskCancel"),
                                       ("404", "409"))),
        },
        "/v1/tenants": {
            "get": _op("list_tenants", "Tenants by name with their settings and live figures, "
                       "a page at a time (admin tokens; a tenant token: 403)", "200",
                       _page("tenants", ref("TenantStatus")),
                       query=(LIMIT.describe(), tenants_api.CURSOR.describe()),
                       links={"GetTenant": _link("get_tenant",
                                                 {"tenant": "$response.body#/tenants/0/tenant"})}),
        },
        "/v1/tokens": {
            "post": _op("create_token", "Mint an API token (admin operator only): a tenant's, "
                        "an extra admin's or a worker's; the secret is in this reply, once",
                        "201", ref("TokenCreated"), (), ref("TokenBody"),
                        links={"RevokeToken": _link("revoke_token",
                                                    {"token_id": "$response.body#/token/id"})}),
            "get": _op("list_tokens", "API tokens, oldest first, a page at a time (admin "
                       "tokens): never a secret", "200", _page("tokens", ref("Token")),
                       query=(tokens.KIND.describe(), tokens.TENANT.describe(), LIMIT.describe(),
                              tokens.CURSOR.describe())),
        },
        "/v1/tokens/{token_id}": {
            "parameters": _path("token_id"),
            "delete": _op("revoke_token", "Revoke a token (admin operator only): the next "
                          "request with it is a 401", "200", ref("Token"), ("404",)),
        },
        "/v1/tenants/{tenant}": {
            "parameters": _tenant_path(),
            "get": _op("get_tenant", "A tenant's settings and live figures", "200",
                       ref("TenantStatus"), ("400", "404"), links=_TENANT_LINKS),
            "put": _op("set_tenant", "Change some settings (admin only)", "200",
                       ref("TenantStatus"), ("404",), ref("TenantSettings"),
                       links=_TENANT_LINKS),
        },
        "/v1/tenants/{tenant}/dlq": {
            "parameters": _tenant_path(),
            "get": _op("list_tenant_dlq", "Dead tasks of a tenant, oldest first, a page at a "
                       "time", "200", dlq_page, ("404",),
                       query=(DLQ_LIMIT.describe(), dlq.CURSOR.describe()), links=_DLQ_LINKS),
        },
        "/v1/dlq": {
            "get": _op("list_dlq", "Dead tasks of every tenant (a tenant token: its own) by "
                       "tenant, oldest first, a page at a time", "200", dlq_page,
                       query=(TENANT.describe(), dlq.NAME.describe(), LIMIT.describe(),
                              dlq.CURSOR.describe()), links=_DLQ_LINKS),
        },
        "/v1/workers": {
            "get": _op("list_workers", "Live workers by id, a page at a time, each with the "
                       "tasks it holds (a tenant token: the workers serving it, its own tasks)",
                       "200", _page("workers", ref("Worker")),
                       query=(LIMIT.describe(), live_workers.CURSOR.describe())),
        },
        "/v1/tenants/{tenant}/dlq/{task_id}/replay": {
            "parameters": _tenant_path() + _path("task_id"),
            "post": _optional_body(_op("replay_dead", "Replay one dead task", "200",
                                       ref("Task"), ("404", "409"), links=_TASK_LINKS)),
        },
        "/v1/tenants/{tenant}/dlq/{task_id}/discard": {
            "parameters": _tenant_path() + _path("task_id"),
            "post": _optional_body(_op("discard_dead", "Discard one dead task for good (it "
                                       "ends cancelled)", "200", ref("Task"), ("404", "409"))),
        },
        "/v1/worker/lease": {
            "post": _op("worker_lease", "Lease attempts to run (HTTP worker); long-polls up to "
                        "wait_s", "200", {"type": "array", "items": ref("WorkerLease")}, (),
                        ref("WorkerLeaseBody"), links=_LEASE_LINKS),
        },
        "/v1/worker/heartbeat": {
            "post": _op("worker_heartbeat", "Renew leases: each answers ok, revoked "
                        "(cancelled) or lost", "200", {"type": "object", "additionalProperties":
                        {"enum": ["ok", "revoked", "lost"]}}, (("403", _LEASE_403),),
                        ref("WorkerHeartbeatBody")),
        },
        "/v1/worker/complete": {
            "post": _op("worker_complete", "Report an attempt done", "200", ref("WorkerReport"),
                        (("403", _LEASE_403), ("409", _LEASE_409)), ref("WorkerCompleteBody")),
        },
        "/v1/worker/fail": {
            "post": _op("worker_fail", "Report an attempt failed (retried or dead-lettered)",
                        "200", ref("WorkerReport"), (("403", _LEASE_403), ("409", _LEASE_409)),
                        ref("WorkerFailBody")),
        },
        "/v1/channels": {
            "get": _op("list_channels", "Notification channels (admin: every one, or "
                       "tenant's; a tenant token: its own)", "200", {"type": "object",
                       "required": ["channels"], "properties": {
                           "channels": {"type": "array", "items": ref("Channel")}}},
                       query=(TENANT.describe(),), links=_CHANNEL_LIST_LINKS),
            "post": _op("add_channel", "Add a channel (a tenant token: for its tenant; the "
                        "admin: for tenant, or every tenant's events without one); the "
                        "secret is shown this once", "201", {"type": "object",
                            "required": ["channel", "secret"], "properties": {
                            "channel": ref("Channel"),
                            "secret": {"type": ["string", "null"]}}},
                        (("409", "A channel cap is reached (20 per tenant, 1,000 in "
                               "all): remove one first"),),
                        ref("ChannelBody"), links=_CHANNEL_LINKS),
        },
        "/v1/channels/{channel_id}": {
            "parameters": _path("channel_id"),
            "get": _op("get_channel", "One channel and its pending deliveries", "200",
                       {"type": "object", "required": ["channel", "pending"],
                        "properties": {"channel": ref("Channel"),
                        "pending": {"type": "integer"}}}, ("404",)),
            "delete": _op("remove_channel", "Remove a channel with what it still had to send",
                          "200", ref("Channel"), ("404",)),
        },
        "/v1/channels/{channel_id}/test": {
            "parameters": _path("channel_id"),
            "post": _optional_body(_op("test_channel", "Queue a test message for the notifier "
                                       "to send", "202", {"type": "object",
                                           "required": ["delivery"], "properties": {
                                           "delivery": {"type": "string"}}}, ("404",))),
        },
        "/v1/channels/{channel_id}/deliveries": {
            "parameters": _path("channel_id"),
            "get": _op("list_deliveries", "The channel's delivery log, newest first "
                       "(bounded)", "200", {"type": "object", "required": ["deliveries", "pending"],
                       "properties": {
                           "deliveries": {"type": "array", "items": ref("Delivery")},
                           "pending": {"type": "integer"}}}, ("404",),
                       query=(channels_api.DELIVERIES_LIMIT.describe(),)),
        },
        "/v1/audit": {
            "get": _op("list_actions", "Who did what, newest first: every state-changing "
                       "request (a tenant token: its own tenant's)", "200",
                       _page("actions", ref("Action")),
                       query=(TENANT.describe(), LIMIT.describe(), audit.CURSOR.describe())),
        },
        "/v1/openapi.json": {
            "get": {**_op("openapi", "This document", "200", {"type": "object"}),
                    "security": []},  # no token
        },
    }  # fmt: skip


def _tenant_path() -> list[Json]:
    return [{"name": "tenant", "in": "path", "required": True,
             "schema": validation.name_schema()}]  # fmt: skip


def document(registered: Sequence[str] = (), allow: Sequence[str] = ()) -> Json:
    """The whole document; ``registered``: the tasks ``POST /v1/tasks`` takes,
    ``allow``: the hosts a notification channel may name."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "redcron API", "version": "1"},
        "paths": with_standard_errors(paths()),
        "components": {
            "schemas": schemas(registered, allow),
            # the admin token, a tenant token or a worker token (docs/api.md)
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


#: the document of a server whose app registers no task (tests read its routes)
DOCUMENT: Json = document()


@bp.get("/openapi.json")
def openapi_json() -> flask.Response:
    app = redcron_app()
    allow = allowed_hosts(app.broker.settings.notify_allow_hosts)
    return flask.jsonify(document(sorted(app.tasks), allow))
