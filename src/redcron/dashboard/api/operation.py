"""Each ``/v1`` route declares its OpenAPI operation where it is declared, so a
route cannot exist without its document.

A route module's blueprint is a :class:`Routes`, whose ``get``/``post``/...
take the operation as ``doc=`` and refuse a route without one::

    @bp.get("/jobs/<job_id>", doc=Operation("get_job", "A job", reply=ref("Job"),
                                            errors=("404",)))
    def get_job(job_id: str) -> flask.Response: ...

The blueprint keeps what it declared (:attr:`Routes.operations`), and
:func:`paths` builds the document's ``paths`` from the blueprints the API
registers (``openapi.PARTS``): each path from the route's rule (its path
parameters too, :data:`PATH_SCHEMAS`), each operation from its
:class:`Operation`.  ``openapi.py`` adds what many routes share (401, 403,
503, 400, 413, 202) and the components.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import flask
from flask.sansio.scaffold import T_route

from redcron.dashboard.api.record_schema import ref
from redcron.model import validation

Json = dict[str, Any]

#: where the API blueprint sits (``redcron.dashboard.api.api``)
PREFIX = "/v1"


def content(schema: Json) -> Json:
    """A body of ``schema`` in JSON."""
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


def error(code: str, description: str | None = None) -> Json:
    """The response of an error status, in the API's one error shape."""
    text, headers = ERRORS[code]
    out: Json = {"description": description or text, **content(ref("Error"))}
    if headers:
        out["headers"] = {k: {**v, "required": True} for k, v in headers.items()}
    return out


def link(op_id: str, parameters: Json | None = None, body: Any = None) -> Json:
    """A link from a reply to the operation ``op_id``: its path parameters (or
    its body) taken from the reply (``$response.body#/...``)."""
    out: Json = {"operationId": op_id}
    if parameters:
        out["parameters"] = parameters
    if body is not None:
        out["requestBody"] = body
    return out


#: a reply of reads over every shard, some of which did not answer (a Redis
#: Cluster master down: dashboard/outage.py, init_partial_reads)
UNAVAILABLE_SHARDS: Json = {
    "type": "array", "items": {"type": "integer"},
    "description": "present only when some shards did not answer (their Redis Cluster "
    "master down or failing over): the reply holds what the other shards hold",
}  # fmt: skip


#: a list of channels, some of whose own slots did not answer
UNAVAILABLE_CHANNELS: Json = {
    "type": "array", "items": {"type": "string"},
    "description": "present only when some channels' keys did not answer (their Redis "
    "Cluster master down or failing over): the reply lists the others",
}  # fmt: skip


def paged(key: str, item: Json) -> Json:
    """A page of a list: ``key`` holds the items, ``next_cursor`` the next page."""
    after = "Pass as cursor for the next page; null on the last"
    return {"type": "object", "required": [key, "next_cursor"], "properties": {
        key: {"type": "array", "items": item},
        "next_cursor": {"type": ["string", "null"], "description": after},
        "unavailable_shards": UNAVAILABLE_SHARDS}}  # fmt: skip


class Param(Protocol):
    """A query parameter (``params.py``): it reads itself and describes itself."""

    def describe(self) -> Json: ...


@dataclass(frozen=True)
class Operation:
    """One route's operation: its success status(es) (``ok``) with ``reply``
    (None: no body), its own ``errors`` (a status, or a status with its meaning
    here), its ``body`` (``body_required=False``: it may be left out), its
    ``query`` and the ``links`` of its success replies.  ``public``: no token
    (the document itself)."""

    op_id: str
    summary: str
    reply: Json | None = None
    ok: str | Sequence[str] = "200"
    errors: Sequence[str | tuple[str, str]] = ()
    body: Json | None = None
    body_required: bool = True
    query: Sequence[Param] = ()
    links: Json | None = None
    public: bool = False

    def document(self) -> Json:
        """The operation object (a fresh copy: ``openapi.py`` adds to it)."""
        responses: Json = {}
        for code in (self.ok,) if isinstance(self.ok, str) else self.ok:
            responses[code] = {"description": "OK", **(content(self.reply) if self.reply else {})}
            if self.links:
                responses[code]["links"] = self.links
        for item in self.errors:
            code, text = item if isinstance(item, tuple) else (item, None)
            responses[code] = error(code, text)
        op: Json = {"operationId": self.op_id, "summary": self.summary, "responses": responses}
        if self.body is not None:
            op["requestBody"] = {"required": self.body_required, **content(self.body)}
        if self.query:
            op["parameters"] = [param.describe() for param in self.query]
        if self.public:
            op["security"] = []
        return op


@dataclass(frozen=True)
class Declared:
    """A route as its blueprint declared it: ``rule`` under the blueprint's prefix."""

    rule: str
    method: str  # lower case, as in the document
    operation: Operation


class Routes(flask.Blueprint):
    """A blueprint whose every route carries its :class:`Operation` (``doc=``)."""

    def __init__(self, name: str, import_name: str, **options: Any) -> None:
        super().__init__(name, import_name, **options)
        self.operations: list[Declared] = []

    def route(self, rule: str, **options: Any) -> Callable[[T_route], T_route]:
        doc = options.pop("doc", None)
        if not isinstance(doc, Operation):
            raise TypeError(
                f"{self.name}: route {rule!r} has no document: declare it with "
                "doc=Operation(...) (dashboard/api/operation.py)"
            )
        full = (self.url_prefix or "") + rule
        for method in options.get("methods") or ("GET",):
            self.operations.append(Declared(full, method.lower(), doc))
        return super().route(rule, **options)


#: the schema of a path parameter, by name (any other: a non-empty string)
PATH_SCHEMAS: dict[str, Callable[[], Json]] = {"tenant": validation.name_schema}
_STRING: Json = {"type": "string", "minLength": 1}
#: ``<name>`` or ``<converter:name>`` in a Flask rule
_VARIABLE = re.compile(r"<(?:[^:>]+:)?([^>]+)>")


def path_of(rule: str) -> str:
    """The document's path of a Flask rule: ``/jobs/<job_id>`` -> ``/v1/jobs/{job_id}``."""
    return PREFIX + _VARIABLE.sub(r"{\1}", rule)


def path_parameters(rule: str) -> list[Json]:
    """The path parameters of a Flask rule, in the order it names them."""
    out = []
    for name in _VARIABLE.findall(rule):
        schema = PATH_SCHEMAS[name]() if name in PATH_SCHEMAS else dict(_STRING)
        out.append({"name": name, "in": "path", "required": True, "schema": schema})
    return out


def paths(parts: Sequence[Routes]) -> Json:
    """The document's ``paths``: every operation the blueprints declared (a
    fresh copy: ``openapi.with_standard_errors`` fills it in)."""
    out: Json = {}
    for part in parts:
        for declared in part.operations:
            path = path_of(declared.rule)
            if path not in out:
                named = path_parameters(declared.rule)
                out[path] = {"parameters": named} if named else {}
            if declared.method in out[path]:
                raise ValueError(f"{declared.method.upper()} {path} is declared twice")
            out[path][declared.method] = declared.operation.document()
    return out
