"""A ``/v1`` route cannot exist without its document, nor a document without its
route: each route declares its OpenAPI operation (``doc=`` on its
``operation.Routes`` blueprint) and ``GET /v1/openapi.json``'s paths are built
from those declarations.  These walk the Flask URL map of a real app (no Redis:
nothing here sends a request) against the document."""

from __future__ import annotations

import re
from collections import Counter

import flask
import pytest

from redcron import App
from redcron.dashboard import create_app
from redcron.dashboard.api import auth
from redcron.dashboard.api.openapi import DOCUMENT, PARTS
from redcron.dashboard.api.operation import PREFIX, Operation, Routes, path_of

#: methods Flask answers on its own for every rule
IMPLICIT = {"HEAD", "OPTIONS"}


@pytest.fixture(scope="module")
def web() -> flask.Flask:
    return create_app(App("redis://127.0.0.1:1/0"), admin_token="t")


def _routes(web: flask.Flask) -> set[tuple[str, str]]:
    """(document path, method) of every ``/v1`` URL rule."""
    out = set()
    for rule in web.url_map.iter_rules():
        if rule.rule.startswith(PREFIX + "/"):
            path = path_of(rule.rule.removeprefix(PREFIX))
            out |= {(path, m.lower()) for m in rule.methods or () if m not in IMPLICIT}
    return out


def _documented() -> set[tuple[str, str]]:
    return {
        (path, method)
        for path, item in DOCUMENT["paths"].items()
        for method in item
        if method != "parameters"
    }


def test_every_route_has_its_document_and_every_document_its_route(web: flask.Flask) -> None:
    routes, documented = _routes(web), _documented()
    assert routes, "the URL map has no /v1 route: the walk is broken"
    assert not routes - documented, f"/v1 routes without a document: {sorted(routes - documented)}"
    assert not documented - routes, f"documented without a route: {sorted(documented - routes)}"


def test_each_path_documents_the_parameters_its_rule_names() -> None:
    for path, item in DOCUMENT["paths"].items():
        named = re.findall(r"{([^}]+)}", path)
        assert [p["name"] for p in item.get("parameters", [])] == named, path


def test_operation_ids_are_unique() -> None:
    ids = Counter(op.operation.op_id for part in PARTS for op in part.operations)
    assert not [i for i, n in ids.items() if n > 1]


def test_a_route_declared_without_its_document_is_refused() -> None:
    bp = Routes("undocumented", __name__)
    with pytest.raises(TypeError, match="has no document"):
        bp.get("/nowhere")
    with pytest.raises(TypeError, match="has no document"):
        bp.route("/nowhere", methods=["POST"])
    assert not bp.operations and not bp.deferred_functions


def test_a_documented_route_is_declared_for_the_document() -> None:
    bp = Routes("documented", __name__, url_prefix="/things")

    @bp.post("/<thing_id>/poke", doc=Operation("poke", "Poke a thing", errors=("404",)))
    def poke(thing_id: str) -> flask.Response:
        raise NotImplementedError

    (declared,) = bp.operations
    assert (declared.rule, declared.method) == ("/things/<thing_id>/poke", "post")
    assert path_of(declared.rule) == "/v1/things/{thing_id}/poke"


def test_the_routes_that_take_no_token_are_the_documented_public_ones() -> None:
    public = {
        (method.upper(), path)
        for path, item in DOCUMENT["paths"].items()
        for method, op in item.items()
        if method != "parameters" and op.get("security") == []
    }
    with_head = public | {("HEAD", path) for method, path in public if method == "GET"}
    assert with_head == auth.PUBLIC
